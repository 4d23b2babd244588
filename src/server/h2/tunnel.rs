//! The tunnel of an extended CONNECT (RFC 8441): once the stream answered
//! `:status 200`, the handler's [`Tunnel`] (the proxy's relay to an
//! upgraded upstream connection) runs over the stream as it would over an
//! HTTP/1 connection after a 101. The stream reads as the client's DATA
//! (END_STREAM is end of file, RST_STREAM an error) and writes as DATA
//! frames within the client's windows; shutting it down sends END_STREAM, a
//! half close. Reading releases the window as the tunnel takes the bytes,
//! so a slow upstream slows the client down, as the HTTP/1 relay does.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::stream::H2Stream;
use crate::http::Tunnel;
use crate::http2::ErrorCode;

/// An HTTP/2 stream as the byte stream a tunnel relays.
struct StreamTunnelIo<'s, 'a> {
    stream: &'s mut H2Stream<'a>,
    /// END_STREAM was sent.
    shut: bool,
}

impl<'a> H2Stream<'a> {
    /// Runs `tunnel` over this stream until both sides ended (or it failed);
    /// a tunnel that ends before our END_STREAM went out resets the stream,
    /// so the client cannot take a broken tunnel for a closed one.
    pub(super) async fn run_tunnel(&mut self, tunnel: Box<dyn Tunnel + 'a>) {
        let mut io = StreamTunnelIo {
            stream: self,
            shut: false,
        };
        // The client's bytes all come as DATA: none arrived ahead of the
        // answer outside the stream.
        tunnel.run(&mut io, Vec::new()).await;
        if !io.shut {
            self.reset(ErrorCode::Cancel);
        }
    }
}

impl AsyncRead for StreamTunnelIo<'_, '_> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let s = &mut *self.get_mut().stream;
        let id = s.stream_id;
        let mut sh = s.shared.borrow_mut();
        let sh = &mut *sh;
        let Some(slot) = sh.table.slot_mut(id) else {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        };
        if !slot.body.is_empty() {
            let n = slot.body.len().min(buf.remaining());
            buf.put_slice(&slot.body[..n]);
            slot.body.drain(..n);
            sh.conn.release(id, n);
            sh.table.wake_conn();
            return Poll::Ready(Ok(()));
        }
        if slot.reset.is_some() {
            return Poll::Ready(Err(io::ErrorKind::ConnectionReset.into()));
        }
        if slot.body_end {
            return Poll::Ready(Ok(()));
        }
        slot.wait(cx.waker());
        Poll::Pending
    }
}

impl AsyncWrite for StreamTunnelIo<'_, '_> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.shut {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let n = std::task::ready!(this.stream.poll_send_capacity(cx, data.len()))?;
        this.stream.send_data(&data[..n], false)?;
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Queued DATA goes out as the connection task writes.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.shut {
            this.stream.send_data(&[], true)?;
            this.shut = true;
        }
        Poll::Ready(Ok(()))
    }
}
