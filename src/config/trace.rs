//! `[trace]`: OpenTelemetry trace export, validated into [`TraceConfig`].
//! Absent, tracing is off and costs a request one branch.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::error::{ConfigError, Locator};
use super::value::{duration, int, RawDuration};
use crate::filter::access::address::parse_address_entry;
use crate::http::request_trace::{TracePolicy, TrustIncoming};
use crate::http::trace_context::SampleRatio;
use crate::observe::trace::{ExportProtocol, TraceConfig};

/// `[trace]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTrace {
    /// The collector: `http://host:port/v1/traces` for OTLP/HTTP,
    /// `http://host:port` for gRPC.
    pub endpoint: Spanned<String>,
    /// `http/protobuf` (the default) or `grpc`, as
    /// `OTEL_EXPORTER_OTLP_PROTOCOL` names them.
    pub protocol: Option<Spanned<String>>,
    /// `service.name` of the spans (default `pier`).
    pub service_name: Option<Spanned<String>>,
    /// Share of new traces sampled, 0 to 1 (default 1).
    pub sample: Option<Spanned<f64>>,
    /// Export requests answered 5xx even when not sampled (default false).
    pub keep_errors: Option<bool>,
    /// Take `traceparent` and `tracestate` from requests: `true`, `false`
    /// (the default), or the networks whose connections are trusted.
    pub trust_incoming: Option<Spanned<RawTrust>>,
    /// Requests whose spans may wait for the exporter (default 4096).
    pub queue: Option<Spanned<i64>>,
    /// How often queued spans are sent (default 1s).
    pub flush_interval: Option<Spanned<RawDuration>>,
}

/// `trust_incoming` as written.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum RawTrust {
    /// Everyone or nobody.
    All(bool),
    /// Addresses and CIDR networks (plain strings: an untagged enum keeps no
    /// spans inside, so errors point at the key).
    From(Vec<String>),
}

/// `trust_incoming`: a list names addresses or networks (`"all"` is `true`
/// said another way, so it is refused for what it would hide).
fn validate_trust(
    loc: &Locator<'_>,
    raw: Option<&Spanned<RawTrust>>,
) -> Result<TrustIncoming, ConfigError> {
    let span = raw.map_or(0..0, Spanned::span);
    let nets = match raw.map(Spanned::get_ref) {
        None | Some(RawTrust::All(false)) => return Ok(TrustIncoming::Nobody),
        Some(RawTrust::All(true)) => return Ok(TrustIncoming::Everyone),
        Some(RawTrust::From(list)) => list,
    };
    let mut out = Vec::with_capacity(nets.len());
    for (i, entry) in nets.iter().enumerate() {
        let key = format!("trace.trust_incoming[{}]", i + 1);
        match parse_address_entry(entry) {
            Ok(Some(net)) => out.push(net),
            Ok(None) => {
                let says = "write trust_incoming = true to trust every client";
                return Err(loc.error(span, &key, says));
            }
            Err(m) => return Err(loc.error(span, &key, m)),
        }
    }
    Ok(TrustIncoming::From(out.into_boxed_slice()))
}

/// `protocol`: the two OTLP transports Pier speaks.
fn validate_protocol(
    loc: &Locator<'_>,
    raw: Option<&Spanned<String>>,
) -> Result<ExportProtocol, ConfigError> {
    let Some(raw) = raw else {
        return Ok(ExportProtocol::HttpProtobuf);
    };
    match raw.get_ref().trim() {
        "http/protobuf" => Ok(ExportProtocol::HttpProtobuf),
        "grpc" => Ok(ExportProtocol::Grpc),
        other => {
            let json = if other == "http/json" {
                "OTLP/JSON is not supported; "
            } else {
                ""
            };
            Err(loc.error(
                raw.span(),
                "trace.protocol",
                format!("{json}{other:?} is not a protocol Pier exports with: write \"http/protobuf\" or \"grpc\""),
            ))
        }
    }
}

/// `[trace]`: the endpoint must be an `http://` URL with a host (and no
/// path for gRPC, whose path is the service's method); the ratio within
/// 0..=1.
pub fn validate_trace(loc: &Locator<'_>, raw: &RawTrace) -> Result<TraceConfig, ConfigError> {
    let protocol = validate_protocol(loc, raw.protocol.as_ref())?;
    let endpoint = raw.endpoint.get_ref().trim();
    let Some(rest) = endpoint.strip_prefix("http://") else {
        let message = if endpoint.starts_with("https://") {
            "https endpoints are not supported; export to a local collector over http://"
        } else {
            "must be an http:// URL such as \"http://127.0.0.1:4318/v1/traces\""
        };
        return Err(loc.error(raw.endpoint.span(), "trace.endpoint", message));
    };
    let authority = rest.split('/').next().unwrap_or_default();
    let port_ok = match authority.rsplit_once(':') {
        Some((_, p)) if !authority.ends_with(']') => p.parse::<u16>().is_ok_and(|p| p != 0),
        _ => true,
    };
    if authority.is_empty()
        || authority.starts_with(':')
        || !port_ok
        || rest.contains(['?', '#', ' '])
    {
        return Err(loc.error(
            raw.endpoint.span(),
            "trace.endpoint",
            format!("{endpoint:?} is not an http://host:port/path URL"),
        ));
    }
    let path = &rest[authority.len()..];
    if protocol == ExportProtocol::Grpc && !path.is_empty() && path != "/" {
        return Err(loc.error(
            raw.endpoint.span(),
            "trace.endpoint",
            format!("{endpoint:?} has a path, which gRPC export does not take: write the collector's address alone, such as \"http://127.0.0.1:4317\""),
        ));
    }
    let service_name = match &raw.service_name {
        None => "pier".to_string(),
        Some(s) if s.get_ref().trim().is_empty() => {
            return Err(loc.error(s.span(), "trace.service_name", "must not be empty"))
        }
        Some(s) => s.get_ref().clone(),
    };
    let sample = match &raw.sample {
        None => 1.0,
        Some(s) if (0.0..=1.0).contains(s.get_ref()) => *s.get_ref(),
        Some(s) => {
            return Err(loc.error(
                s.span(),
                "trace.sample",
                format!(
                    "{} is not a share between 0 and 1 (0.01 samples one trace in a hundred)",
                    s.get_ref()
                ),
            ))
        }
    };
    let queue = int(loc, &raw.queue, "trace.queue", 1..=1_000_000, 4096)? as usize;
    let flush_interval = duration(
        loc,
        &raw.flush_interval,
        "trace.flush_interval",
        Duration::from_secs(1),
    )?;
    if flush_interval.is_zero() {
        let span = raw.flush_interval.as_ref().map_or(0..0, |f| f.span());
        return Err(loc.error(span, "trace.flush_interval", "must be above zero"));
    }
    Ok(TraceConfig {
        endpoint: endpoint.to_string(),
        protocol,
        service_name,
        policy: TracePolicy {
            sample: SampleRatio::new(sample),
            keep_errors: raw.keep_errors.unwrap_or(false),
            trust_incoming: validate_trust(loc, raw.trust_incoming.as_ref())?,
        },
        queue,
        flush_interval,
    })
}
