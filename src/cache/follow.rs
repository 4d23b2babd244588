//! A request that follows another's fetch of the same key (collapsed
//! forwarding): it waits for the response head up to the zone's lock
//! timeout, then answers with it and streams the body from the fill as the
//! leader stores it, so a second client of a large download does not wait
//! for its end.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::fill::{Fill, FillEnd};
use super::zone::CacheStats;
use crate::http::{Body, ResponseHead, Session, SessionExt};

/// How following ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Followed {
    /// The client was answered from the fill (whole, or cut short when the
    /// leader failed mid-body).
    Answered,
    /// No head came in time, or the response was not storable: the request
    /// goes to the origin itself.
    OnYourOwn,
}

/// Follows `fill` for `session`, waiting at most `lock_timeout` for its head.
pub async fn follow_fill<'h>(
    session: &mut dyn Session<'h>,
    fill: &Arc<Fill>,
    lock_timeout: Duration,
    stats: &CacheStats,
) -> Followed {
    let mut rx = fill.follow();
    let deadline = tokio::time::Instant::now() + lock_timeout;
    let head = loop {
        {
            let p = rx.borrow_and_update();
            if let Some(h) = &p.head {
                break h.clone();
            }
            if p.end != FillEnd::Open {
                return Followed::OnYourOwn;
            }
        }
        match tokio::time::timeout_at(deadline, rx.changed()).await {
            Ok(Ok(())) => {}
            _ => return Followed::OnYourOwn,
        }
    };
    stats.collapsed.fetch_add(1, Ordering::Relaxed);
    let fields = [
        ("Age", &b"0"[..]),
        ("Cache-Status", b"pier; fwd=miss; collapsed"),
    ];
    let response = ResponseHead {
        date: None,
        status: head.status,
        fields: &fields,
        configured: None,
        field_lines: &head.fields,
    };
    session.send_response(&response, Body::Push(head.body_len));
    let mut next = 0;
    loop {
        let (chunks, end) = {
            let p = rx.borrow_and_update();
            (p.chunks.get(next..).unwrap_or_default().to_vec(), p.end)
        };
        for c in &chunks {
            if session.write_body(c).await.is_err() {
                return Followed::Answered;
            }
            next += 1;
        }
        match end {
            FillEnd::Complete => {
                session.finish_body(&[]);
                return Followed::Answered;
            }
            FillEnd::Open => {
                if session.flush_body().await.is_err() || rx.changed().await.is_err() {
                    return Followed::Answered;
                }
            }
            // Cut short: the driver ends the connection, so the client does
            // not take a partial body for whole.
            FillEnd::Abandoned | FillEnd::Uncacheable => return Followed::Answered,
        }
    }
}
