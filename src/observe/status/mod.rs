//! The status page of the admin listener: `GET /status` answers a live HTML
//! dashboard to browsers (`Accept: text/html`) and the plain-text summary to
//! everything else; `GET /status.json` answers the same data for scripts.
//!
//! Nothing here runs on a worker. A thread of its own samples the workers'
//! counters once a second into a history ([`history`]); a status request
//! gathers a [`snapshot::Snapshot`] from atomics and `ArcSwap`s without a lock
//! and renders it ([`json`], [`html`]). Reloads publish the running
//! configuration here ([`StatusState::reloaded`]), so upstream groups and
//! certificates shown are always the ones serving.

pub mod checks;
pub mod history;
pub mod html;
pub mod human;
pub mod json;
pub mod quantile;
pub mod snapshot;
pub mod upstream_rates;

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;

use crate::config::Config;
use crate::observe::metrics::Registry;
use history::{Recent, Sampler};
use snapshot::{ReloadRecord, Snapshot};

/// How often the sampler reads the workers' counters.
pub const SAMPLE_INTERVAL: Duration = Duration::from_secs(1);

/// What reloads change, published as one immutable value.
#[derive(Debug)]
pub struct ConfigView {
    /// 1 at start, one more per applied reload.
    pub generation: u64,
    /// The running configuration.
    pub current: Arc<Config>,
    /// Configurations a reload replaced, by generation; alive while
    /// connections still use them.
    pub retired: Vec<(u64, Weak<Config>)>,
    /// Listener URLs as bound.
    pub listeners: Vec<String>,
    /// The last reload's outcome.
    pub last_reload: Option<ReloadRecord>,
}

/// Everything the status page reads. Shared by the admin listener (reader),
/// the sampler thread and the reload path (the two writers, each of its own part).
#[derive(Debug)]
pub struct StatusState {
    /// The workers' counters.
    pub registry: Arc<Registry>,
    config: ArcSwap<ConfigView>,
    recent: ArcSwap<Recent>,
}

