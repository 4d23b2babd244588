//! The load generator's view of the shared client transport
//! ([`crate::http1::client::transport`]): connect failures and IO errors
//! counted as the report's error kinds, a TLS close without close_notify read
//! as the end of the stream.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use rustls::pki_types::ServerName;
use tokio_rustls::TlsConnector;

use crate::http1::client::{connect_stream, ClientStream, ConnectStep};
use crate::sockopt::SocketOptions;

use super::stats::FailureKind;

/// TLS settings of one client thread.
#[derive(Clone)]
pub struct ThreadTls {
    /// Connector over this thread's client config.
    pub connector: TlsConnector,
    /// SNI and verification name.
    pub server_name: ServerName<'static>,
}

impl ThreadTls {
    /// Connector for one thread's config.
    pub fn new(config: Arc<rustls::ClientConfig>, server_name: ServerName<'static>) -> ThreadTls {
        ThreadTls {
            connector: TlsConnector::from(config),
            server_name,
        }
    }
}

/// A connection attempt that failed, and at which step.
#[derive(Debug)]
pub struct ConnectError {
    /// [`FailureKind::Connect`] or [`FailureKind::Tls`].
    pub kind: FailureKind,
    /// The cause.
    pub error: io::Error,
}

/// What a successful connect reports besides the stream.
pub struct Connected {
    /// The connection.
    pub transport: ClientStream,
    /// A TLS session was resumed.
    pub resumed: bool,
}

/// Connects to `addr` through the shared client transport, and runs the TLS
/// handshake if `tls` is set.
pub async fn dial(addr: SocketAddr, tls: Option<&ThreadTls>) -> Result<Connected, ConnectError> {
    let tls = tls.map(|t| (t.connector.clone(), t.server_name.clone()));
    match connect_stream(addr, &SocketOptions::default(), tls).await {
        Ok(transport) => Ok(Connected {
            resumed: transport.resumed(),
            transport,
        }),
        Err(e) => Err(ConnectError {
            kind: match e.step {
                ConnectStep::Tcp => FailureKind::Connect,
                ConnectStep::Tls => FailureKind::Tls,
            },
            error: e.error,
        }),
    }
}

/// Appends what is available to `buf` (whose spare capacity the caller keeps
/// non-zero); `Ok(0)` at end of stream. A TLS peer that closes without
/// close_notify is end of stream too: servers do, and a load generator needs
/// no protection against truncation.
pub async fn read_available(io: &mut ClientStream, buf: &mut Vec<u8>) -> io::Result<usize> {
    match io.read_into(buf).await {
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
        r => r,
    }
}

/// How an IO error on an established connection is counted.
pub fn classify(e: &io::Error) -> FailureKind {
    match e.kind() {
        io::ErrorKind::TimedOut => FailureKind::Timeout,
        io::ErrorKind::UnexpectedEof => FailureKind::Closed,
        io::ErrorKind::InvalidData => FailureKind::Tls,
        _ => FailureKind::Reset,
    }
}
