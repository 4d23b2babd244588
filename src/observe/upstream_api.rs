//! The runtime API for upstreams on the admin listener, JSON in and out:
//!
//! - `GET /api/upstreams`: every group of the running configuration and its
//!   servers (address, name, origin, weight, state, in flight, health history),
//!   the figures the status page shows;
//! - `POST /api/upstreams/GROUP/servers/ADDRESS/drain` (no new requests, those
//!   in flight finish), `/maintenance` (no requests and no health checks),
//!   `/ready` (back to normal), `/weight?value=N`.
//!
//! A change applies on every worker at its next request or pool sweep (within
//! a second) and lasts until the next reload or restart, as HAProxy's runtime
//! API does; the answer says so. With `[admin] token_file`, a change carries
//! `Authorization: Bearer TOKEN` (compared in constant time); without it,
//! changes are taken on a loopback admin listener only, from a request whose
//! `Host` names that listener (DNS rebinding). Either way a request whose
//! `Origin` is another origin (a browser page of another site) is refused,
//! and each change is logged with the peer that made it.

use std::net::SocketAddr;

use serde::Serialize;
use tracing::info;

use crate::http::RequestView;
use crate::observe::status::snapshot::GroupView;
use crate::observe::status::{StatusResponse, StatusState};
use crate::upstream::group::UpstreamGroup;
use crate::upstream::server_table::{ServerMode, ServerOrigin};

/// What every change's answer says about its reach.
const CHANGE_SCOPE: &str =
    "applied on every worker within a second; lasts until the next reload or restart";

/// `GET /api/upstreams`.
#[derive(Serialize)]
struct UpstreamsAnswer<'a> {
    upstreams: &'a [GroupView],
}

/// The answer to a change.
#[derive(Serialize)]
struct ChangeAnswer<'a> {
    group: &'a str,
    server: String,
    /// `drain`, `maintenance`, `ready`, `weight`, `add` or `remove`.
    change: &'a str,
    /// The weight now, for `weight`.
    #[serde(skip_serializing_if = "Option::is_none")]
    weight: Option<u32>,
    /// Servers of the group at that address (two names may share one).
    servers: usize,
    scope: &'static str,
}

#[derive(Serialize)]
struct ErrorAnswer<'a> {
    error: &'a str,
}

fn json(status: u16, body: String) -> StatusResponse {
    StatusResponse {
        status,
        content_type: "application/json",
        headers: vec![
            ("cache-control", "no-store".into()),
            ("x-content-type-options", "nosniff".into()),
        ],
        body,
    }
}

fn error(status: u16, message: &str) -> StatusResponse {
    let body = serde_json::to_string(&ErrorAnswer { error: message }).unwrap_or_default();
    let mut r = json(status, body + "\n");
    if status == 405 {
        r.headers.push(("allow", "GET, HEAD, POST, DELETE".into()));
    }
    r
}

/// The answer to a request under `/api/`, or `None` for another path.
/// `admin` is the admin listener's bound address.
pub fn api_page(
    status: &StatusState,
    admin: SocketAddr,
    req: &RequestView<'_>,
) -> Option<StatusResponse> {
    let path = std::str::from_utf8(req.path()).ok()?;
    let rest = path.strip_prefix("/api/")?;
    let method = req.method_token();
    let parts: Vec<&str> = rest.split('/').collect();
    Some(match parts.as_slice() {
        ["upstreams"] => match method {
            b"GET" | b"HEAD" => {
                let (_, groups) = status.upstream_views();
                let body = serde_json::to_string_pretty(&UpstreamsAnswer { upstreams: &groups })
                    .unwrap_or_default();
                json(200, body + "\n")
            }
            _ => error(405, "GET /api/upstreams reads; changes are POSTs to a server's path"),
        },
        ["upstreams", group, "servers", rest @ ..] => {
            let change = match (method, rest) {
                (b"POST", [server, action]) => Change::Set(server, action),
                (b"DELETE", [server]) => Change::Remove(server),
                (b"POST", []) => Change::Add,
                _ => {
                    return Some(error(
                        405,
                        "changes are POST .../servers (add), POST .../servers/ADDRESS/CHANGE and DELETE .../servers/ADDRESS",
                    ))
                }
            };
            let (config, _) = status.upstream_views();
            if let Err((code, why)) = write_allowed(req, admin, config.admin_token.as_deref()) {
                return Some(error(code, &why));
            }
            let Some(g) = config.upstreams.iter().find(|g| g.name == *group) else {
                return Some(error(404, &format!("no upstream group {group:?}")));
            };
            match change {
                Change::Set(server, action) => change_server(g, server, action, req),
                Change::Remove(server) => remove_server(g, server, req),
                Change::Add => add_server(g, req),
            }
        }
        _ => error(
            404,
            "not found: GET /api/upstreams; POST /api/upstreams/GROUP/servers?address=IP:PORT; POST /api/upstreams/GROUP/servers/ADDRESS/{drain,maintenance,ready,weight?value=N}; DELETE /api/upstreams/GROUP/servers/ADDRESS",
        ),
    })
}

