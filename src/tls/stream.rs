//! The socket under a TLS connection, with read-ahead.
//!
//! rustls asks its transport for at most 4 KiB at a time (it sizes its record
//! buffer to what it holds plus 4 KiB), so a client sending full 16 KiB records
//! would cost four or more `read` calls per record. [`ReadAhead`] reads up to
//! 64 KiB per call — several records — and hands them to rustls from memory.
//! Its buffer exists only while bytes are in flight: [`ReadAhead::release`] frees
//! it when the connection goes idle, so idle TLS connections stay small.
//! Writes pass straight through, vectored, so rustls sends several records per
//! `writev`.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

/// First read-ahead buffer of a busy connection: a full record and change.
const READ_AHEAD_SMALL: usize = 17 * 1024;
/// Once a read fills the small buffer, the peer is streaming: read this much.
const READ_AHEAD_LARGE: usize = 64 * 1024;

/// A TCP stream that reads ahead for rustls.
pub struct ReadAhead {
    tcp: TcpStream,
    buf: Vec<u8>,
    pos: usize,
    streaming: bool,
}

impl ReadAhead {
    /// Wraps an accepted stream; allocates nothing until the first read.
    pub fn new(tcp: TcpStream) -> Self {
        ReadAhead {
            tcp,
            buf: Vec::new(),
            pos: 0,
            streaming: false,
        }
    }

    /// The socket.
    pub fn tcp(&self) -> &TcpStream {
        &self.tcp
    }

    /// Bytes read from the socket that rustls has not taken yet.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Reads the connection's first bytes and keeps them for rustls, so the caller
    /// can look at them before the handshake (plain HTTP sent to a TLS port) at no
    /// extra system call.
    pub async fn read_first(&mut self) -> io::Result<&[u8]> {
        while self.buffered() == 0 {
            if self.buf.capacity() < READ_AHEAD_SMALL {
                self.buf = Vec::with_capacity(READ_AHEAD_SMALL);
            }
            self.buf.clear();
            self.pos = 0;
            self.tcp.readable().await?;
            match self.tcp.try_read_buf(&mut self.buf) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        Ok(&self.buf[self.pos..])
    }

    /// Frees the read-ahead buffer if it holds nothing (the connection is idle).
    pub fn release(&mut self) {
        if self.buffered() == 0 {
            self.buf = Vec::new();
            self.pos = 0;
            self.streaming = false;
        }
    }
}

impl AsyncRead for ReadAhead {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.buffered() > 0 {
                let n = this.buffered().min(out.remaining());
                out.put_slice(&this.buf[this.pos..this.pos + n]);
                this.pos += n;
                if this.pos == this.buf.len() {
                    this.buf.clear();
                    this.pos = 0;
                }
                return Poll::Ready(Ok(()));
            }
            let want = if this.streaming {
                READ_AHEAD_LARGE
            } else {
                READ_AHEAD_SMALL
            };
            if this.buf.capacity() < want {
                this.buf = Vec::with_capacity(want);
            }
            let room = this.buf.capacity();
            match this.tcp.try_read_buf(&mut this.buf) {
                Ok(0) => return Poll::Ready(Ok(())),
                Ok(n) if n == room => this.streaming = true,
                Ok(_) => {
                    // A short read drained the socket: forget the readiness, so the
                    // read rustls attempts after this record fails without a
                    // syscall and waits for the next edge (as `conn::Plain` does).
                    let _ = this.tcp.try_io(Interest::READABLE, || {
                        Err::<(), _>(io::Error::from(io::ErrorKind::WouldBlock))
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    ready!(this.tcp.poll_read_ready(cx))?;
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for ReadAhead {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write(cx, data)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(flavor = "current_thread")]
    async fn reads_ahead_hands_out_in_pieces_and_releases_when_drained() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 253) as u8).collect();
        let sent = data.clone();
        let writer = tokio::spawn(async move {
            let mut s = TcpStream::connect(addr).await.unwrap();
            s.write_all(&sent).await.unwrap();
        });
        let (tcp, _) = listener.accept().await.unwrap();
        let mut r = ReadAhead::new(tcp);
        let mut got = Vec::new();
        let mut piece = [0u8; 4096];
        loop {
            let n = r.read(&mut piece).await.unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&piece[..n]);
        }
        writer.await.unwrap();
        assert!(got == data);
        r.release();
        assert_eq!(r.buf.capacity(), 0, "idle connection holds no buffer");
    }
}
