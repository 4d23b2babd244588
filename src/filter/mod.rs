//! Route filters: what runs around a route's handler, whatever the handler
//! and whatever the protocol. A route with filters gets its handler wrapped in
//! [`Filtered`], which hands the handler a session of its own: request filters
//! run before the handler (and may answer instead of it: the 403, 401 and 429
//! of `access/`), response filters edit every head given to the session
//! (header rules, `cache_headers.rs`), the filters' own answers included, and
//! compression (`compress.rs`), innermost, encodes bodies, so the header rules
//! see (and may edit) its head. Both sides go through [`Session`] only, so an
//! HTTP/2 driver gets the filters without knowing they exist.
//!
//! A route without filters is not wrapped at all: it costs nothing. A route
//! with filters costs one allocation for the wrapped answer (none when every
//! filter decides at once and the handler answers at once, as a `respond`
//! route behind allow lists, rate limits and header rules), and one buffer
//! when a response filter puts a value made for the request (a placeholder,
//! `Expires`) in the head; the edited head itself is on the stack.

pub mod access;
pub mod cache_headers;
pub mod compress;
pub mod compress_configure;
pub mod compress_rules;
pub mod configure;
mod encoder;
mod head_edit;
pub mod headers;
pub mod placeholder;

use std::fmt;
use std::future::Future;
use std::io::IoSlice;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::handler::{BoxedHandler, Handler};
use crate::http::session_layer::{LayeredSession, SessionLayer};
use crate::http::RequestId;
use crate::http::{Body, RequestView, ResponseHead, Served, Session};
use crate::observe::metrics::HandlerKind;
use compress_rules::CompressSettings;
pub use head_edit::HeadEdit;

/// What a request filter decided.
pub enum Verdict<'s> {
    /// Go on to the next filter, then the handler.
    Continue,
    /// The filter answered through the session; the handler does not run.
    Answered,
    /// The filter must wait (a password hash checked off the event loop):
    /// the future says whether to go on (`true`) or that it answered.
    Pending(Pin<Box<dyn Future<Output = bool> + 's>>),
}

/// A filter a route runs around its handler. Built once from the
/// configuration and shared by every worker, like handlers.
pub trait RouteFilter: fmt::Debug + Send + Sync {
    /// Before the handler: let the request through, or answer it.
    fn request_filter<'s, 'h: 's>(&'h self, session: &'s mut dyn Session<'h>) -> Verdict<'s> {
        let _ = session;
        Verdict::Continue
    }

    /// Whether [`RouteFilter::request_filter`] never returns
    /// [`Verdict::Pending`]: filters that all decide at once around a handler
    /// that answers at once run without a future.
    fn decides_at_once(&self) -> bool {
        false
    }

    /// Whether [`RouteFilter::response_filter`] does anything, so routes whose
    /// filters only look at requests do not edit heads.
    fn edits_response(&self) -> bool {
        false
    }

    /// Edits a response head before the session sends it, given the request
    /// and its identifier (the same for every filter).
    fn response_filter<'a>(&'a self, _: &RequestView<'_>, _: &RequestId, _: &mut HeadEdit<'a>) {}

    /// Whether a field called `name` is left out of an interim (1xx) head
    /// relayed to the client. Such a head goes out before the final answer
    /// is known and is never edited otherwise: a filter only keeps fields out
    /// of it that the route keeps from its clients.
    fn drops_from_interim(&self, _name: &str) -> bool {
        false
    }

    /// The header rules this filter is, when it is one: a route whose only
    /// response filter is header rules with fixed values adds them to a head
    /// as prepared lines instead of editing it field by field.
    fn header_rules(&self) -> Option<&headers::HeaderRules> {
        None
    }
}

/// A filter as a route holds it.
pub type BoxedFilter = Box<dyn RouteFilter>;

