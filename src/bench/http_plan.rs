//! What an HTTP run sends, decided once before any thread starts: the target,
//! the encoded request (a batch of `depth` copies), the limits of the run, and
//! for open loop each connection's send schedule.

use std::time::Duration;

use tokio::time::Instant;

use super::args::{HttpArgs, HttpCommon};
use super::client_tls::ClientTls;
use super::stream_request::{stream_bench_request, StreamRequest};
use super::target::HttpTarget;
use crate::http1::client::request::{end_head, write_field, write_framing, write_request_start};
use crate::http1::grammar::is_tchar;
use crate::http1::parse::{BodyKind, Method};

/// Everything an HTTP run needs, validated and encoded once, shared read-only
/// by every client thread.
#[derive(Debug)]
pub struct HttpPlan {
    /// Where to send.
    pub target: HttpTarget,
    /// Method, for response framing (HEAD responses have no body).
    pub method: Method,
    /// `depth` copies of the encoded request, back to back.
    pub batch: Vec<u8>,
    /// Length of one encoded request.
    pub request_len: usize,
    /// Pipelined requests per connection: closed loop writes this many at once
    /// and waits for all their responses; open loop keeps up to this many in flight.
    pub depth: usize,
    /// Connections in total.
    pub connections: usize,
    /// Client threads (never more than connections).
    pub threads: usize,
    /// Run length, if bounded by time.
    pub duration: Option<Duration>,
    /// Request count, if bounded by count.
    pub requests: Option<u64>,
    /// Open-loop rate in requests/s across all connections.
    pub rate: Option<f64>,
    /// Longest wait without progress.
    pub timeout: Duration,
    /// A fresh connection per request.
    pub new_conn: bool,
    /// TLS client settings for https targets.
    pub tls: Option<ClientTls>,
    /// HTTP/1.1, HTTP/2 or HTTP/3.
    pub protocol: BenchProtocol,
    /// The request of `--h2` and `--h3` runs (`depth` is then the streams per
    /// connection).
    pub stream_request: Option<StreamRequest>,
}

/// The protocol a run speaks, from `--h2` and `--h3`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BenchProtocol {
    /// HTTP/1.1 over TCP or TLS, with pipelining by `--depth`.
    Http1,
    /// HTTP/2: ALPN `h2` over TLS, prior knowledge over TCP.
    H2,
    /// HTTP/3 over QUIC (ALPN `h3`, always TLS).
    H3,
}

impl BenchProtocol {
    /// The protocol's name in reports and its ALPN identifier.
    pub fn name(self) -> &'static str {
        match self {
            BenchProtocol::Http1 => "http/1.1",
            BenchProtocol::H2 => "h2",
            BenchProtocol::H3 => "h3",
        }
    }

    /// The protocol as the text report says it.
    pub fn title(self) -> &'static str {
        match self {
            BenchProtocol::Http1 => "HTTP/1.1",
            BenchProtocol::H2 => "HTTP/2",
            BenchProtocol::H3 => "HTTP/3",
        }
    }
}

