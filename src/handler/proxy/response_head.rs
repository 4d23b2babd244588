//! Phase 6, reading the response head through the shared reader
//! ([`crate::http1::client::head`]), within the group's response timeout.

use super::request_info::RequestInfo;
use super::upstream::UpstreamGroup;
use super::{ErrorKind, ProxyError};
use crate::deadline::Deadline;
use crate::http1::client::{parse_final_head, ClientStream};
use crate::http1::response::ParsedResponseHead;
use crate::worker::READ_BUF;

/// How reading a response head failed.
pub(super) struct HeadError {
    pub(super) error: ProxyError,
    /// No byte of a response arrived (so a retry cannot duplicate a response).
    pub(super) nothing_received: bool,
}

/// Reads the upstream response head into `buf`, skipping interim 1xx heads
/// other than 101 (the proxy answered `Expect: 100-continue` itself).
pub(super) async fn read_response_head(
    up: &mut ClientStream,
    buf: &mut Vec<u8>,
    resp: &mut ParsedResponseHead,
    info: &RequestInfo,
    group: &UpstreamGroup,
    http: &crate::config::HttpConfig,
) -> Result<(), HeadError> {
    // Armed only when a read has to wait, which spares the clock and the timer
    // wheel when the answer is already there.
    let mut deadline = Deadline::after(group.response_timeout);
    // Bytes may be there already: an answer that came while the request was sent.
    let mut received = !buf.is_empty();
    loop {
        match parse_final_head(buf, &http.limits, info.method, resp) {
            Ok(found) => {
                if found.interim > 0 {
                    buf.drain(..found.interim);
                }
                if !found.complete {
                    // Read more.
                } else if resp.status == 101 && !info.upgrade {
                    return Err(HeadError {
                        error: ProxyError::upstream(
                            ErrorKind::Malformed,
                            "101 to a request that did not ask to upgrade",
                        ),
                        nothing_received: false,
                    });
                } else {
                    return Ok(());
                }
            }
            Err(e) => {
                return Err(HeadError {
                    error: ProxyError::upstream(ErrorKind::Malformed, e),
                    nothing_received: false,
                })
            }
        }
        if buf.capacity() - buf.len() < 2048 {
            buf.reserve(READ_BUF);
        }
        match deadline.run(up.read_into(buf)).await {
            Ok(Ok(0)) => {
                return Err(HeadError {
                    error: ProxyError::upstream(
                        ErrorKind::Reset,
                        if received {
                            "connection closed inside the response head"
                        } else {
                            "connection closed before a response"
                        },
                    ),
                    nothing_received: !received,
                })
            }
            Ok(Ok(_)) => received = true,
            Ok(Err(e)) => {
                return Err(HeadError {
                    error: ProxyError::upstream(ErrorKind::Reset, e),
                    nothing_received: !received,
                })
            }
            Err(_) => {
                return Err(HeadError {
                    error: ProxyError::upstream(ErrorKind::Timeout, "no response head in time"),
                    nothing_received: !received,
                })
            }
        }
    }
}
