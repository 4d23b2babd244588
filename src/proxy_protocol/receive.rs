//! Reading the PROXY protocol header a listener with `accept_proxy_protocol`
//! expects first on every connection, whatever follows it (TLS, HTTP/1,
//! HTTP/2 or a tcp stream): the socket side of the sans-IO parser beside it.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpStream;

use super::{parse_proxy_header, ProxyParsed, V1_MAX, V2_MAX};
use crate::deadline;

/// Reads a PROXY protocol header (v1 or v2) from the start of `stream` within
/// `limit`, consuming exactly its bytes (they are peeked first, so whatever the
/// client sent after it stays in the socket for TLS or HTTP). Returns the
/// client address it carries, or `None` when it carries none (v2 LOCAL, v1
/// UNKNOWN), in which case the socket's peer stands.
pub async fn receive_proxy_header(
    stream: &mut TcpStream,
    limit: Duration,
) -> Result<Option<SocketAddr>, String> {
    let work = async {
        let mut buf = vec![0u8; V1_MAX.max(536)];
        let mut seen = 0;
        loop {
            let n = stream.peek(&mut buf).await.map_err(|e| e.to_string())?;
            if n == 0 {
                return Err("connection closed before a PROXY header".to_string());
            }
            match parse_proxy_header(&buf[..n]) {
                Ok(ProxyParsed::Complete(h, len)) => {
                    let mut sink = vec![0u8; len];
                    tokio::io::AsyncReadExt::read_exact(stream, &mut sink)
                        .await
                        .map_err(|e| e.to_string())?;
                    return Ok(h.source);
                }
                Ok(ProxyParsed::Partial) => {
                    if n == buf.len() {
                        // A v2 header with TLVs longer than the first buffer.
                        if buf.len() >= V2_MAX {
                            return Err("PROXY header too long".to_string());
                        }
                        buf.resize(V2_MAX, 0);
                    } else if n == seen {
                        // Peeking again at once would see the same bytes: wait a little.
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    seen = n;
                }
                Err(e) => return Err(e.to_string()),
            }
        }
    };
    match deadline::within(limit, work).await {
        Ok(r) => r,
        Err(_) => Err("no PROXY header in time".to_string()),
    }
}
