//! Active health checks: one background thread per process (not per worker, so a
//! server sees one check per interval however many workers run) with its own
//! current-thread runtime. Each checked server gets a task that probes it every
//! `interval` (an HTTP `GET` expecting 2xx/3xx, or a TCP connect) and flips the
//! server's `active_up` flag after `fall` consecutive failures or `rise`
//! consecutive successes. Workers read the flag with a relaxed atomic load.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use tracing::{info, warn};

use super::group::{CheckKind, UpstreamGroup, UpstreamProtocol};
use super::h2_connection::{client_limits, connect_h2, H2Connection};
use super::h2_stream::{OpenFailed, ResponseEvent, StreamLease};
use crate::deadline;
use crate::http1::client::parse_final_head;
use crate::http1::client::request::{end_head, write_field, write_request_start};
use crate::http1::response::ParsedResponseHead;
use crate::http1::{Limits, Method};

/// The health checks of one configuration generation: dropping it (a reload
/// replaced the configuration) stops them at their next tick, though the old
/// groups live on while connections still use them.
#[derive(Debug, Default)]
pub struct HealthChecks {
    stop: Arc<AtomicBool>,
}

impl Drop for HealthChecks {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Starts the checker thread if any group has `health_check`. Each check ends
/// when the returned [`HealthChecks`] is dropped or its group is gone, and the
/// thread with the last of them.
pub fn spawn_health_checks(upstreams: &[Arc<UpstreamGroup>]) -> std::io::Result<HealthChecks> {
    let handle = HealthChecks::default();
    let groups: Vec<Arc<UpstreamGroup>> = upstreams
        .iter()
        .filter(|g| g.health_check.is_some())
        .cloned()
        .collect();
    if groups.is_empty() {
        return Ok(handle);
    }
    let stop = handle.stop.clone();
    crate::local_thread::spawn_local_thread("pier-health", "health checks", move || async move {
        let watchers: Vec<_> = groups
            .iter()
            .map(|g| tokio::task::spawn_local(watch_group(Arc::downgrade(g), stop.clone())))
            .collect();
        drop(groups);
        for w in watchers {
            let _ = w.await;
        }
    })?;
    Ok(handle)
}

/// How often a group's server table is looked at for servers a resolution
/// or the admin API added, whose checks then start.
const NEW_SERVER_POLL: std::time::Duration = std::time::Duration::from_millis(250);

/// Checks every server of a group, starting a check for each server a
/// resolution or the admin API adds; ends with the group or the generation.
async fn watch_group(group: Weak<UpstreamGroup>, stop: Arc<AtomicBool>) {
    let mut checks = Vec::new();
    loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let Some(g) = group.upgrade() else {
            break;
        };
        for i in checks.len()..g.servers.len() {
            checks.push(tokio::task::spawn_local(check_loop(
                group.clone(),
                i,
                stop.clone(),
            )));
        }
        drop(g);
        tokio::time::sleep(NEW_SERVER_POLL).await;
    }
    for c in checks {
        let _ = c.await;
    }
}

async fn check_loop(group: Weak<UpstreamGroup>, i: usize, stop: Arc<AtomicBool>) {
    let Some(hc) = group.upgrade().and_then(|g| g.health_check.clone()) else {
        return;
    };
    let (mut ok_run, mut fail_run) = (0u32, 0u32);
    let mut ticker = tokio::time::interval(hc.interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let Some(group) = group.upgrade() else {
            return;
        };
        let server = &group.servers[i];
        // A server that left the group, or is in maintenance, is not
        // checked; it keeps its state for the day it comes back.
        if !server.listed() || server.mode() == super::server_table::ServerMode::Maintenance {
            continue;
        }
        let result = match deadline::within(hc.timeout, check_server(&group, i, &hc.kind)).await {
            Ok(r) => r,
            Err(_) => Err("timed out".to_string()),
        }
        .map_err(|cause| crate::io_text::without_os_error(&cause));
        // A check that ended after its generation was replaced says nothing.
        if stop.load(Ordering::Relaxed) {
            return;
        }
        server
            .checks
            .record(result.as_ref().map(|_| ()).map_err(String::as_str));
        let up = server.active_up.load(Ordering::Relaxed);
        match result {
            Ok(()) => {
                fail_run = 0;
                ok_run = ok_run.saturating_add(1);
                if !up && ok_run >= hc.rise {
                    server.active_up.store(true, Ordering::Relaxed);
                    info!(upstream = %server.authority, address = %server.addr, group = %group.name, "health check: server is up");
                }
            }
            Err(cause) => {
                ok_run = 0;
                fail_run = fail_run.saturating_add(1);
                if up && fail_run >= hc.fall {
                    server.active_up.store(false, Ordering::Relaxed);
                    warn!(upstream = %server.authority, address = %server.addr, group = %group.name, cause = %cause, "health check: server is down");
                }
            }
        }
    }
}