/// Whether a request may change anything (see the module doc); the status
/// and why not.
fn write_allowed(
    req: &RequestView<'_>,
    admin: SocketAddr,
    token: Option<&str>,
) -> Result<(), (u16, String)> {
    let refuse = |why: String| Err((403, why));
    match token {
        Some(token) => {
            let given = req
                .header("authorization")
                .and_then(|v| v.strip_prefix(b"Bearer "))
                .unwrap_or_default();
            if aws_lc_rs::constant_time::verify_slices_are_equal(given, token.as_bytes()).is_err() {
                return Err((
                    401,
                    "a change needs Authorization: Bearer with the token of [admin] token_file"
                        .into(),
                ));
            }
        }
        None if !admin.ip().is_loopback() => return refuse(
            "changes on an admin listener that is not a loopback address need [admin] token_file"
                .into(),
        ),
        None => {}
    }
    let host = req
        .header("host")
        .and_then(|h| std::str::from_utf8(h).ok())
        .map(str::to_ascii_lowercase);
    let Some(host) = host else {
        return refuse("a change needs a Host field naming the admin listener".into());
    };
    let port = admin.port();
    let names = [
        admin.to_string(),
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
    ];
    // Behind a token the listener may be reached by any name of the host.
    if token.is_none() && !names.contains(&host) {
        return refuse(format!(
            "Host {host:?} is not the admin listener ({admin}); the change is refused"
        ));
    }
    if let Some(origin) = req.header("origin") {
        if origin != format!("http://{host}").as_bytes() {
            return refuse("a request from a page of another origin cannot change anything".into());
        }
    }
    if let Some(site) = req.header("sec-fetch-site") {
        if site != b"same-origin" && site != b"none" {
            return refuse("a request from a page of another site cannot change anything".into());
        }
    }
    Ok(())
}

/// A change to a group's servers.
enum Change<'a> {
    /// `POST .../servers/ADDRESS/ACTION`.
    Set(&'a str, &'a str),
    /// `DELETE .../servers/ADDRESS`.
    Remove(&'a str),
    /// `POST .../servers?address=IP:PORT&weight=N`.
    Add,
}

/// `server` from a path (percent-decoded) as an address.
fn address_of(server: &str) -> Result<SocketAddr, StatusResponse> {
    let server = percent_encoding::percent_decode_str(server).decode_utf8_lossy();
    server.parse::<SocketAddr>().map_err(|_| {
        error(
            400,
            &format!("{server:?} is not a server address (ip:port, [ipv6]:port)"),
        )
    })
}

/// The value of `name` in the request's query.
fn query_value<'r>(req: &RequestView<'r>, name: &str) -> Option<&'r str> {
    std::str::from_utf8(req.query()?)
        .ok()?
        .split('&')
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
}

/// A weight from the query (`value` or `weight`), 1 to 1000.
fn weight_of(req: &RequestView<'_>, name: &str) -> Option<u32> {
    query_value(req, name)
        .and_then(|v| v.parse::<u32>().ok())
        .filter(|w| (1..=1000).contains(w))
}

