//! Downstream transports: what the drivers need from plain TCP or TLS, the
//! file-sending strategy of each (sendfile, or bounded chunks through the TLS
//! record layer), and the poll-based reads and writes the session uses.

use std::fs::File;
use std::io;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::deadline::io_within;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, Interest};
use tokio::net::TcpStream;

use crate::http::TlsFacts;
use crate::tls::stream::ReadAhead;

/// Chunk of a large file per send, so one download cannot monopolise the worker.
pub(crate) const FILE_CHUNK: u64 = 256 * 1024;

/// Most bytes rustls holds to send: a file chunk, and room for what goes
/// with it. An HTTP/2 chunk leaves with 9 bytes of frame head per 16 KiB
/// (144 bytes per chunk); at exactly [`FILE_CHUNK`] those bytes stayed
/// behind and went out in a record and a `writev` of their own, two writes
/// per chunk instead of one.
const TLS_SEND_LIMIT: usize = FILE_CHUNK as usize + 16 * 1024;

/// A downstream transport: what the driver needs from plain TCP or TLS.
#[allow(async_fn_in_trait)]
pub trait Downstream {
    /// Whether the transport is TLS (for `X-Forwarded-Proto`).
    const SECURE: bool;
    /// The stream itself, for relaying raw bytes after an upgrade.
    type Io: AsyncRead + AsyncWrite + Unpin;
    /// Borrows the stream.
    fn io_mut(&mut self) -> &mut Self::Io;
    /// Ready once a read would make progress, without holding a buffer; a
    /// poll rather than a future, so a wait made on every keep-alive request
    /// sets nothing up and tears nothing down.
    fn poll_readable(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;
    /// Appends what is available to `buf`; `Ok(0)` at end of stream.
    async fn read_into(&mut self, buf: &mut Vec<u8>) -> io::Result<usize>;
    /// Appends what is available now to `buf`, without waiting: most reads
    /// after a readiness wait finish here, with no future and no timer. An
    /// `io::ErrorKind::WouldBlock` error when nothing is (a transport that
    /// reads through a record layer, TLS, always says so and leaves it all to
    /// [`Downstream::read_into`]).
    fn read_now(&mut self, _buf: &mut Vec<u8>) -> io::Result<usize> {
        Err(io::ErrorKind::WouldBlock.into())
    }
    /// Writes all of `data`.
    async fn write_all(&mut self, data: &[u8]) -> io::Result<()>;
    /// Writes what the socket takes at once, without waiting, and returns how
    /// much: most writes finish here, with no future and no timer. A transport
    /// that must also flush buffered records (TLS) writes nothing (`Ok(0)`) and
    /// leaves it all to [`Downstream::write_all`].
    fn write_now(&mut self, _data: &[u8]) -> io::Result<usize> {
        Ok(0)
    }
    /// Whether [`Downstream::send_file`] sends without copying (sendfile);
    /// otherwise file bytes are read into a buffer and written.
    const ZERO_COPY_FILES: bool = false;
    /// Sends `len` bytes of `file` from `offset`, pages the caller found in the
    /// page cache, without copying them; only when [`Downstream::ZERO_COPY_FILES`].
    async fn send_file(
        &mut self,
        _file: &File,
        _offset: u64,
        _len: u64,
        _write_timeout: Duration,
    ) -> io::Result<()> {
        Err(io::ErrorKind::Unsupported.into())
    }
    /// A second descriptor of the socket, so a pool thread can `sendfile`
    /// file regions whose residency the file system cannot tell (FUSE): the
    /// disk wait then falls on that thread; only when
    /// [`Downstream::ZERO_COPY_FILES`].
    fn socket_for_pool(&self) -> io::Result<std::os::fd::OwnedFd> {
        Err(io::ErrorKind::Unsupported.into())
    }
    /// Waits until the socket takes bytes again after a pool thread's send
    /// found it full (that thread's `EAGAIN` is not seen by the event loop).
    async fn writable_after_pool_send(&mut self, _write_timeout: Duration) -> io::Result<()> {
        Ok(())
    }
    /// Closes the sending side (FIN, or close_notify then FIN); a peer gone
    /// meanwhile is no error worth reporting.
    async fn shutdown(&mut self) {
        let _ = self.io_mut().shutdown().await;
    }

    /// Appends what is available to `buf` without waiting; `Ok(0)` at end of stream.
    fn poll_read_into(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut Vec<u8>,
    ) -> Poll<io::Result<usize>>;

    /// Writes some of `data` (and flushes what the transport buffers).
    fn poll_write_some(&mut self, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>>;

    /// Whether [`Downstream::poll_write_gathered`] hands all its slices to
    /// the kernel in one `writev`, so a head and body pieces held elsewhere
    /// leave together without being copied into one buffer first.
    const GATHERED_WRITES: bool = false;

    /// Writes some of `bufs`, in order, and returns how many bytes; without
    /// [`Downstream::GATHERED_WRITES`], by default only the first slice that
    /// is not empty (TLS takes them all into its records).
    fn poll_write_gathered(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match bufs.iter().find(|b| !b.is_empty()) {
            Some(first) => self.poll_write_some(cx, first),
            None => Poll::Ready(Ok(0)),
        }
    }

    /// Pushes out what the transport still holds from earlier writes (TLS
    /// records a full socket did not take), registering for the socket's
    /// room when it cannot; ready at once when it holds nothing.
    fn poll_flush_held(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    /// Subject (RFC 4514) of the verified client certificate, if one was presented.
    fn peer_subject(&self) -> Option<&str> {
        None
    }

    /// TLS version, cipher, SNI and client subject; `None` on plain TCP.
    fn tls_facts(&self) -> Option<TlsFacts<'_>> {
        None
    }

    /// Frees what the transport holds for reading (TLS: the read-ahead
    /// buffer) when nothing is in it, for a driver that reads through
    /// [`Downstream::io_mut`] and finds its connection idle.
    fn release_idle_io(_io: &mut Self::Io) {}
}

/// Plain TCP.
pub struct Plain {
    stream: TcpStream,
}

impl Plain {
    /// Wraps an accepted stream.
    pub fn new(stream: TcpStream) -> Self {
        Plain { stream }
    }

    /// Reads what the socket holds. A short read drained the socket (as
    /// nginx infers on edge-triggered epoll): its readiness is forgotten, so
    /// the next wait needs a new edge instead of waking at once for a read
    /// that returns EAGAIN; a keep-alive wait that woke so would take the
    /// head deadline's path and stop watching for a drain.
    fn read_and_forget_if_drained(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        let room = buf.capacity() - buf.len();
        let n = self.stream.try_read_buf(buf)?;
        if n > 0 && n < room {
            let _ = self.stream.try_io(Interest::READABLE, || {
                Err::<(), _>(io::Error::from(io::ErrorKind::WouldBlock))
            });
        }
        Ok(n)
    }
}

impl Downstream for Plain {
    const SECURE: bool = false;
    const ZERO_COPY_FILES: bool = true;
    type Io = TcpStream;

    fn io_mut(&mut self) -> &mut TcpStream {
        &mut self.stream
    }

    fn poll_readable(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.stream.poll_read_ready(cx)
    }

    async fn read_into(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        loop {
            match self.read_now(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.stream.readable().await?,
                r => return r,
            }
        }
    }

    fn read_now(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        self.read_and_forget_if_drained(buf)
    }

    async fn write_all(&mut self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            match self.stream.try_write(data) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => data = &data[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.stream.writable().await?,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn write_now(&mut self, data: &[u8]) -> io::Result<usize> {
        match self.stream.try_write(data) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            r => r,
        }
    }

    async fn send_file(
        &mut self,
        file: &File,
        offset: u64,
        len: u64,
        write_timeout: Duration,
    ) -> io::Result<()> {
        let mut pos = offset;
        let end = offset + len;
        while pos < end {
            let want = (end - pos).min(FILE_CHUNK) as usize;
            let sent = self.stream.try_io(Interest::WRITABLE, || {
                rustix::fs::sendfile(&self.stream, file, Some(&mut pos), want)
                    .map_err(io::Error::from)
            });
            match sent {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "file shrank while being sent",
                    ))
                }
                // The caller yields between chunks; a partial send just tries again.
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    io_within(write_timeout, "write timeout", self.stream.writable()).await?;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn socket_for_pool(&self) -> io::Result<std::os::fd::OwnedFd> {
        use std::os::fd::AsFd;
        self.stream.as_fd().try_clone_to_owned()
    }

    async fn writable_after_pool_send(&mut self, write_timeout: Duration) -> io::Result<()> {
        // Forget the loop's stale readiness first, then look at the socket
        // itself: room made after the forgetting raises a new edge, so no
        // wake-up is lost between the two.
        let _ = self.stream.try_io(Interest::WRITABLE, || {
            Err::<(), _>(io::Error::from(io::ErrorKind::WouldBlock))
        });
        let mut fds = [rustix::event::PollFd::new(
            &self.stream,
            rustix::event::PollFlags::OUT,
        )];
        let now = rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        if rustix::event::poll(&mut fds, Some(&now)).is_ok_and(|n| n > 0) {
            return Ok(());
        }
        io_within(write_timeout, "write timeout", self.stream.writable()).await
    }

    fn poll_read_into(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut Vec<u8>,
    ) -> Poll<io::Result<usize>> {
        loop {
            match self.read_and_forget_if_drained(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::task::ready!(self.stream.poll_read_ready(cx))?;
                }
                r => return Poll::Ready(r),
            }
        }
    }

    fn poll_write_some(&mut self, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        std::pin::Pin::new(&mut self.stream).poll_write(cx, data)
    }

    const GATHERED_WRITES: bool = true;

    fn poll_write_gathered(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        std::pin::Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }
}

/// TLS over TCP (rustls), reading ahead several records per `read`.
pub struct Tls {
    stream: tokio_rustls::server::TlsStream<ReadAhead>,
    peer_subject: Option<Box<str>>,
}

impl Tls {
    /// Wraps a stream whose handshake is complete.
    pub fn new(mut stream: tokio_rustls::server::TlsStream<ReadAhead>) -> Self {
        // A whole file chunk is encrypted at once and leaves in one `writev` of
        // 16 records; the buffer holds only what the socket has not taken.
        stream.get_mut().1.set_buffer_limit(Some(TLS_SEND_LIMIT));
        let peer_subject = stream
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first())
            .and_then(crate::tls::subject_of)
            .map(String::into_boxed_str);
        Tls {
            stream,
            peer_subject,
        }
    }
}

impl Downstream for Tls {
    const SECURE: bool = true;
    type Io = tokio_rustls::server::TlsStream<ReadAhead>;

