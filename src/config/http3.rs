//! `[http3]`: the QUIC and HTTP/3 limits of downstream connections, each
//! with a default safe for a server facing the internet, validated into
//! [`Http3Config`] as `[http2]` is for HTTP/2. Header sizes, field counts,
//! body limits and the read and write timeouts are `[http]`'s; the
//! handshake's deadline is the listener's `tls.handshake_timeout`.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::error::{ConfigError, Locator};
use super::value::{duration, int_field, size_field, RawDuration, RawSize};
use crate::http3::qpack::DecoderLimits;

/// `[http3]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHttp3 {
    /// New QUIC handshakes per second on one worker's endpoint above which
    /// clients must prove their address with a Retry first (0: always).
    pub retry_above: Option<Spanned<i64>>,
    /// Request streams a client may have open at once.
    pub max_concurrent_streams: Option<Spanned<i64>>,
    /// Unidirectional streams a client may have open at once.
    pub max_uni_streams: Option<Spanned<i64>>,
    /// Bytes a client may send on one stream ahead of the server's reading.
    pub stream_window: Option<Spanned<RawSize>>,
    /// Bytes a client may send on the whole connection ahead of the
    /// server's reading.
    pub connection_window: Option<Spanned<RawSize>>,
    /// Response bytes queued per connection for QUIC, and held by QUIC
    /// until the client acknowledges them.
    pub max_send_buffer: Option<Spanned<RawSize>>,
    /// QPACK dynamic table the client's encoder may use.
    pub qpack_table_capacity: Option<Spanned<RawSize>>,
    /// Request streams that may wait on QPACK inserts at once.
    pub qpack_blocked_streams: Option<Spanned<i64>>,
    /// Streams a client may reset before their answer, per connection,
    /// before the connection is closed (the QUIC form of rapid reset).
    pub max_client_resets: Option<Spanned<i64>>,
    /// Small STREAM and DATA frames, unknown frames and unknown
    /// unidirectional streams a connection may send beyond what its data
    /// earns, before it is closed ([`crate::http3::frame_budget`]).
    pub frame_allowance: Option<Spanned<i64>>,
    /// A connection with nothing sent or received for this long is closed.
    pub idle_timeout: Option<Spanned<RawDuration>>,
}

/// The HTTP/3 limits, frozen.
#[derive(Debug, Clone)]
pub struct Http3Config {
    /// Handshakes per second per worker above which Retry is sent (0: always).
    pub retry_above: u32,
    /// Concurrent request (bidirectional) streams.
    pub max_concurrent_streams: u32,
    /// Concurrent unidirectional streams.
    pub max_uni_streams: u32,
    /// Receive window of each stream.
    pub stream_window: u64,
    /// Receive window of the connection.
    pub connection_window: u64,
    /// Response bytes per connection queued for QUIC, and unacknowledged
    /// in QUIC.
    pub max_send_buffer: u64,
    /// SETTINGS_QPACK_MAX_TABLE_CAPACITY.
    pub qpack_table_capacity: u64,
    /// SETTINGS_QPACK_BLOCKED_STREAMS.
    pub qpack_blocked_streams: usize,
    /// Client resets of unanswered streams per connection before it closes.
    pub max_client_resets: u32,
    /// The frame credit of a connection ([`crate::http3::frame_budget`]).
    pub frame_allowance: u32,
    /// Idle time before a connection is closed.
    pub idle_timeout: Duration,
}

impl Default for Http3Config {
    fn default() -> Self {
        Http3Config {
            retry_above: 200,
            max_concurrent_streams: 100,
            max_uni_streams: 8,
            stream_window: 256 * 1024,
            connection_window: 1024 * 1024,
            max_send_buffer: 4 * 1024 * 1024,
            qpack_table_capacity: 4096,
            qpack_blocked_streams: 16,
            max_client_resets: 200,
            frame_allowance: 1000,
            idle_timeout: Duration::from_secs(60),
        }
    }
}

impl Http3Config {
    /// The limits the QPACK decoder enforces and SETTINGS announce, from
    /// these and `[http]`'s head limit: the one place the two are mapped.
    pub fn decoder_limits(&self, http: &super::HttpConfig) -> DecoderLimits {
        DecoderLimits {
            max_table_capacity: self.qpack_table_capacity,
            max_blocked_streams: self.qpack_blocked_streams,
            max_field_section_size: http.limits.max_head_bytes as u64,
        }
    }
}

/// Validates `[http3]`.
pub fn validate_http3(loc: &Locator<'_>, h: &RawHttp3) -> Result<Http3Config, ConfigError> {
    let d = Http3Config::default();
    macro_rules! limit {
        ($field:ident, $range:expr) => {
            int_field!(loc, "http3", h, d, $field, $range)
        };
    }
    macro_rules! size_limit {
        ($field:ident, $range:expr) => {
            size_field!(loc, "http3", h, d, $field, $range)
        };
    }
    Ok(Http3Config {
        retry_above: limit!(retry_above, 0..=10_000_000),
        max_concurrent_streams: limit!(max_concurrent_streams, 1..=10_000),
        // The client's control and QPACK streams need three.
        max_uni_streams: limit!(max_uni_streams, 3..=100),
        stream_window: size_limit!(stream_window, 1024..=(1 << 30)),
        connection_window: size_limit!(connection_window, 1024..=(1 << 30)),
        max_send_buffer: size_limit!(max_send_buffer, 16 * 1024..=(1 << 30)),
        qpack_table_capacity: size_limit!(qpack_table_capacity, 0..=(1 << 20)),
        qpack_blocked_streams: limit!(qpack_blocked_streams, 0..=1000),
        max_client_resets: limit!(max_client_resets, 0..=1_000_000),
        frame_allowance: limit!(frame_allowance, 100..=10_000_000),
        idle_timeout: duration(loc, &h.idle_timeout, "http3.idle_timeout", d.idle_timeout)?,
    })
}