/// Wraps `handler` in its route's filters and compression; with neither, the
/// handler as it is.
pub fn wrap(
    handler: BoxedHandler,
    filters: Vec<BoxedFilter>,
    compress: Option<CompressSettings>,
) -> BoxedHandler {
    if filters.is_empty() && compress.is_none() {
        return handler;
    }
    let edits_response = filters.iter().any(|f| f.edits_response());
    let mut editors = filters
        .iter()
        .enumerate()
        .filter(|(_, f)| f.edits_response());
    let header_rules_only = match (editors.next(), editors.next()) {
        (Some((i, f)), None) if f.header_rules().is_some() => Some(i),
        _ => None,
    };
    let at_once = compress.is_none()
        && handler.answers_at_once()
        && filters.iter().all(|f| f.decides_at_once());
    Box::new(Filtered {
        handler,
        filters: filters.into(),
        edits_response,
        header_rules_only,
        at_once,
        compress,
    })
}

/// A handler with its route's filters around it.
#[derive(Debug)]
pub struct Filtered {
    handler: BoxedHandler,
    filters: Box<[BoxedFilter]>,
    edits_response: bool,
    /// The filter that is the route's only response filter when it is header
    /// rules (whose fixed lines then spare the head edit).
    header_rules_only: Option<usize>,
    /// Every filter decides at once and the handler answers at once, without
    /// compression: the request is served without a future.
    at_once: bool,
    /// Compression of the handler's responses, inside the other filters.
    compress: Option<CompressSettings>,
}

impl Filtered {
    /// The handler the filters wrap.
    pub fn inner(&self) -> &dyn Handler {
        &*self.handler
    }
}

impl Handler for Filtered {
    fn kind(&self) -> HandlerKind {
        self.handler.kind()
    }

    fn reads_body(&self) -> bool {
        self.handler.reads_body()
    }

    fn serve<'s, 'h: 's>(&'h self, session: &'s mut dyn Session<'h>) -> Served<'s> {
        let mut filtered = LayeredSession {
            inner: session,
            layer: ResponseFilters {
                filters: &self.filters,
                edits_response: self.edits_response,
                header_rules: self
                    .header_rules_only
                    .and_then(|i| self.filters[i].header_rules()),
            },
        };
        if self.at_once {
            for filter in self.filters.iter() {
                let go_on = match filter.request_filter(&mut filtered) {
                    Verdict::Continue => true,
                    Verdict::Answered => false,
                    Verdict::Pending(_) => {
                        debug_assert!(false, "{filter:?} decides at once");
                        false
                    }
                };
                if !go_on || filtered.responded() {
                    return Served::Done;
                }
            }
            let served = self.handler.serve(&mut filtered);
            debug_assert!(matches!(served, Served::Done), "answers at once");
            return Served::Done;
        }
        // Two futures, so that a route without compression does not carry
        // compression's state in the future allocated for every request.
        let Some(settings) = &self.compress else {
            return Served::Pending(Box::pin(async move {
                if self.request_filters(&mut filtered).await {
                    match self.handler.serve(&mut filtered) {
                        Served::Done => {}
                        Served::Pending(answer) => answer.await,
                    }
                }
            }));
        };
        Served::Pending(Box::pin(async move {
            if self.request_filters(&mut filtered).await {
                compress::serve_compressed(&*self.handler, settings, &mut filtered).await;
            }
        }))
    }
}

impl Filtered {
    /// Runs the request filters in order; `false` once one answered.
    async fn request_filters<'h>(&'h self, filtered: &mut dyn Session<'h>) -> bool {
        for filter in self.filters.iter() {
            let go_on = match filter.request_filter(filtered) {
                Verdict::Continue => true,
                Verdict::Answered => false,
                Verdict::Pending(wait) => wait.await,
            };
            if !go_on || filtered.responded() {
                return false;
            }
        }
        true
    }
}

/// The layer a filtered handler answers through: the driver's session, with
/// the response filters applied to every head.
struct ResponseFilters<'h> {
    filters: &'h [BoxedFilter],
    edits_response: bool,
    /// The route's only response filter, when it is header rules.
    header_rules: Option<&'h headers::HeaderRules>,
}