    fn io_mut(&mut self) -> &mut Self::Io {
        &mut self.stream
    }

    fn poll_readable(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let (io, session) = self.stream.get_mut();
        if session.wants_read() && io.buffered() == 0 {
            // Idle: the read-ahead buffer goes while nothing is in flight.
            io.release();
            return io.tcp().poll_read_ready(cx);
        }
        Poll::Ready(Ok(()))
    }

    async fn read_into(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        self.stream.read_buf(buf).await
    }

    fn release_idle_io(io: &mut Self::Io) {
        let (io, session) = io.get_mut();
        if session.wants_read() && io.buffered() == 0 {
            io.release();
        }
    }

    async fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        self.stream.write_all(data).await?;
        self.stream.flush().await
    }

    fn poll_read_into(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut Vec<u8>,
    ) -> Poll<io::Result<usize>> {
        // Reads into the spare room as it is, without zeroing it first (the
        // HTTP/2 driver reads every request this way).
        if buf.capacity() - buf.len() < 2048 {
            buf.reserve(2048);
        }
        tokio_util::io::poll_read_buf(std::pin::Pin::new(&mut self.stream), cx, buf)
    }

    fn poll_write_some(&mut self, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let mut s = std::pin::Pin::new(&mut self.stream);
        let n = std::task::ready!(s.as_mut().poll_write(cx, data))?;
        // Records rustls holds are pushed out now; if the socket is full they
        // go with the next write.
        let _ = s.poll_flush(cx);
        Poll::Ready(Ok(n))
    }

    /// All of `bufs` go to rustls in one call, which cuts them into full
    /// records (a DATA frame's head and the body slice after it share one),
    /// then out as `poll_write_some` sends them.
    fn poll_write_gathered(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let mut s = std::pin::Pin::new(&mut self.stream);
        let n = std::task::ready!(s.as_mut().poll_write_vectored(cx, bufs))?;
        let _ = s.poll_flush(cx);
        Poll::Ready(Ok(n))
    }

    fn poll_flush_held(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.stream.get_ref().1.wants_write() {
            return Poll::Ready(Ok(()));
        }
        std::pin::Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn peer_subject(&self) -> Option<&str> {
        self.peer_subject.as_deref()
    }

    fn tls_facts(&self) -> Option<TlsFacts<'_>> {
        let session = self.stream.get_ref().1;
        Some(TlsFacts {
            version: session
                .protocol_version()
                .and_then(crate::tls::names::protocol_name),
            cipher: session
                .negotiated_cipher_suite()
                .and_then(|c| crate::tls::names::cipher_name(c.suite())),
            sni: session.server_name(),
            client_subject: self.peer_subject.as_deref(),
            early_data: false,
        })
    }
}
