//! What an HTTP/2 connection keeps from one stream to the next so that the
//! common answer allocates little: the request-head buffers of finished
//! streams, the `Date` field of the current second and the last
//! `content-length` field, each made once and cloned (a reference count)
//! rather than built again for every response.

use std::cell::RefCell;

use http::HeaderValue;

use crate::http1::parse::RequestHead;
use crate::worker::WorkerCtx;

/// Spare head buffers kept: enough for the streams answered in one wake.
const SPARE_HEADS: usize = 8;

/// A spare buffer larger than this is dropped rather than kept, so one large
/// head does not pin its memory for the connection's life.
const SPARE_HEAD_BYTES: usize = 4096;

/// The connection's reusable pieces.
#[derive(Default)]
pub(super) struct StreamReuse {
    heads: RefCell<Vec<(Vec<u8>, RequestHead)>>,
    date: RefCell<Option<HeaderValue>>,
    length: RefCell<Option<(u64, HeaderValue)>>,
}

impl StreamReuse {
    /// An empty head buffer and parse, from a finished stream when there is one.
    pub(super) fn take_head(&self) -> (Vec<u8>, RequestHead) {
        self.heads.borrow_mut().pop().unwrap_or_default()
    }

    /// Keeps a finished stream's head buffers for the next stream.
    pub(super) fn give_head(&self, mut buf: Vec<u8>, head: RequestHead) {
        let mut heads = self.heads.borrow_mut();
        if heads.len() < SPARE_HEADS && buf.capacity() <= SPARE_HEAD_BYTES {
            buf.clear();
            heads.push((buf, head));
        }
    }

    /// The `Date` field for now, made once a second.
    pub(super) fn date(&self, ctx: &WorkerCtx) -> Option<HeaderValue> {
        let mut cache = ctx.date.borrow_mut();
        let now = cache.get_at(ctx.clock.now());
        let mut kept = self.date.borrow_mut();
        if let Some(v) = kept.as_ref().filter(|v| v.as_bytes() == now) {
            return Some(v.clone());
        }
        let v = HeaderValue::from_bytes(now).ok()?;
        *kept = Some(v.clone());
        Some(v)
    }

    /// The `content-length` field for `n`: the last one when `n` is the same.
    pub(super) fn length(&self, n: u64) -> HeaderValue {
        let mut kept = self.length.borrow_mut();
        if let Some((m, v)) = kept.as_ref() {
            if *m == n {
                return v.clone();
            }
        }
        let v = HeaderValue::from(n);
        *kept = Some((n, v.clone()));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_length_field_follows_the_length_and_heads_come_back_empty() {
        let reuse = StreamReuse::default();
        assert_eq!(reuse.length(13).as_bytes(), b"13");
        assert_eq!(reuse.length(13).as_bytes(), b"13");
        assert_eq!(reuse.length(1024).as_bytes(), b"1024");
        assert_eq!(reuse.length(13).as_bytes(), b"13");

        let (mut buf, head) = reuse.take_head();
        buf.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
        reuse.give_head(buf, head);
        let (buf, _) = reuse.take_head();
        assert!(buf.is_empty() && buf.capacity() >= 18);
        reuse.give_head(vec![0; SPARE_HEAD_BYTES + 1], RequestHead::default());
        assert_eq!(
            reuse.take_head().0.capacity(),
            0,
            "a large buffer is not kept"
        );
    }
}
