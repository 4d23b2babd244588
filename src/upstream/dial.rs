//! Dialling a server of a group: TCP, then TLS with the group's name and
//! roots, within the group's connect timeout. The HTTP/1 pool, the HTTP/2
//! pool and the health checker all open their connections here.

use super::group::{self, UpstreamGroup};
use super::{ErrorKind, ProxyError};
use crate::deadline;
use crate::http1::client::{connect_stream, ClientStream, ConnectFailure, ConnectStep};

/// Opens a connection to server `i` (and its TLS session) within the connect timeout.
pub async fn connect(group: &UpstreamGroup, i: usize) -> Result<ClientStream, ProxyError> {
    let server = &group.servers[i];
    let tls = match &group.tls {
        None => None,
        Some(tls) => {
            let name = match &tls.sni {
                Some(n) => n.clone(),
                None => rustls::pki_types::ServerName::try_from(
                    group::host_of(&server.authority).to_string(),
                )
                .map_err(|e| ProxyError::upstream(ErrorKind::Connect, e))?,
            };
            Some((tokio_rustls::TlsConnector::from(tls.config.clone()), name))
        }
    };
    match deadline::within(
        group.connect_timeout,
        connect_stream(server.addr, &group.socket, tls),
    )
    .await
    {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(ConnectFailure {
            step: ConnectStep::Tcp,
            error,
        })) => Err(ProxyError::upstream(ErrorKind::Connect, error)),
        Ok(Err(ConnectFailure { error, .. })) => Err(ProxyError::upstream(
            ErrorKind::Connect,
            format!(
                "TLS handshake failed: {}",
                crate::tls::error_text::describe_io_error(&error)
            ),
        )),
        Err(_) => Err(ProxyError::upstream(
            ErrorKind::Timeout,
            "connect timed out",
        )),
    }
}
