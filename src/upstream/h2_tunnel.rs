//! An extended CONNECT's stream on an upstream HTTP/2 connection (RFC 8441)
//! as the byte stream a tunnel relays, once the origin answered 2xx: reads
//! are the origin's DATA (END_STREAM is end of file, a reset an error),
//! released to the windows as the tunnel takes them, so a slow client slows
//! the origin; writes are DATA within the origin's windows; shutting down
//! sends END_STREAM, a half close. Dropped, the stream is reset (CANCEL)
//! unless both sides ended.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::h2_stream::{H2Stream, StreamError};

/// The stream of an open tunnel.
pub struct H2TunnelIo {
    stream: H2Stream,
    /// END_STREAM was sent.
    shut: bool,
}

impl H2TunnelIo {
    /// The tunnel over `stream`, whose 2xx head was taken.
    pub fn new(stream: H2Stream) -> Self {
        H2TunnelIo {
            stream,
            shut: false,
        }
    }
}

fn io_error(e: StreamError) -> io::Error {
    match e {
        StreamError::Reset(_) => io::ErrorKind::ConnectionReset.into(),
        StreamError::Connection(_) => io::ErrorKind::BrokenPipe.into(),
    }
}

impl AsyncRead for H2TunnelIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.stream.poll_read_tunnel(cx, buf).map_err(io_error)
    }
}

impl AsyncWrite for H2TunnelIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.shut {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let room = ready!(self.stream.poll_send_capacity(cx)).map_err(io_error)?;
        let n = room.min(data.len());
        Poll::Ready(Ok(self
            .stream
            .send_data(Bytes::copy_from_slice(&data[..n]), false)))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Queued DATA goes out as the connection task writes.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.shut {
            self.shut = true;
            self.stream.send_data(Bytes::new(), true);
        }
        Poll::Ready(Ok(()))
    }
}
