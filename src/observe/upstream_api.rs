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
//! API does; the answer says so. Who may call is decided before, in
//! [`crate::observe::admin_auth`]; each change is logged with who made it.

use std::net::SocketAddr;

use serde::Serialize;
use tracing::info;

use crate::http::RequestView;
use crate::observe::admin_answer::{error_answer as error, json_answer};
use crate::observe::admin_auth::ApiCaller;
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

/// The answer to a request under `/api/upstreams` (`rest` is the path after
/// `/api/`) from `caller`, who was let in.
pub fn upstreams_page(
    status: &StatusState,
    rest: &str,
    req: &RequestView<'_>,
    caller: &ApiCaller,
) -> StatusResponse {
    let method = req.method_token();
    let parts: Vec<&str> = rest.split('/').collect();
    match parts.as_slice() {
        ["upstreams"] => match method {
            b"GET" | b"HEAD" => {
                let (_, groups) = status.upstream_views();
                json_answer(200, &UpstreamsAnswer { upstreams: &groups })
            }
            _ => error(405, "GET /api/upstreams reads; changes are POSTs to a server's path"),
        },
        ["upstreams", group, "servers", rest @ ..] => {
            let change = match (method, rest) {
                (b"POST", [server, action]) => Change::Set(server, action),
                (b"DELETE", [server]) => Change::Remove(server),
                (b"POST", []) => Change::Add,
                _ => {
                    return error(
                        405,
                        "changes are POST .../servers (add), POST .../servers/ADDRESS/CHANGE and DELETE .../servers/ADDRESS",
                    )
                }
            };
            let config = status.current_config();
            let Some(g) = config.upstreams.iter().find(|g| g.name == *group) else {
                return error(404, &format!("no upstream group {group:?}"));
            };
            let by = Changer { req, caller };
            match change {
                Change::Set(server, action) => change_server(g, server, action, &by),
                Change::Remove(server) => remove_server(g, server, &by),
                Change::Add => add_server(g, &by),
            }
        }
        _ => error(
            404,
            "not found: GET /api/upstreams; GET or POST /api/config; POST /api/upstreams/GROUP/servers?address=IP:PORT; POST /api/upstreams/GROUP/servers/ADDRESS/{drain,maintenance,ready,weight?value=N}; DELETE /api/upstreams/GROUP/servers/ADDRESS",
        ),
    }
}

/// The request that changes something and who sent it.
struct Changer<'a, 'r> {
    req: &'a RequestView<'r>,
    caller: &'a ApiCaller,
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
    by: &Changer<'_, '_>,
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
            let Some(w) = weight_of(by.req, "value") else {
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
    changed(200, g, addr, action, weight, slots.len(), by)
}

/// `DELETE .../servers/ADDRESS`: the servers at that address leave the group
/// and drain.
fn remove_server(g: &UpstreamGroup, server: &str, by: &Changer<'_, '_>) -> StatusResponse {
    let (addr, slots) = match servers_at(g, server) {
        Ok(found) => found,
        Err(answer) => return answer,
    };
    for &i in &slots {
        g.servers.remove(i);
    }
    changed(200, g, addr, "remove", None, slots.len(), by)
}

/// `POST .../servers?address=IP:PORT&weight=N`: a server of origin `runtime`.
fn add_server(g: &UpstreamGroup, by: &Changer<'_, '_>) -> StatusResponse {
    let req = by.req;
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
    changed(201, g, addr, "add", Some(weight), 1, by)
}

/// Logs a change with who made it, and answers what it did.
fn changed(
    status: u16,
    g: &UpstreamGroup,
    addr: SocketAddr,
    change: &str,
    weight: Option<u32>,
    servers: usize,
    by: &Changer<'_, '_>,
) -> StatusResponse {
    let (peer, credential) = (by.caller.peer, &by.caller.credential);
    info!(%peer, %credential, group = %g.name, server = %addr, change, weight = ?weight, "admin API: upstream server changed");
    json_answer(
        status,
        &ChangeAnswer {
            group: &g.name,
            server: addr.to_string(),
            change,
            weight,
            servers,
            scope: CHANGE_SCOPE,
        },
    )
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
