//! Per-worker keep-alive pools of upstream connections, one LIFO stack per
//! server. Only the owning worker touches its pools (`RefCell`, no lock), and the
//! most recently used connection is reused first, so the rest age out.
//!
//! A pooled connection that the upstream closed while idle is noticed without a
//! system call when its socket already reported readability (EOF or stray data
//! makes it readable; a healthy idle connection never is); the race where the
//! close is still in flight is covered by the proxy retrying once on a fresh
//! connection when a reused one fails before any response byte.

use std::cell::RefCell;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A connection to an upstream server, plain or TLS.
pub enum UpstreamStream {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP (rustls client).
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl UpstreamStream {
    fn tcp(&self) -> &TcpStream {
        match self {
            UpstreamStream::Plain(s) => s,
            UpstreamStream::Tls(s) => s.get_ref().0,
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

    /// Reads what is available into the spare capacity of `buf`.
    pub async fn read_into(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        use tokio::io::AsyncReadExt;
        match self {
            // Waits through the stream's own reader slot (`poll_read_ready`), which
            // costs less than a `readable()` future and its waiter list.
            UpstreamStream::Plain(s) => {
                std::future::poll_fn(|cx| loop {
                    let room = buf.capacity() - buf.len();
                    match s.try_read_buf(buf) {
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            std::task::ready!(s.poll_read_ready(cx))?;
                        }
                        Ok(n) if n > 0 && n < room => {
                            // A short read drained the socket: forget the readiness,
                            // so an idle pooled connection shows readable only when
                            // the upstream sends or closes, and `looks_alive` needs
                            // no read.
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
            UpstreamStream::Tls(s) => s.read_buf(buf).await,
        }
    }

    /// Polls for bytes (or the end of the stream) from the upstream, appending
    /// them to the spare capacity of `buf`; `Ready(Ok(0))` is the end. Used to
    /// notice an answer while the request is still being sent.
    pub fn poll_read_into(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut Vec<u8>,
    ) -> Poll<io::Result<usize>> {
        match self {
            UpstreamStream::Plain(s) => loop {
                // Readiness is known to the reactor: no system call until bytes come.
                std::task::ready!(s.poll_read_ready(cx))?;
                match s.try_read_buf(buf) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    r => return Poll::Ready(r),
                }
            },
            UpstreamStream::Tls(s) => {
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
            UpstreamStream::Plain(s) => {
                while !data.is_empty() {
                    match s.try_write(data) {
                        Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                        Ok(n) => data = &data[n..],
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => s.writable().await?,
                        Err(e) => return Err(e),
                    }
                }
                Ok(())
            }
            UpstreamStream::Tls(s) => {
                s.write_all(data).await?;
                s.flush().await
            }
        }
    }
}

impl AsyncRead for UpstreamStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            UpstreamStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            UpstreamStream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for UpstreamStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            UpstreamStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            UpstreamStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            UpstreamStream::Plain(s) => Pin::new(s).poll_flush(cx),
            UpstreamStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            UpstreamStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            UpstreamStream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

struct Idle {
    stream: UpstreamStream,
    since: Instant,
}

/// Idle connections of one group, per server.
pub struct Pool {
    idle: RefCell<Vec<Vec<Idle>>>,
    max_idle: usize,
    idle_timeout: Duration,
}

impl Pool {
    /// An empty pool for `servers` servers.
    pub fn new(servers: usize, max_idle: usize, idle_timeout: Duration) -> Self {
        Pool {
            idle: RefCell::new((0..servers).map(|_| Vec::new()).collect()),
            max_idle,
            idle_timeout,
        }
    }

    /// The most recently returned live connection to `server`, if any; expired
    /// and dead ones met on the way are closed.
    pub fn checkout(&self, server: usize, now: Instant) -> Option<UpstreamStream> {
        let mut idle = self.idle.borrow_mut();
        let stack = idle.get_mut(server)?;
        while let Some(c) = stack.pop() {
            if now.saturating_duration_since(c.since) < self.idle_timeout && c.stream.looks_alive()
            {
                return Some(c.stream);
            }
        }
        None
    }

    /// Keeps a connection whose last exchange ended cleanly.
    pub fn checkin(&self, server: usize, stream: UpstreamStream, now: Instant) {
        if self.max_idle == 0 {
            return;
        }
        let mut idle = self.idle.borrow_mut();
        let Some(stack) = idle.get_mut(server) else {
            return;
        };
        // Oldest first: drop what expired, then make room.
        let expired = stack
            .iter()
            .take_while(|c| now.saturating_duration_since(c.since) >= self.idle_timeout)
            .count();
        stack.drain(..expired);
        if stack.len() >= self.max_idle {
            stack.remove(0);
        }
        stack.push(Idle { stream, since: now });
    }

    /// Closes idle connections past their timeout (run periodically by the worker,
    /// so a quiet worker does not hold upstream sockets forever).
    pub fn sweep(&self, now: Instant) {
        for stack in self.idle.borrow_mut().iter_mut() {
            stack.retain(|c| {
                now.saturating_duration_since(c.since) < self.idle_timeout && c.stream.looks_alive()
            });
        }
    }

    /// Closes every idle connection (the configuration is draining).
    pub fn clear(&self) {
        for stack in self.idle.borrow_mut().iter_mut() {
            stack.clear();
        }
    }

    /// Idle connections held for `server` (tests and stats).
    pub fn idle_count(&self, server: usize) -> usize {
        self.idle.borrow().get(server).map_or(0, Vec::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    async fn pair() -> (UpstreamStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (up, peer) = tokio::join!(TcpStream::connect(addr), listener.accept());
        (UpstreamStream::Plain(up.unwrap()), peer.unwrap().0)
    }

    /// Lets the reactor take in what the peer did.
    async fn settle() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    #[tokio::test(flavor = "current_thread")]
    async fn idle_connection_looks_alive_until_the_upstream_closes_it() {
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
    async fn checkout_skips_connections_closed_while_pooled() {
        let pool = Pool::new(1, 4, Duration::from_secs(60));
        let (a, peer_a) = pair().await;
        let (b, _peer_b) = pair().await;
        let now = Instant::now();
        pool.checkin(0, b, now);
        pool.checkin(0, a, now);
        drop(peer_a);
        settle().await;
        // `a` is the most recent but closed: `b` comes out, and `a` is gone.
        assert!(pool.checkout(0, Instant::now()).is_some());
        assert_eq!(pool.idle_count(0), 0);
        assert!(pool.checkout(0, Instant::now()).is_none());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn clear_closes_every_idle_connection() {
        use tokio::io::AsyncReadExt;
        let pool = Pool::new(2, 4, Duration::from_secs(60));
        let (a, mut peer_a) = pair().await;
        let (b, mut peer_b) = pair().await;
        pool.checkin(0, a, Instant::now());
        pool.checkin(1, b, Instant::now());
        pool.clear();
        assert_eq!((pool.idle_count(0), pool.idle_count(1)), (0, 0));
        // The upstreams see the close.
        let mut buf = [0u8; 1];
        assert_eq!(peer_a.read(&mut buf).await.unwrap(), 0);
        assert_eq!(peer_b.read(&mut buf).await.unwrap(), 0);
    }
}
