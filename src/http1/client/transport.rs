//! The client's one IO piece: a connection to a server, plain or TLS, with the
//! reads and writes every client here does. Plain TCP goes straight to
//! `try_read`/`try_write` on readiness the reactor already holds, so an
//! exchange costs one `write` and one `read` system call; TLS goes through
//! rustls. The proxy pools these, the health checks probe with them, and
//! `pier bench` measures with them.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::sockopt::{connect_with_options, SocketOptions};

/// A connection to a server, plain or TLS.
pub enum ClientStream {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP (rustls client).
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

/// The step of a connection attempt that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectStep {
    /// The TCP connect.
    Tcp,
    /// The TLS handshake.
    Tls,
}

/// A failed connection attempt: which step, and why.
#[derive(Debug)]
pub struct ConnectFailure {
    /// Where it failed.
    pub step: ConnectStep,
    /// The cause.
    pub error: io::Error,
}

/// Connects to `addr` with the socket options `opts` (TCP_NODELAY by default:
/// requests and answers are written whole, and Nagle would only delay a
/// pipelined tail), then runs the TLS handshake under `server_name` when `tls`
/// is given.
pub async fn connect_stream(
    addr: SocketAddr,
    opts: &SocketOptions,
    tls: Option<(TlsConnector, ServerName<'static>)>,
) -> Result<ClientStream, ConnectFailure> {
    let tcp = connect_with_options(addr, opts)
        .await
        .map_err(|error| ConnectFailure {
            step: ConnectStep::Tcp,
            error,
        })?;
    let Some((connector, server_name)) = tls else {
        return Ok(ClientStream::Plain(tcp));
    };
    match connector.connect(server_name, tcp).await {
        Ok(s) => Ok(ClientStream::Tls(Box::new(s))),
        Err(error) => Err(ConnectFailure {
            step: ConnectStep::Tls,
            error,
        }),
    }
}

impl ClientStream {
    fn tcp(&self) -> &TcpStream {
        match self {
            ClientStream::Plain(s) => s,
            ClientStream::Tls(s) => s.get_ref().0,
        }
    }

    /// Whether the TLS handshake resumed a session (false on plain TCP).
    pub fn resumed(&self) -> bool {
        match self {
            ClientStream::Plain(_) => false,
            ClientStream::Tls(s) => {
                s.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed)
            }
        }
    }

    /// Whether the socket shows no sign of having been closed by the peer: it is
    /// not readable (readiness already known to the reactor: no system call), or
    /// a non-blocking read finds nothing.
    pub fn looks_alive(&self) -> bool {
        let tcp = self.tcp();
        // `try_io` looks at the readiness the reactor holds (one atomic load, no
        // waker) and, with a closure that succeeds, leaves it as it is.
        match tcp.try_io(tokio::io::Interest::READABLE, || Ok(())) {
            Err(e) => e.kind() == io::ErrorKind::WouldBlock,
            Ok(()) => {
                let mut probe = [0u8; 1];
                // Readable while idle: EOF, reset, or bytes no request asked for.
                matches!(tcp.try_read(&mut probe), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
            }
        }
    }

    /// Reads what is available into the spare capacity of `buf` (which the
    /// caller keeps non-zero); `Ok(0)` at end of stream.
    pub async fn read_into(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        use tokio::io::AsyncReadExt;
        match self {
            // Waits through the stream's own reader slot (`poll_read_ready`), which
            // costs less than a `readable()` future and its waiter list.
            ClientStream::Plain(s) => {
                std::future::poll_fn(|cx| loop {
                    let room = buf.capacity() - buf.len();
                    match s.try_read_buf(buf) {
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            std::task::ready!(s.poll_read_ready(cx))?;
                        }
                        Ok(n) if n > 0 && n < room => {
                            // A short read drained the socket: forget the readiness,
                            // so an idle connection shows readable only when the
                            // server sends or closes (`looks_alive` needs no read),
                            // and the next wait costs an epoll edge rather than a
                            // read that returns EAGAIN.
                            let _ = s.try_io(tokio::io::Interest::READABLE, || {
                                Err::<(), _>(io::Error::from(io::ErrorKind::WouldBlock))
                            });
                            return Poll::Ready(Ok(n));
                        }
                        r => return Poll::Ready(r),
                    }
                })
                .await
            }
            ClientStream::Tls(s) => s.read_buf(buf).await,
        }
    }

    /// Polls for bytes (or the end of the stream) from the server, appending
    /// them to the spare capacity of `buf`; `Ready(Ok(0))` is the end. Used to
    /// notice an answer while a request is still being sent.
    pub fn poll_read_into(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut Vec<u8>,
    ) -> Poll<io::Result<usize>> {
        match self {
            ClientStream::Plain(s) => loop {
                // Readiness is known to the reactor: no system call until bytes come.
                std::task::ready!(s.poll_read_ready(cx))?;
                match s.try_read_buf(buf) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    r => return Poll::Ready(r),
                }
            },
            ClientStream::Tls(s) => {
                let mut chunk = [0u8; 4096];
                let mut rb = ReadBuf::new(&mut chunk);
                std::task::ready!(Pin::new(s.as_mut()).poll_read(cx, &mut rb))?;
                buf.extend_from_slice(rb.filled());
                Poll::Ready(Ok(rb.filled().len()))
            }
        }
    }

    /// Writes all of `data` (and flushes TLS records).
    pub async fn write_all(&mut self, mut data: &[u8]) -> io::Result<()> {
        use tokio::io::AsyncWriteExt;
        match self {
            ClientStream::Plain(s) => {
                while !data.is_empty() {
                    match s.try_write(data) {
                        Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                        Ok(n) => data = data.get(n..).unwrap_or(&[]),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => s.writable().await?,
                        Err(e) => return Err(e),
                    }
                }
                Ok(())
            }
            ClientStream::Tls(s) => {
                s.write_all(data).await?;
                s.flush().await
            }
        }
    }

    /// Sends FIN (after close_notify for TLS); errors are of no interest then.
    pub async fn shutdown(&mut self) {
        use tokio::io::AsyncWriteExt;
        let _ = match self {
            ClientStream::Plain(s) => s.shutdown().await,
            ClientStream::Tls(s) => s.shutdown().await,
        };
    }
}

