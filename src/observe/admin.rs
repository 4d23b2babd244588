//! The admin listener: `/metrics` (Prometheus text), `/status` (a page for
//! people, see [`crate::observe::status`]), `/status.json` and the runtime
//! API under `/api/` (who may call it: [`crate::observe::admin_auth`];
//! upstreams: [`crate::observe::upstream_api`]; the configuration:
//! [`crate::observe::config_api`]), on a thread of its own so scraping never
//! runs on a worker.
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
use crate::http::{RequestView, Served, Session};
use crate::http1::parse::{Limits, Method};
use crate::observe::admin_answer::{error_answer, send_page};
use crate::observe::admin_auth::{api_access, ApiCaller, Refusal};
use crate::observe::config_api::{self, ConfigPosts, MAX_CONFIG_BYTES};
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
    /// Where `POST /api/config` hands a configuration: the thread that reloads.
    posts: ConfigPosts,
}

impl AdminPages {
    /// Who `req` (for a path under `/api/`) comes from, or why it is refused.
    fn api_caller(&self, req: &RequestView<'_>) -> Result<ApiCaller, Refusal> {
        let token = self.status.current_config().admin_token.clone();
        let change = !matches!(req.method(), Method::Get | Method::Head);
        api_access(req, self.bound, token.as_deref(), change)
    }

    /// The answer to a request under `/api/` (`rest` is the path after it).
    fn api_page(&self, rest: &str, req: &RequestView<'_>) -> StatusResponse {
        let caller = match self.api_caller(req) {
            Ok(c) => c,
            Err((code, why)) => return error_answer(code, &why),
        };
        if rest == "config" {
            return match req.method() {
                Method::Get | Method::Head => config_api::config_page(&self.status),
                _ => error_answer(
                    405,
                    "GET /api/config reads the running configuration; POST replaces it",
                ),
            };
        }
        crate::observe::upstream_api::upstreams_page(&self.status, rest, req, &caller)
    }

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
        if let Some(rest) = std::str::from_utf8(req.path())
            .ok()
            .and_then(|p| p.strip_prefix("/api/"))
        {
            return self.api_page(rest, req);
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

    fn reads_body(&self) -> bool {
        true
    }

    fn serve<'s, 'h: 's>(&'h self, session: &'s mut dyn Session<'h>) -> Served<'s> {
        let req = session.request();
        if req.method() == Method::Post && req.path() == b"/api/config" {
            match self.api_caller(&req) {
                Ok(caller) => {
                    let posts = self.posts.clone();
                    return Served::Pending(Box::pin(config_api::post_config(
                        session, posts, caller,
                    )));
                }
                Err((code, why)) => {
                    let page = error_answer(code, &why);
                    return send_page(session, page);
                }
            }
        }
        let page = self.page(&req);
        send_page(session, page)
    }
}

/// The configuration the admin thread's driver runs: one route, the admin pages.
fn admin_config(
    registry: Arc<Registry>,
    status: Arc<StatusState>,
    bound: SocketAddr,
    posts: ConfigPosts,
) -> Config {
    let mut routes = RouteTable::default();
    routes
        .insert(
            None,
            crate::route::matcher::RouteMatch::everything(),
            Box::new(AdminPages {
                registry,
                status,
                bound,
                posts,
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
            max_body_bytes: MAX_CONFIG_BYTES,
            ..HttpConfig::default()
        },
        http2: Default::default(),
        http3: Default::default(),
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
        allow_config_write: false,
        text: Arc::from(""),
        caches: Vec::new(),
    }
}

/// Starts the admin thread on an already bound listener; configurations
/// posted to it go to `posts`.
pub fn spawn_admin(
    listener: StdListener,
    registry: Arc<Registry>,
    status: Arc<StatusState>,
    posts: ConfigPosts,
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
            admin_config(registry, status, bound, posts),
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
