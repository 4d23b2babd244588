//! The admin listener: `/metrics` (Prometheus text), `/status` (a page for
//! people, see [`crate::observe::status`]), `/status.json` and the runtime
//! API for upstreams under `/api/` ([`crate::observe::upstream_api`]), on a
//! thread of its own so scraping never runs on a worker.
//!
//! It is served by the same HTTP/1 driver as every route: [`AdminPages`] is a
//! handler, and the admin thread runs the driver over a configuration whose
//! only route is that handler. A page is added in [`AdminPages::page`] (the
//! status pages answer through [`StatusState::answer`]).

use std::io;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tracing::{debug, warn};

use crate::config::{Config, HttpConfig};
use crate::handler::Handler;
use crate::http::{Body, RequestView, ResponseHead, Served, Session};
use crate::http1::parse::{Limits, Method};
use crate::observe::metrics::{HandlerKind, Registry};
use crate::observe::status::{StatusResponse, StatusState};
use crate::route::RouteTable;
use crate::server::h1::serve_http1;
use crate::server::transport::Plain;

/// A scrape that has not sent its head by then is dropped.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Admin requests are small; anything bigger is refused.
const LIMITS: Limits = Limits {
    max_head_bytes: 8 * 1024,
    max_headers: 64,
    max_uri_bytes: 1024,
};

/// Plain text for people.
const TEXT: &str = "text/plain; charset=utf-8";

/// The admin pages as a handler.
#[derive(Debug)]
pub struct AdminPages {
    registry: Arc<Registry>,
    status: Arc<StatusState>,
    /// Where the admin listener is bound: the one `Host` changes may name.
    bound: SocketAddr,
}

impl AdminPages {
    /// The answer to a request for `path`.
    fn page(&self, req: &RequestView<'_>) -> StatusResponse {
        let plain = |status: u16, content_type: &'static str, body: String| StatusResponse {
            status,
            content_type,
            headers: Vec::new(),
            body,
        };
        let caches = &self.status.current_config().caches;
        if let Some((status, body)) =
            crate::cache::admin::purge_page(caches, req.method_token(), req.path(), req.query())
        {
            return plain(status, TEXT, body);
        }
        if let Some(answer) = crate::observe::upstream_api::api_page(&self.status, self.bound, req)
        {
            return answer;
        }
        if !matches!(req.method(), Method::Get | Method::Head) {
            return plain(405, TEXT, "GET or HEAD only\n".into());
        }
        let path = req.path();
        if path == b"/metrics" {
            let mut text = self.registry.render_prometheus();
            self.status.render_upstream_metrics(&mut text);
            self.status.render_file_io_metrics(&mut text);
            crate::cache::admin::render_prometheus(&mut text, caches);
            return plain(200, "text/plain; version=0.0.4; charset=utf-8", text);
        }
        self.status
            .answer(path, req.header("accept"))
            .unwrap_or_else(|| {
                plain(
                    404,
                    TEXT,
                    "not found: try /metrics, /status, /status.json or /api/upstreams\n".into(),
                )
            })
    }
}

impl Handler for AdminPages {
    fn kind(&self) -> HandlerKind {
        HandlerKind::Respond
    }

    fn serve<'s, 'h: 's>(&'h self, session: &'s mut dyn Session<'h>) -> Served<'s> {
        let page = self.page(&session.request());
        let mut fields: Vec<(&str, &[u8])> = Vec::with_capacity(page.headers.len() + 2);
        fields.push(("content-type", page.content_type.as_bytes()));
        if page.status == 405 && !page.headers.iter().any(|(n, _)| *n == "allow") {
            fields.push(("allow", b"GET, HEAD"));
        }
        fields.extend(page.headers.iter().map(|(n, v)| (*n, v.as_bytes())));
        session.send_response(
            &ResponseHead::new(page.status, &fields),
            Body::Owned(page.body.into_bytes()),
        );
        Served::Done
    }
}

/// The configuration the admin thread's driver runs: one route, the admin pages.
fn admin_config(registry: Arc<Registry>, status: Arc<StatusState>, bound: SocketAddr) -> Config {
    let mut routes = RouteTable::default();
    routes
        .insert(
            None,
            crate::route::matcher::RouteMatch::everything(),
            Box::new(AdminPages {
                registry,
                status,
                bound,
            }),
        )
        .expect("one route");
    Config {
        source: "admin".into(),
        workers: 1,
        pin_cpus: false,
        drain_timeout: Duration::from_secs(1),
        max_connections: 0,
        http: HttpConfig {
            limits: LIMITS,
            header_read_timeout: REQUEST_TIMEOUT,
            keepalive_timeout: REQUEST_TIMEOUT,
            ..HttpConfig::default()
        },
        http2: Default::default(),
        listeners: Vec::new(),
        routes,
        upstreams: Vec::new(),
        admin: None,
        access_log: None,
        trace: None,
        file_io: Default::default(),
        findings: Vec::new(),
        resolver: Default::default(),
        warnings: Vec::new(),
        admin_token: None,
        caches: Vec::new(),
    }
}

/// Starts the admin thread on an already bound listener.
pub fn spawn_admin(
    listener: StdListener,
    registry: Arc<Registry>,
    status: Arc<StatusState>,
) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let bound = listener.local_addr()?;
    crate::local_thread::spawn_local_thread("pier-admin", "admin listener", move || async move {
        let listener = match TcpListener::from_std(listener) {
            Ok(l) => l,
            Err(e) => {
                warn!(error = %e, "admin listener cannot start");
                return;
            }
        };
        // Counters of its own: admin requests are not the workers' traffic.
        let ctx = crate::worker::standalone_ctx(
            admin_config(registry, status, bound),
            Default::default(),
        );
        loop {
            match listener.accept().await {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    let ctx = ctx.clone();
                    tokio::task::spawn_local(async move {
                        serve_http1(Plain::new(stream), &ctx, peer, 0, None).await;
                    });
                }
                Err(e) => {
                    debug!(error = %e, "admin accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    })
}