/// One check of server `i`.
async fn check_server(group: &UpstreamGroup, i: usize, kind: &CheckKind) -> Result<(), String> {
    if group.protocol == UpstreamProtocol::H2 {
        return check_server_h2(group, i, kind).await;
    }
    let mut stream = super::dial::connect(group, i)
        .await
        .map_err(|e| e.to_string())?;
    let CheckKind::Http(path) = kind else {
        return Ok(());
    };
    let mut request = Vec::with_capacity(128);
    write_request_start(
        &mut request,
        b"GET",
        path.as_bytes(),
        None,
        group.servers[i].authority.as_bytes(),
    );
    write_field(&mut request, b"User-Agent", b"pier-health-check");
    write_field(&mut request, b"Connection", b"close");
    end_head(&mut request);
    stream
        .write_all(&request)
        .await
        .map_err(|e| e.to_string())?;
    let mut buf = Vec::with_capacity(4096);
    let mut head = ParsedResponseHead::new();
    loop {
        let found = parse_final_head(&buf, &Limits::default(), Method::Get, &mut head)
            .map_err(|e| e.to_string())?;
        if found.complete {
            return match head.status {
                200..=399 => Ok(()),
                status => Err(format!("status {status}")),
            };
        }
        if found.interim > 0 {
            buf.drain(..found.interim);
        }
        if buf.capacity() - buf.len() < 1024 {
            buf.reserve(4096);
        }
        match stream.read_into(&mut buf).await {
            Ok(0) => return Err("closed before a response".into()),
            Ok(_) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// One check of server `i` of an h2 group: the HTTP/2 connection (ALPN or
/// prior knowledge) on Pier's own codec and, for an `http` check, a `GET`
/// on a stream of it.
async fn check_server_h2(group: &UpstreamGroup, i: usize, kind: &CheckKind) -> Result<(), String> {
    let io = connect_h2(group, i).await.map_err(|e| e.to_string())?;
    let conn = H2Connection::new(client_limits(1));
    // The connection ends with the check: its task runs beside it.
    let _abort = AbortOnDrop(tokio::task::spawn_local(conn.clone().run(io)));
    let CheckKind::Http(path) = kind else {
        return Ok(());
    };
    let scheme: &[u8] = if group.tls.is_some() {
        b"https"
    } else {
        b"http"
    };
    let fields: [(&[u8], &[u8]); 1] = [(b"user-agent", b"pier-health-check")];
    let stream = StreamLease::new(&conn)
        .open(
            b"GET",
            scheme,
            group.servers[i].authority.as_bytes(),
            path.as_bytes(),
            &mut fields.into_iter(),
            true,
        )
        .await
        .map_err(|e| match e {
            OpenFailed::Connect(e) => e.to_string(),
            OpenFailed::NotOpened(e) => format!("no stream opened: {e:?}"),
        })?;
    loop {
        match std::future::poll_fn(|cx| stream.poll_response(cx)).await {
            Ok(ResponseEvent::Interim(_)) => {}
            Ok(ResponseEvent::Head(head)) => {
                return match head.status() {
                    200..=399 => Ok(()),
                    status => Err(format!("status {status}")),
                }
            }
            Ok(_) => return Err("no response head".into()),
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// Stops a task when dropped (the check's connection driver).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
