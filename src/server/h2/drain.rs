//! The rest of a request body that the answer did not need (a static file
//! or a 404 answered before the upload ended): the stream keeps reading it
//! for a moment, bounded in bytes and time, so what the client still sends
//! on the stream is checked (malformed trailers reset it with
//! PROTOCOL_ERROR, a window overflow with FLOW_CONTROL_ERROR, RFC 9113
//! §8.1.1 and §6.9.1) rather than dropped unseen with the stream. Past the
//! bound the stream is reset with NO_ERROR, which asks the client to stop
//! sending (RFC 9113 §8.1).

use std::future::poll_fn;
use std::time::Duration;

use super::stream::H2Stream;
use crate::http::Session;

/// Most body bytes read (and discarded) after the answer.
const DRAIN_MAX_BYTES: usize = 64 * 1024;

/// Longest wait for the rest of the body after the answer.
const DRAIN_MAX_WAIT: Duration = Duration::from_secs(1);

impl H2Stream<'_> {
    /// Reads what is left of the request body, up to the bounds above;
    /// returns at once when the body ended (every request without one: a
    /// HEADERS frame with END_STREAM) or failed. True when it ended.
    pub(super) async fn drain_unread_body(&mut self) -> bool {
        if self.body.done || self.record.body_error.is_some() {
            return self.body.done;
        }
        let drain = async {
            let mut left = DRAIN_MAX_BYTES;
            loop {
                match poll_fn(|cx| self.poll_body(cx)).await {
                    Ok(0) => return true,
                    Ok(n) => {
                        // Discarded, so the connection window opens for
                        // other streams.
                        self.consume_body(n);
                        if n >= left {
                            return false;
                        }
                        left -= n;
                    }
                    Err(_) => return false,
                }
            }
        };
        tokio::time::timeout(DRAIN_MAX_WAIT, drain)
            .await
            .unwrap_or(false)
    }
}