/// An answer of the status page, for the admin listener to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusResponse {
    /// HTTP status.
    pub status: u16,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// Further fields (security policy, caching).
    pub headers: Vec<(&'static str, String)>,
    /// The body.
    pub body: String,
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl StatusState {
    /// State for a process that just started with `config`, bound to `listeners`.
    pub fn new(registry: Arc<Registry>, config: Arc<Config>, listeners: Vec<String>) -> Self {
        StatusState {
            registry,
            config: ArcSwap::from_pointee(ConfigView {
                generation: 1,
                current: config,
                retired: Vec::new(),
                listeners,
                last_reload: None,
            }),
            recent: ArcSwap::new(history::empty()),
        }
    }

    /// The running configuration's upstream groups as the status page shows
    /// them (the admin API's `GET /api/upstreams`), with that configuration.
    pub fn upstream_views(&self) -> (Arc<Config>, Vec<snapshot::GroupView>) {
        let view = self.config.load();
        let recent = self.recent.load();
        let config = view.current.clone();
        let groups = config
            .upstreams
            .iter()
            .map(|g| {
                let rates = recent.upstreams.get(&(view.generation, g.index));
                snapshot::group_view(g, view.generation, false, rates, config.workers)
            })
            .collect();
        (config, groups)
    }

    /// The configuration in force now (the cache zones the admin purges).
    pub fn current_config(&self) -> Arc<Config> {
        self.config.load().current.clone()
    }

    /// A reload applied `next`, now bound to `listeners`. Called by the one
    /// thread that reloads, so the load-then-store below never races.
    pub fn reloaded(&self, next: Arc<Config>, listeners: Vec<String>) {
        let old = self.config.load_full();
        let mut retired: Vec<(u64, Weak<Config>)> = old
            .retired
            .iter()
            .filter(|(_, w)| w.strong_count() > 0)
            .cloned()
            .collect();
        retired.push((old.generation, Arc::downgrade(&old.current)));
        let message = format!("applied {}", next.source);
        self.config.store(Arc::new(ConfigView {
            generation: old.generation + 1,
            current: next,
            retired,
            listeners,
            last_reload: Some(ReloadRecord {
                at_unix: unix_now(),
                ok: true,
                message,
            }),
        }));
    }

    /// A reload failed with `why`; the running configuration stays.
    pub fn reload_failed(&self, why: String) {
        let old = self.config.load_full();
        self.config.store(Arc::new(ConfigView {
            generation: old.generation,
            current: old.current.clone(),
            retired: old.retired.clone(),
            listeners: old.listeners.clone(),
            last_reload: Some(ReloadRecord {
                at_unix: unix_now(),
                ok: false,
                message: why,
            }),
        }));
    }

    /// Reads the workers' counters once into `sampler` and publishes the result.
    pub fn sample(&self, sampler: &mut Sampler, now: Instant) {
        let mut recent = sampler.sample(&self.registry, now);
        recent.upstreams = sampler.upstreams.sample(&self.config.load(), now);
        self.recent.store(Arc::new(recent));
    }

    /// Starts the thread that samples once a second; it ends when the state is
    /// dropped.
    pub fn start_sampler(self: &Arc<Self>) -> std::io::Result<()> {
        let state = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("pier-status".into())
            .spawn(move || {
                let mut sampler = Sampler::default();
                let mut next = Instant::now();
                loop {
                    let Some(state) = state.upgrade() else { return };
                    state.sample(&mut sampler, Instant::now());
                    drop(state);
                    next += SAMPLE_INTERVAL;
                    let now = Instant::now();
                    if next > now {
                        std::thread::sleep(next - now);
                    } else {
                        next = now;
                    }
                }
            })?;
        Ok(())
    }

    /// Everything the page shows, now.
    pub fn snapshot(&self) -> Snapshot {
        snapshot::take(
            &self.registry,
            &self.config.load(),
            &self.recent.load(),
            SystemTime::now(),
        )
    }

    /// Appends the per-server upstream metrics of the running configuration
    /// to a Prometheus exposition. Groups of replaced configurations are left
    /// out while they drain: their series would repeat the running ones'
    /// labels; the status page shows them.
    pub fn render_upstream_metrics(&self, out: &mut String) {
        let view = self.config.load();
        crate::observe::upstream_exposition::render_prometheus(
            out,
            &view.current.upstreams,
            view.current.workers,
        );
    }

    /// Appends the running configuration's file IO pool gauges and counters
    /// to a Prometheus exposition.
    pub fn render_file_io_metrics(&self, out: &mut String) {
        self.config.load().current.file_io.render_prometheus(out);
    }

    /// The answer for `path` (`/status`, `/status.json`), choosing HTML or text
    /// for `/status` by the request's `Accept` field; `None` for other paths.
    pub fn answer(&self, path: &[u8], accept: Option<&[u8]>) -> Option<StatusResponse> {
        let no_store = ("cache-control", "no-store".to_string());
        match path {
            b"/status.json" => Some(StatusResponse {
                status: 200,
                content_type: "application/json",
                headers: vec![no_store, ("x-content-type-options", "nosniff".into())],
                body: json::render_json(&self.snapshot()),
            }),
            b"/status" | b"/" if accept.is_some_and(wants_html) => Some(StatusResponse {
                status: 200,
                content_type: "text/html; charset=utf-8",
                headers: html::security_headers()
                    .into_iter()
                    .chain([no_store, ("vary", "Accept".into())])
                    .collect(),
                body: html::render_html(&self.snapshot()),
            }),
            b"/status" | b"/" => Some(StatusResponse {
                status: 200,
                content_type: "text/plain; charset=utf-8",
                headers: vec![no_store, ("vary", "Accept".into())],
                body: self.registry.render_status(),
            }),
            _ => None,
        }
    }
}

/// Whether an `Accept` field asks for HTML: a browser's does (`text/html`
/// listed, not refused with `q=0`); curl's `*/*` does not.
pub fn wants_html(accept: &[u8]) -> bool {
    let Ok(accept) = std::str::from_utf8(accept) else {
        return false;
    };
    accept.split(',').any(|item| {
        let mut parts = item.split(';');
        let media = parts.next().unwrap_or("").trim();
        let refused = parts.any(|p| {
            let p = p.trim();
            p.strip_prefix("q=")
                .or_else(|| p.strip_prefix("Q="))
                .is_some_and(|q| q.trim().parse::<f32>().is_ok_and(|q| q <= 0.0))
        });
        (media.eq_ignore_ascii_case("text/html")
            || media.eq_ignore_ascii_case("application/xhtml+xml"))
            && !refused
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn browsers_get_html_and_curl_gets_text() {
        let firefox = b"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
        assert!(wants_html(firefox));
        assert!(wants_html(b"TEXT/HTML"));
        assert!(!wants_html(b"*/*"));
        assert!(!wants_html(b"text/plain"));
        assert!(!wants_html(b"text/html;q=0, text/plain"));
        assert!(!wants_html(b"\xff"));
    }
}
