//! The client side's one IO layer: connect (TCP, then TLS if asked), write all,
//! read into a reused buffer. Plain TCP goes straight to `try_read`/`try_write`
//! on readiness, so a request costs one `write` and one `read` system call.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use super::stats::ErrorKind;

/// TLS settings of one client thread.
#[derive(Clone)]
pub struct Tls {
    /// Connector over this thread's client config.
    pub connector: TlsConnector,
    /// SNI and verification name.
    pub server_name: ServerName<'static>,
}

impl Tls {
    /// Connector for one thread's config.
    pub fn new(config: Arc<rustls::ClientConfig>, server_name: ServerName<'static>) -> Tls {
        Tls {
            connector: TlsConnector::from(config),
            server_name,
        }
    }
}

/// An open client connection.
pub enum Transport {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP.
    Tls(Box<TlsStream<TcpStream>>),
}

/// A connection attempt that failed, and at which step.
#[derive(Debug)]
pub struct ConnectError {
    /// [`ErrorKind::Connect`] or [`ErrorKind::Tls`].
    pub kind: ErrorKind,
    /// The cause.
    pub error: io::Error,
}

/// What a successful connect reports besides the stream.
pub struct Connected {
    /// The connection.
    pub transport: Transport,
    /// A TLS session was resumed.
    pub resumed: bool,
}

/// Connects to `addr`, with TCP_NODELAY, and runs the TLS handshake if `tls` is set.
pub async fn connect(addr: SocketAddr, tls: Option<&Tls>) -> Result<Connected, ConnectError> {
    let tcp = TcpStream::connect(addr)
        .await
        .map_err(|error| ConnectError {
            kind: ErrorKind::Connect,
            error,
        })?;
    // Requests are written whole; Nagle would only hold back a pipelined batch's tail.
    let _ = tcp.set_nodelay(true);
    let Some(tls) = tls else {
        return Ok(Connected {
            transport: Transport::Plain(tcp),
            resumed: false,
        });
    };
    let stream = tls
        .connector
        .connect(tls.server_name.clone(), tcp)
        .await
        .map_err(|error| ConnectError {
            kind: ErrorKind::Tls,
            error,
        })?;
    let resumed = stream.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
    Ok(Connected {
        transport: Transport::Tls(Box::new(stream)),
        resumed,
    })
}

impl Transport {
    /// Writes all of `data`; for TLS, flushes the records too.
    pub async fn write_all(&mut self, mut data: &[u8]) -> io::Result<()> {
        match self {
            Transport::Plain(s) => {
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
            Transport::Tls(s) => {
                s.write_all(data).await?;
                s.flush().await
            }
        }
    }

    /// Appends what is available to `buf` (whose spare capacity the caller
    /// keeps non-zero); `Ok(0)` at end of stream. A TLS peer that closes without
    /// close_notify is end of stream too: servers do, and nothing here needs
    /// protection against truncation.
    pub async fn read_into(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        match self {
            Transport::Plain(s) => loop {
                let room = buf.capacity() - buf.len();
                match s.try_read_buf(buf) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => s.readable().await?,
                    Ok(n) if n > 0 && n < room => {
                        // A short read drained the socket: forget the readiness, so
                        // the next wait costs an epoll edge instead of a read that
                        // returns EAGAIN.
                        let _ = s.try_io(Interest::READABLE, || {
                            Err::<(), _>(io::Error::from(io::ErrorKind::WouldBlock))
                        });
                        return Ok(n);
                    }
                    r => return r,
                }
            },
            Transport::Tls(s) => match s.read_buf(buf).await {
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
                r => r,
            },
        }
    }

    /// Sends FIN (after close_notify for TLS); errors are of no interest then.
    pub async fn shutdown(&mut self) {
        let _ = match self {
            Transport::Plain(s) => s.shutdown().await,
            Transport::Tls(s) => s.shutdown().await,
        };
    }
}

/// How an IO error on an established connection is counted.
pub fn classify(e: &io::Error) -> ErrorKind {
    match e.kind() {
        io::ErrorKind::TimedOut => ErrorKind::Timeout,
        io::ErrorKind::UnexpectedEof => ErrorKind::Closed,
        io::ErrorKind::InvalidData => ErrorKind::Tls,
        _ => ErrorKind::Reset,
    }
}