impl AsyncRead for ClientStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            ClientStream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for ClientStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            ClientStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            ClientStream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            ClientStream::Plain(s) => s.is_write_vectored(),
            ClientStream::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_flush(cx),
            ClientStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            ClientStream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    async fn pair() -> (ClientStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let opts = SocketOptions::default();
        let (up, peer) = tokio::join!(connect_stream(addr, &opts, None), listener.accept());
        (up.unwrap(), peer.unwrap().0)
    }

    /// Lets the reactor take in what the peer did.
    async fn settle() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    #[tokio::test(flavor = "current_thread")]
    async fn idle_connection_looks_alive_until_the_server_closes_it() {
        let (up, peer) = pair().await;
        settle().await;
        assert!(up.looks_alive());
        // Asking twice changes nothing: the check keeps the readiness it finds.
        assert!(up.looks_alive());
        drop(peer);
        settle().await;
        assert!(!up.looks_alive());
        assert!(
            !up.looks_alive(),
            "the close is still seen on a second look"
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn stray_bytes_on_an_idle_connection_make_it_unusable() {
        let (up, mut peer) = pair().await;
        peer.write_all(b"HTTP/1.1 200 OK\r\n").await.unwrap();
        settle().await;
        assert!(!up.looks_alive());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_drained_read_leaves_the_connection_looking_alive() {
        let (mut up, mut peer) = pair().await;
        peer.write_all(b"answer").await.unwrap();
        let mut buf = Vec::with_capacity(64);
        assert_eq!(up.read_into(&mut buf).await.unwrap(), 6);
        assert_eq!(buf, b"answer");
        settle().await;
        assert!(up.looks_alive(), "readiness left over from the read");
        drop(peer);
        settle().await;
        assert!(!up.looks_alive());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_refused_connect_names_the_tcp_step() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let e = connect_stream(addr, &SocketOptions::default(), None)
            .await
            .err()
            .expect("refused");
        assert_eq!(e.step, ConnectStep::Tcp);
    }
}
