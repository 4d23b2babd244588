//! `[http2]`: the HTTP/2 limits of downstream connections, each with a default
//! safe for a server facing the internet (the values nginx, h2o and Pingora
//! settle on), validated into [`Http2Config`].

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::error::{ConfigError, Locator};
use super::value::{duration, int, RawDuration};

/// `[http2]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHttp2 {
    /// Streams a client may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS).
    pub max_concurrent_streams: Option<Spanned<i64>>,
    /// Flow-control window each request body starts with, in bytes.
    pub initial_stream_window: Option<Spanned<i64>>,
    /// Flow-control window of the whole connection, in bytes.
    pub initial_connection_window: Option<Spanned<i64>>,
    /// Largest frame payload the client may send.
    pub max_frame_size: Option<Spanned<i64>>,
    /// HPACK dynamic table the client's encoder may use.
    pub header_table_size: Option<Spanned<i64>>,
    /// Response bytes buffered per stream ahead of the client's window.
    pub max_send_buffer: Option<Spanned<i64>>,
    /// Streams a client may reset before their answer, per connection, before
    /// the connection is closed (rapid reset, CVE-2023-44487).
    pub max_client_resets: Option<Spanned<i64>>,
    /// Streams reset by the client before the server took them, queued at once.
    pub max_pending_resets: Option<Spanned<i64>>,
    /// Streams the server resets for the client's protocol errors, per connection.
    pub max_error_resets: Option<Spanned<i64>>,
    /// PING and SETTINGS frames a client may send at once (refilled at a
    /// tenth of that per second) before the connection is closed.
    pub max_control_frames: Option<Spanned<i64>>,
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
    /// Response bytes buffered per stream beyond what the client's window takes.
    pub max_send_buffer: usize,
    /// Client resets of unanswered streams per connection before GOAWAY.
    pub max_client_resets: u32,
    /// Reset streams waiting to be accepted before GOAWAY.
    pub max_pending_resets: usize,
    /// Streams reset for the client's protocol errors before GOAWAY.
    pub max_error_resets: usize,
    /// PING and SETTINGS frames allowed in a burst.
    pub max_control_frames: u32,
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
            max_send_buffer: 64 * 1024,
            max_client_resets: 200,
            max_pending_resets: 20,
            max_error_resets: 64,
            max_control_frames: 200,
            max_requests: 10_000,
            idle_timeout: Duration::from_secs(60),
        }
    }
}

/// Validates `[http2]`.
pub fn validate_http2(loc: &Locator<'_>, h: &RawHttp2) -> Result<Http2Config, ConfigError> {
    let d = Http2Config::default();
    let window = 65_535..=((1i64 << 31) - 1);
    Ok(Http2Config {
        max_concurrent_streams: int(
            loc,
            &h.max_concurrent_streams,
            "http2.max_concurrent_streams",
            1..=10_000,
            d.max_concurrent_streams.into(),
        )? as u32,
        initial_stream_window: int(
            loc,
            &h.initial_stream_window,
            "http2.initial_stream_window",
            window.clone(),
            d.initial_stream_window.into(),
        )? as u32,
        initial_connection_window: int(
            loc,
            &h.initial_connection_window,
            "http2.initial_connection_window",
            window,
            d.initial_connection_window.into(),
        )? as u32,
        max_frame_size: int(
            loc,
            &h.max_frame_size,
            "http2.max_frame_size",
            16_384..=16_777_215,
            d.max_frame_size.into(),
        )? as u32,
        header_table_size: int(
            loc,
            &h.header_table_size,
            "http2.header_table_size",
            0..=65_536,
            d.header_table_size.into(),
        )? as u32,
        max_send_buffer: int(
            loc,
            &h.max_send_buffer,
            "http2.max_send_buffer",
            1024..=(16 << 20),
            d.max_send_buffer as i64,
        )? as usize,
        max_client_resets: int(
            loc,
            &h.max_client_resets,
            "http2.max_client_resets",
            0..=1_000_000,
            d.max_client_resets.into(),
        )? as u32,
        max_pending_resets: int(
            loc,
            &h.max_pending_resets,
            "http2.max_pending_resets",
            1..=100_000,
            d.max_pending_resets as i64,
        )? as usize,
        max_error_resets: int(
            loc,
            &h.max_error_resets,
            "http2.max_error_resets",
            1..=100_000,
            d.max_error_resets as i64,
        )? as usize,
        max_control_frames: int(
            loc,
            &h.max_control_frames,
            "http2.max_control_frames",
            10..=1_000_000,
            d.max_control_frames.into(),
        )? as u32,
        max_requests: int(
            loc,
            &h.max_requests,
            "http2.max_requests",
            1..=i64::MAX,
            d.max_requests as i64,
        )? as u64,
        idle_timeout: duration(loc, &h.idle_timeout, "http2.idle_timeout", d.idle_timeout)?,
    })
}
