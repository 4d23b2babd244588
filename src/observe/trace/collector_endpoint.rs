//! The collector's address as the exporter uses it: split from the
//! configured URL into the authority to connect to and the request target,
//! and the blocking connection both OTLP transports open to it.

use std::io;
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use super::ExportProtocol;

/// How long connecting, and each read or write of an export, may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// The collector's address, split from the configured URL.
pub struct Endpoint {
    /// `host:port`, for the connection and the `Host` field (`:authority`).
    pub authority: String,
    /// The request target: the URL's path (`/v1/traces` when it has none)
    /// for OTLP/HTTP, the gRPC method's for gRPC.
    pub path: String,
}

/// The gRPC method spans are exported with.
pub const GRPC_EXPORT_PATH: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

/// Splits `http://host[:port][/path]` (validated by the configuration).
pub fn split_endpoint(url: &str, protocol: ExportProtocol) -> Endpoint {
    let rest = url.strip_prefix("http://").unwrap_or(url);
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/v1/traces"),
    };
    let authority = if authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
        && !authority.ends_with(']')
    {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    let path = match protocol {
        ExportProtocol::HttpProtobuf => path,
        ExportProtocol::Grpc => GRPC_EXPORT_PATH,
    };
    Endpoint {
        authority,
        path: path.to_string(),
    }
}

/// A blocking connection to the collector, with [`EXPORT_TIMEOUT`] on
/// connecting, each read and each write.
pub fn connect(endpoint: &Endpoint) -> io::Result<TcpStream> {
    let addr = endpoint
        .authority
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::other("the endpoint's host has no address"))?;
    let s = TcpStream::connect_timeout(&addr, EXPORT_TIMEOUT)?;
    s.set_read_timeout(Some(EXPORT_TIMEOUT))?;
    s.set_write_timeout(Some(EXPORT_TIMEOUT))?;
    let _ = s.set_nodelay(true);
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_split_into_authority_and_path() {
        let http = ExportProtocol::HttpProtobuf;
        let e = split_endpoint("http://127.0.0.1:4318/v1/traces", http);
        assert_eq!(
            (e.authority.as_str(), e.path.as_str()),
            ("127.0.0.1:4318", "/v1/traces")
        );
        let e = split_endpoint("http://collector", http);
        assert_eq!(
            (e.authority.as_str(), e.path.as_str()),
            ("collector:80", "/v1/traces")
        );
        let e = split_endpoint("http://[::1]:4318/otlp/v1/traces", http);
        assert_eq!(
            (e.authority.as_str(), e.path.as_str()),
            ("[::1]:4318", "/otlp/v1/traces")
        );
        let e = split_endpoint("http://[::1]:4317", ExportProtocol::Grpc);
        assert_eq!(
            (e.authority.as_str(), e.path.as_str()),
            ("[::1]:4317", GRPC_EXPORT_PATH)
        );
    }
}
