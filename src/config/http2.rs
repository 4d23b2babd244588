//! `[http2]`: the HTTP/2 limits of downstream connections, each with a default
//! safe for a server facing the internet (the values nginx, h2o and Pingora
//! settle on), validated into [`Http2Config`].

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::error::{ConfigError, Locator};
use super::value::{duration, int_field, size_field, RawDuration, RawSize};
use crate::http2::conn::ConnLimits;

/// `[http2]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHttp2 {
    /// Streams a client may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS).
    pub max_concurrent_streams: Option<Spanned<i64>>,
    /// Flow-control window each request body starts with, in bytes.
    pub initial_stream_window: Option<Spanned<RawSize>>,
    /// Flow-control window of the whole connection, in bytes.
    pub initial_connection_window: Option<Spanned<RawSize>>,
    /// Largest frame payload the client may send.
    pub max_frame_size: Option<Spanned<RawSize>>,
    /// HPACK dynamic table the client's encoder may use.
    pub header_table_size: Option<Spanned<RawSize>>,
    /// Response bytes a connection queues ahead of the socket.
    pub max_send_buffer: Option<Spanned<RawSize>>,
    /// Streams a client may reset before their answer, per connection, before
    /// the connection is closed (rapid reset, CVE-2023-44487).
    pub max_client_resets: Option<Spanned<i64>>,
    /// Streams the server resets for the client's protocol errors, per connection.
    pub max_error_resets: Option<Spanned<i64>>,
    /// PING and SETTINGS frames a client may send at once (refilled at a
    /// tenth of that per second) before the connection is closed.
    pub max_control_frames: Option<Spanned<i64>>,
    /// PRIORITY, WINDOW_UPDATE and other frames that make the server do
    /// nothing, allowed at once (refilled at a tenth of that per second; the
    /// WINDOW_UPDATEs answering a download are not counted).
    pub max_inert_frames: Option<Spanned<i64>>,
    /// Requests served on one connection before it is closed with GOAWAY.
    pub max_requests: Option<Spanned<i64>>,
    /// A connection with no open stream for this long is closed with GOAWAY.
    pub idle_timeout: Option<Spanned<RawDuration>>,
}

/// The HTTP/2 limits, frozen. Header sizes, field counts, body limits and the
/// read and write timeouts are `[http]`'s, shared with HTTP/1.
#[derive(Debug, Clone)]
pub struct Http2Config {
    /// SETTINGS_MAX_CONCURRENT_STREAMS.
    pub max_concurrent_streams: u32,
    /// Initial stream flow-control window.
    pub initial_stream_window: u32,
    /// Initial connection flow-control window.
    pub initial_connection_window: u32,
    /// SETTINGS_MAX_FRAME_SIZE.
    pub max_frame_size: u32,
    /// SETTINGS_HEADER_TABLE_SIZE.
    pub header_table_size: u32,
    /// Response bytes queued per connection ahead of the socket: streams
    /// wait past it, so a client that does not read costs at most this (for
    /// write_timeout), and large answers take turns.
    pub max_send_buffer: usize,
    /// Client resets of unanswered streams per connection before GOAWAY.
    pub max_client_resets: u32,
    /// Streams reset for the client's protocol errors before GOAWAY.
    pub max_error_resets: usize,
    /// PING and SETTINGS frames allowed in a burst.
    pub max_control_frames: u32,
    /// Frames that do no work (PRIORITY, WINDOW_UPDATE...) allowed in a burst.
    pub max_inert_frames: u32,
    /// Requests per connection.
    pub max_requests: u64,
    /// Time without an open stream before GOAWAY.
    pub idle_timeout: Duration,
}

impl Default for Http2Config {
    fn default() -> Self {
        Http2Config {
            max_concurrent_streams: 128,
            initial_stream_window: 256 * 1024,
            initial_connection_window: 1024 * 1024,
            max_frame_size: 16 * 1024,
            header_table_size: 4096,
            max_send_buffer: 256 * 1024,
            max_client_resets: 200,
            max_error_resets: 64,
            max_control_frames: 200,
            max_inert_frames: 2000,
            max_requests: 10_000,
            idle_timeout: Duration::from_secs(60),
        }
    }
}

impl Http2Config {
    /// The limits the HTTP/2 codec enforces and announces, from these and
    /// `[http]`'s head limits: the one place the two are mapped.
    pub fn conn_limits(&self, http: &super::HttpConfig) -> ConnLimits {
        ConnLimits {
            max_concurrent_streams: self.max_concurrent_streams,
            initial_stream_window: self.initial_stream_window,
            initial_connection_window: self.initial_connection_window,
            max_frame_size: self.max_frame_size,
            header_table_size: self.header_table_size,
            max_header_list_size: http.limits.max_head_bytes as u32,
            max_header_fields: http.limits.max_headers,
            max_control_frames: self.max_control_frames,
            max_error_resets: self.max_error_resets,
            max_empty_frames: self.max_control_frames,
            max_inert_frames: self.max_inert_frames,
            // WebSockets over HTTP/2 (RFC 8441): the proxy relays them.
            enable_connect_protocol: true,
            no_rfc7540_priorities: true,
        }
    }
}

/// Validates `[http2]`.
pub fn validate_http2(loc: &Locator<'_>, h: &RawHttp2) -> Result<Http2Config, ConfigError> {
    let d = Http2Config::default();
    macro_rules! limit {
        ($field:ident, $range:expr) => {
            int_field!(loc, "http2", h, d, $field, $range)
        };
    }
    macro_rules! size_limit {
        ($field:ident, $range:expr) => {
            size_field!(loc, "http2", h, d, $field, $range)
        };
    }
    let window = 65_535..=((1u64 << 31) - 1);
    Ok(Http2Config {
        max_concurrent_streams: limit!(max_concurrent_streams, 1..=10_000),
        initial_stream_window: size_limit!(initial_stream_window, window.clone()),
        initial_connection_window: size_limit!(initial_connection_window, window),
        max_frame_size: size_limit!(max_frame_size, 16_384..=16_777_215),
        header_table_size: size_limit!(header_table_size, 0..=65_536),
        max_send_buffer: size_limit!(max_send_buffer, 1024..=(16 << 20)),
        max_client_resets: limit!(max_client_resets, 0..=1_000_000),
        max_error_resets: limit!(max_error_resets, 1..=100_000),
        max_control_frames: limit!(max_control_frames, 10..=1_000_000),
        max_inert_frames: limit!(max_inert_frames, 10..=10_000_000),
        max_requests: limit!(max_requests, 1..=i64::MAX),
        idle_timeout: duration(loc, &h.idle_timeout, "http2.idle_timeout", d.idle_timeout)?,
    })
}