impl HttpPlan {
    /// Validates the flags of one run and encodes its request.
    pub fn new(
        url: &str,
        connections: usize,
        depth: usize,
        common: &HttpCommon,
        default_duration: Duration,
    ) -> Result<HttpPlan, String> {
        let target = HttpTarget::parse(url)?;
        if connections == 0 {
            return Err("-c must be at least 1".into());
        }
        if common.threads == 0 {
            return Err("-t must be at least 1".into());
        }
        if depth == 0 {
            return Err("--depth must be at least 1".into());
        }
        let protocol = match (common.h2, common.h3) {
            (true, true) => return Err("--h2 and --h3 exclude each other".into()),
            (true, false) => BenchProtocol::H2,
            (false, true) => BenchProtocol::H3,
            (false, false) => BenchProtocol::Http1,
        };
        if protocol == BenchProtocol::H2 && common.new_conn {
            return Err(format!(
                "--{} and --new-conn exclude each other: an {} connection carries many requests",
                protocol.name(),
                protocol.title()
            ));
        }
        if protocol == BenchProtocol::H3 && !target.tls {
            return Err(
                "--h3 needs an https:// URL: HTTP/3 runs over QUIC, which is always encrypted"
                    .into(),
            );
        }
        if depth > 1 && common.new_conn {
            let what = if protocol == BenchProtocol::H3 {
                "--streams"
            } else {
                "--depth"
            };
            return Err(format!(
                "{what} and --new-conn exclude each other: a new connection carries one request"
            ));
        }
        if common.requests == Some(0) {
            return Err("-n must be at least 1".into());
        }
        if let Some(r) = common.rate {
            if !(r.is_finite() && r > 0.0) {
                return Err("--rate must be a positive number of requests per second".into());
            }
        }
        if common.resume && !target.tls {
            return Err("--resume needs an https:// URL".into());
        }
        let mut headers = common
            .headers
            .iter()
            .map(|h| parse_header_arg(h))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(host) = sni_host(&target, common.tls.sni.as_deref(), &headers) {
            headers.insert(0, ("Host".to_string(), host));
        }
        let body = match (&common.body, &common.body_file) {
            (Some(b), _) => b.as_bytes().to_vec(),
            (None, Some(path)) => {
                std::fs::read(path).map_err(|e| format!("--body-file {}: {e}", path.display()))?
            }
            (None, None) => Vec::new(),
        };
        let method = common.request_method()?;
        let request = encode_request(method, &target, &headers, &body, common.new_conn)?;
        let duration = match (common.duration, common.requests) {
            (Some(d), _) => Some(d),
            (None, Some(_)) => None,
            (None, None) => Some(default_duration),
        };
        let tls = if target.tls {
            Some(ClientTls::new(
                &common.tls,
                &target.host,
                &[protocol.name().as_bytes()],
                common.resume,
            )?)
        } else {
            None
        };
        let stream_request = if protocol != BenchProtocol::Http1 {
            Some(stream_bench_request(
                method,
                if target.tls { "https" } else { "http" },
                &target.authority,
                &target.path,
                &headers,
                &body,
            )?)
        } else {
            None
        };
        Ok(HttpPlan {
            method: Method::from_token(method.as_bytes()),
            batch: request.repeat(depth),
            request_len: request.len(),
            depth,
            connections,
            threads: common.threads.min(connections),
            duration,
            requests: common.requests,
            rate: common.rate,
            timeout: common.timeout,
            new_conn: common.new_conn,
            tls,
            protocol,
            stream_request,
            target,
        })
    }

    /// The plan of `pier bench http`.
    pub fn from_args(args: &HttpArgs) -> Result<HttpPlan, String> {
        let streams = match (args.streams, args.common.short_m_streams()) {
            (Some(a), Some(b)) if a != b => {
                return Err(format!("-m {b} and --streams {a} disagree"));
            }
            (a, b) => a.or(b),
        };
        let depth = match (args.common.multiplexed(), streams) {
            (false, Some(_)) => return Err("--streams (-m N) needs --h2 or --h3".into()),
            (true, _) if args.depth > 1 => {
                return Err(
                    "--depth is HTTP/1.1 pipelining; with --h2 or --h3 use --streams".into(),
                )
            }
            (true, Some(0)) => return Err("--streams must be at least 1".into()),
            (true, streams) => streams.unwrap_or(1),
            (false, None) => args.depth,
        };
        HttpPlan::new(
            &args.url,
            args.connections,
            depth,
            &args.common,
            Duration::from_secs(10),
        )
    }

    /// The protocol's name in reports.
    pub fn protocol(&self) -> &'static str {
        self.protocol.name()
    }

    /// One encoded request.
    pub fn request(&self) -> &[u8] {
        self.batch.get(..self.request_len).unwrap_or(&[])
    }
}