impl<'h> SessionLayer<'h> for ResponseFilters<'h> {
    fn send_response(
        &mut self,
        inner: &mut dyn Session<'h>,
        head: &ResponseHead<'_>,
        body: Body<'h>,
    ) {
        if !self.edits_response || inner.responded() {
            return inner.send_response(head, body);
        }
        if let Some(rules) = self.header_rules {
            if !rules.applies_to(head.status) {
                return inner.send_response(head, body);
            }
            if let Some(edited) = rules.with_fixed_lines(head) {
                return inner.send_response(&edited, body);
            }
        }
        let mut edit = HeadEdit::from_head(head);
        {
            let req = inner.request();
            let id = inner.request_id();
            for filter in self.filters {
                filter.response_filter(&req, id, &mut edit);
            }
        }
        edit.send(inner, body);
    }

    fn send_interim(&mut self, inner: &mut dyn Session<'h>, status: u16, fields: &[(&str, &[u8])]) {
        if !self.edits_response || inner.responded() {
            return inner.send_interim(status, fields);
        }
        let kept: Vec<(&str, &[u8])> = fields
            .iter()
            .copied()
            .filter(|(name, _)| !self.filters.iter().any(|f| f.drops_from_interim(name)))
            .collect();
        // Early hints that the rules left without a field hint nothing.
        if status == 103 && kept.is_empty() {
            return;
        }
        inner.send_interim(status, &kept);
    }

    fn poll_write_body_gathered(
        &mut self,
        inner: &mut dyn Session<'h>,
        cx: &mut Context<'_>,
        pieces: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        // Filters edit heads only: body pieces reach the driver gathered.
        inner.poll_write_body_gathered(cx, pieces)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::respond::Respond;

    #[test]
    fn a_route_without_filters_or_compression_keeps_its_handler_unwrapped() {
        let bare = wrap(
            Box::new(Respond::new(200, Vec::new(), &[])),
            Vec::new(),
            None,
        );
        assert!(format!("{bare:?}").starts_with("Respond"), "{bare:?}");
        let rules = headers::HeaderRules::new(vec!["x-a".into()], Vec::new(), Vec::new(), false);
        let filtered = wrap(
            Box::new(Respond::new(200, Vec::new(), &[])),
            vec![Box::new(headers::ResponseHeaders(rules))],
            None,
        );
        assert!(
            format!("{filtered:?}").starts_with("Filtered"),
            "{filtered:?}"
        );
        assert_eq!(filtered.kind(), HandlerKind::Respond);
        // Compression alone wraps it too.
        let compressed = wrap(
            Box::new(Respond::new(200, Vec::new(), &[])),
            Vec::new(),
            Some(CompressSettings::default()),
        );
        assert!(format!("{compressed:?}").starts_with("Filtered"));
        assert_eq!(compressed.kind(), HandlerKind::Respond);
    }

    #[test]
    fn only_filters_and_a_handler_that_all_answer_at_once_run_without_a_future() {
        let rules = || {
            Box::new(headers::ResponseHeaders(headers::HeaderRules::new(
                vec!["x-a".into()],
                Vec::new(),
                Vec::new(),
                false,
            ))) as BoxedFilter
        };
        let respond = || Box::new(Respond::new(200, Vec::new(), &[])) as BoxedHandler;
        let at_once = |h: &BoxedHandler| format!("{h:?}").contains("at_once: true");
        assert!(at_once(&wrap(respond(), vec![rules()], None)));
        assert!(!at_once(&wrap(
            respond(),
            vec![rules()],
            Some(CompressSettings::default())
        )));
        /// A filter that may wait (as basic auth does).
        #[derive(Debug)]
        struct Waits;
        impl RouteFilter for Waits {}
        assert!(!at_once(&wrap(
            respond(),
            vec![rules(), Box::new(Waits)],
            None
        )));
    }
}
