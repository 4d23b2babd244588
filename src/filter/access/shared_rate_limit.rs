//! `rate_limit` with a `store`: the count kept in Redis for every instance
//! that shares it (`rate_store.rs`), with the instance's own table
//! (`rate_limit.rs`) as the answer when the store gives none and
//! `on_store_error = "local"`.

use std::borrow::Cow;

use super::rate_limit::{refuse, RateLimit};
use super::rate_store::{KeyDigest, OnStoreError, StoreLinks, StoreRule, StoreVerdict};
use super::Refusal;
use crate::filter::{RouteFilter, Verdict};
use crate::http::Session;

/// A rate limit counted in a store shared by a fleet.
#[derive(Debug)]
pub struct SharedRateLimit {
    store: StoreRule,
    /// This instance's own table, for `on_store_error = "local"`.
    local: RateLimit,
    on_error: OnStoreError,
}

impl SharedRateLimit {
    pub(super) fn new(store: StoreRule, local: RateLimit, on_error: OnStoreError) -> Self {
        SharedRateLimit {
            store,
            local,
            on_error,
        }
    }

    /// The answer when the store gave none: true lets the request through.
    fn fallback(&self, session: &mut dyn Session<'_>) -> bool {
        match self.on_error {
            OnStoreError::Allow => true,
            OnStoreError::Deny => {
                Refusal {
                    status: 503,
                    field: Some(("Retry-After", Cow::Borrowed(b"1"))),
                }
                .answer(session);
                false
            }
            OnStoreError::Local => match self.local.decide_locally(session) {
                Ok(()) => true,
                Err(wait) => {
                    refuse(session, wait);
                    false
                }
            },
        }
    }
}

impl RouteFilter for SharedRateLimit {
    fn request_filter<'s, 'h: 's>(&'h self, session: &'s mut dyn Session<'h>) -> Verdict<'s> {
        let key = {
            let mut digest = KeyDigest::default();
            self.local.key().feed(&session.request(), &mut digest);
            self.store.key(digest)
        };
        let links: &'h StoreLinks = session.worker().handlers.get();
        Verdict::Pending(Box::pin(async move {
            match self.store.decide(links, key).await {
                Ok(StoreVerdict::Pass) => true,
                Ok(StoreVerdict::Wait(wait)) => {
                    refuse(session, wait);
                    false
                }
                Err(_) => self.fallback(session),
            }
        }))
    }
}