/// Splits a `-H` argument into name and value, refusing what would break the
/// request's framing.
pub fn parse_header_arg(text: &str) -> Result<(String, String), String> {
    let (name, value) = text
        .split_once(':')
        .ok_or_else(|| format!("header {text:?}: write it as \"Name: value\""))?;
    if name.is_empty() || !name.bytes().all(is_tchar) {
        return Err(format!("header {text:?}: invalid field name"));
    }
    let value = value.trim_matches([' ', '\t']);
    if value.bytes().any(|b| (b < b' ' && b != b'\t') || b == 0x7f) {
        return Err(format!("header {text:?}: control character in the value"));
    }
    if name.eq_ignore_ascii_case("content-length") || name.eq_ignore_ascii_case("transfer-encoding")
    {
        return Err(format!(
            "header {text:?}: the body's framing is set from --body/--body-file"
        ));
    }
    Ok((name.to_string(), value.to_string()))
}

/// The `Host` that `--sni NAME` implies, as curl's `--connect-to` users expect:
/// the name (with the URL's port when it has one), unless `-H Host:` is given
/// or the URL is not https.
fn sni_host(
    target: &HttpTarget,
    sni: Option<&str>,
    headers: &[(String, String)],
) -> Option<String> {
    let sni = sni.filter(|_| target.tls)?;
    if headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        return None;
    }
    Some(match target.authority.strip_prefix(target.host.as_str()) {
        Some(port) if port.starts_with(':') => format!("{sni}{port}"),
        _ => sni.to_string(),
    })
}

/// Encodes the one request every connection sends: request line, `Host` (the
/// one given with `-H`, else the URL's), the other `-H` headers in order, `Connection: close` for
/// `--new-conn`, `Content-Length` when there is a body or the method carries one.
pub fn encode_request(
    method: &str,
    target: &HttpTarget,
    headers: &[(String, String)],
    body: &[u8],
    close: bool,
) -> Result<Vec<u8>, String> {
    if method.is_empty() || !method.bytes().all(is_tchar) {
        return Err(format!("method {method:?} is not a valid token"));
    }
    let mut out = Vec::with_capacity(128 + body.len());
    let host = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("host"))
        .map_or(target.authority.as_str(), |(_, v)| v.as_str());
    write_request_start(
        &mut out,
        method.as_bytes(),
        target.path.as_bytes(),
        None,
        host.as_bytes(),
    );
    for (name, value) in headers {
        if !name.eq_ignore_ascii_case("host") {
            write_field(&mut out, name.as_bytes(), value.as_bytes());
        }
    }
    if close
        && !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("connection"))
    {
        write_field(&mut out, b"Connection", b"close");
    }
    if !body.is_empty() || matches!(method, "POST" | "PUT" | "PATCH") {
        write_framing(&mut out, BodyKind::Length(body.len() as u64));
    }
    end_head(&mut out);
    out.extend_from_slice(body);
    Ok(out)
}

/// Constant-rate send times of one connection, as wrk2 schedules them: request
/// `k` is due at `start + k × interval` whether or not earlier ones were
/// answered, and its latency runs from that instant. A server that stalls then
/// shows the stall in every request that would have been sent meanwhile,
/// instead of in one slow sample (coordinated omission).
#[derive(Clone, Copy, Debug)]
pub struct Schedule {
    start: Instant,
    interval: Duration,
}

impl Schedule {
    /// `rate` requests/s for this connection, first one due at `start`.
    pub fn new(start: Instant, rate: f64) -> Schedule {
        Schedule {
            start,
            interval: Duration::from_secs_f64(1.0 / rate),
        }
    }

    /// When request `k` (from 0) is due.
    pub fn intended(&self, k: u64) -> Instant {
        let nanos = self.interval.as_nanos().saturating_mul(u128::from(k));
        self.start + Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// Latency of request `k` answered at `received`, from its due time.
    pub fn latency(&self, k: u64, received: Instant) -> Duration {
        received.saturating_duration_since(self.intended(k))
    }
}