/// The slots of `g` at `server`, or the answer saying why there are none.
fn servers_at(g: &UpstreamGroup, server: &str) -> Result<(SocketAddr, Vec<usize>), StatusResponse> {
    let addr = address_of(server)?;
    let slots = slots_at(g, addr);
    if slots.is_empty() {
        return Err(error(
            404,
            &format!("group {:?} has no server at {addr}", g.name),
        ));
    }
    Ok((addr, slots))
}

/// Applies `action` to the servers of `g` at `server`.
fn change_server(
    g: &UpstreamGroup,
    server: &str,
    action: &str,
    req: &RequestView<'_>,
) -> StatusResponse {
    let (addr, slots) = match servers_at(g, server) {
        Ok(found) => found,
        Err(answer) => return answer,
    };
    let weight = match action {
        "drain" | "maintenance" | "ready" => {
            let mode = match action {
                "drain" => ServerMode::Drain,
                "maintenance" => ServerMode::Maintenance,
                _ => ServerMode::Ready,
            };
            for &i in &slots {
                g.servers.set_mode(i, mode);
            }
            None
        }
        "weight" => {
            let Some(w) = weight_of(req, "value") else {
                return error(400, "weight takes ?value=N, N from 1 to 1000");
            };
            for &i in &slots {
                g.servers.set_weight(i, w);
            }
            Some(w)
        }
        _ => {
            return error(
                404,
                &format!("unknown change {action:?}: drain, maintenance, ready or weight"),
            )
        }
    };
    changed(200, g, addr, action, weight, slots.len(), req)
}

/// `DELETE .../servers/ADDRESS`: the servers at that address leave the group
/// and drain.
fn remove_server(g: &UpstreamGroup, server: &str, req: &RequestView<'_>) -> StatusResponse {
    let (addr, slots) = match servers_at(g, server) {
        Ok(found) => found,
        Err(answer) => return answer,
    };
    for &i in &slots {
        g.servers.remove(i);
    }
    changed(200, g, addr, "remove", None, slots.len(), req)
}

/// `POST .../servers?address=IP:PORT&weight=N`: a server of origin `runtime`.
fn add_server(g: &UpstreamGroup, req: &RequestView<'_>) -> StatusResponse {
    let Some(text) = query_value(req, "address") else {
        return error(
            400,
            "adding a server takes ?address=IP:PORT (and &weight=N)",
        );
    };
    let addr = match address_of(text) {
        Ok(a) => a,
        Err(answer) => return answer,
    };
    let weight = match query_value(req, "weight") {
        None => 1,
        Some(_) => match weight_of(req, "weight") {
            Some(w) => w,
            None => return error(400, "weight is a number from 1 to 1000"),
        },
    };
    if g.servers
        .iter()
        .any(|s| s.addr == addr && s.listed() && s.origin != ServerOrigin::Runtime)
    {
        return error(
            409,
            &format!("group {:?} already has a server at {addr}", g.name),
        );
    }
    if g.servers.add_runtime(addr, weight).is_none() {
        return error(
            409,
            &format!("group {:?} has no room for another server", g.name),
        );
    }
    changed(201, g, addr, "add", Some(weight), 1, req)
}

/// Logs a change with who made it, and answers what it did.
fn changed(
    status: u16,
    g: &UpstreamGroup,
    addr: SocketAddr,
    change: &str,
    weight: Option<u32>,
    servers: usize,
    req: &RequestView<'_>,
) -> StatusResponse {
    let peer = req.peer();
    info!(%peer, group = %g.name, server = %addr, change, weight = ?weight, "admin API: upstream server changed");
    let body = serde_json::to_string_pretty(&ChangeAnswer {
        group: &g.name,
        server: addr.to_string(),
        change,
        weight,
        servers,
        scope: CHANGE_SCOPE,
    })
    .unwrap_or_default();
    json(status, body + "\n")
}

/// The slots of `group` whose address is `addr`.
fn slots_at(group: &UpstreamGroup, addr: SocketAddr) -> Vec<usize> {
    group
        .servers
        .iter()
        .enumerate()
        .filter(|(_, s)| s.addr == addr)
        .map(|(i, _)| i)
        .collect()
}
