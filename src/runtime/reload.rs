//! A reload (SIGHUP, or a configuration posted to the admin API) applied to
//! the running process: what the workers take as their next generation,
//! which sockets are bound or kept, and how the outcome is told; and the
//! start of a binary upgrade, which hands the same sockets on.

use std::sync::Arc;
use std::time::Duration;

use tracing::{error, info, warn};

use super::*;

/// How long a reload waits for the workers to take the new configuration
/// before it says so; a worker busy for longer switches when it gets to it.
const RELOAD_SWITCH_TIMEOUT: Duration = Duration::from_secs(2);

/// A reloaded TLS listener keeps the session-ticket keys of the one it
/// replaces, so clients resume across the reload.
fn keep_session_tickets(next: &mut config::ListenerConfig, old: &config::ListenerConfig) {
    let (Some(next_tls), Some(old_tls)) = (next.tls.as_mut(), old.tls.as_ref()) else {
        return;
    };
    if let Some(listener) = Arc::get_mut(&mut next_tls.listener) {
        listener.keep_tickets_of(&old_tls.listener);
    }
}

impl ServerProcess {
    /// SIGHUP: reloads (see [`ServerProcess::apply_config`]) and tells the status page
    /// how it went.
    pub(super) fn reload(&mut self) {
        let outcome = match self.source.load() {
            Ok(next) => self.apply_config(next),
            Err(e) => {
                error!(error = %e, "configuration reload failed; keeping the running configuration");
                Err(e.to_string())
            }
        };
        self.report_reload(outcome);
    }

    /// Tells the status page how a reload went.
    pub(super) fn report_reload(&self, outcome: Result<(), String>) {
        if let Some(status) = &self.status {
            match outcome {
                Ok(()) => status.reloaded(self.config.clone(), self.bound_listeners()),
                Err(why) => status.reload_failed(why),
            }
        }
    }

    /// Listener URLs as bound now, for the status page.
    fn bound_listeners(&self) -> Vec<String> {
        self.config
            .listeners
            .iter()
            .zip(ListenerKey::of(&self.config))
            .map(|(lc, key)| {
                let bound = self
                    .sockets
                    .iter()
                    .find(|(k, _)| *k == key)
                    .and_then(|(_, s)| s.local_addr().ok())
                    .unwrap_or(lc.addr);
                format!("{}://{bound}", scheme(lc))
            })
            .collect()
    }

    /// Hands `next` (built again from the same source, or posted) to every
    /// worker. A listener that cannot be bound changes nothing; the error
    /// says why.
    pub(super) fn apply_config(&mut self, mut next: Config) -> Result<(), String> {
        let old = self.config.clone();
        let workers = self.reloads.len();
        if next.workers != old.workers {
            warn!(
                running = old.workers,
                configured = next.workers,
                "a new worker count needs a binary upgrade (SIGUSR2); keeping the running count"
            );
            next.workers = old.workers;
        }
        if next.pin_cpus != old.pin_cpus {
            warn!("a change of pin_cpus needs a binary upgrade (SIGUSR2)");
        }
        if next.admin != old.admin {
            warn!(running = ?old.admin, configured = ?next.admin, "a change of the admin listener needs a binary upgrade (SIGUSR2); keeping it");
        }
        // Listeners are told apart by configured address: kept ones keep their
        // sockets (a new backlog is set on them once the reload is certain),
        // new ones are bound now.
        let old_keys = ListenerKey::of(&old);
        let next_keys = ListenerKey::of(&next);
        let mut added: Vec<(ListenerKey, Vec<std::net::TcpListener>)> = Vec::new();
        let mut backlogs: Vec<(ListenerKey, u32)> = Vec::new();
        let mut socket_changes: Vec<(ListenerKey, usize)> = Vec::new();
        for (lc, key) in next.listeners.iter_mut().zip(&next_keys) {
            if let Some(i) = old_keys.iter().position(|k| k == key) {
                keep_session_tickets(lc, &old.listeners[i]);
                if old.listeners[i].backlog != lc.backlog {
                    backlogs.push((*key, lc.backlog));
                }
                if old.listeners[i].socket != lc.socket {
                    socket_changes.push((*key, i));
                }
                continue;
            }
            match bind_listener(lc.addr, lc.backlog, &lc.socket, workers) {
                Ok(s) => added.push((*key, s)),
                Err(e) => {
                    error!(listener = %key, error = %e, "configuration reload failed: cannot listen; keeping the running configuration");
                    return Err(format!(
                        "cannot listen on {key}: {}",
                        without_os_error(&e.to_string())
                    ));
                }
            }
        }
        // HTTP/3 on a listener that did not have it: its UDP sockets now.
        let mut per_worker_quic: PerWorkerQuic = (0..workers).map(|_| Vec::new()).collect();
        let mut quic_added = Vec::new();
        for (lc, key) in next.listeners.iter().zip(&next_keys) {
            if !lc.http3 || self.quic.iter().any(|q| q.key == *key) {
                continue;
            }
            let tcp = added
                .iter()
                .find(|(k, _)| k == key)
                .and_then(|(_, s)| s.first());
            let tcp = tcp.or_else(|| self.sockets.iter().find(|(k, _)| k == key).map(|(_, s)| s));
            let Some(bound) = tcp.and_then(|s| s.local_addr().ok()) else {
                continue;
            };
            match bind_quic(
                *key,
                bound,
                lc.socket.ipv6_only,
                &mut per_worker_quic,
                Vec::new(),
                None,
            ) {
                Ok(q) => quic_added.push(q),
                Err(e) => {
                    error!(listener = %key, error = %e, "configuration reload failed: cannot listen on UDP for HTTP/3; keeping the running configuration");
                    return Err(format!(
                        "cannot listen on UDP {bound} for HTTP/3: {}",
                        without_os_error(&e.to_string())
                    ));
                }
            }
        }
        let access_log = if next.access_log == old.access_log {
            self.access_log.as_ref().map(AccessLog::shared)
        } else {
            match &next.access_log {
                Some(c) => match AccessLog::start(c.clone(), workers) {
                    Ok(log) => {
                        let shared = log.shared();
                        if let Some(prev) = self.access_log.replace(log) {
                            self.retired_logs.push(prev);
                        }
                        Some(shared)
                    }
                    Err(e) => {
                        error!(target = %c.target, error = %e, "configuration reload failed: cannot open the access log; keeping the running configuration");
                        return Err(format!(
                            "cannot open the access log {}: {}",
                            c.target,
                            without_os_error(&e.to_string())
                        ));
                    }
                },
                None => {
                    if let Some(prev) = self.access_log.take() {
                        self.retired_logs.push(prev);
                    }
                    None
                }
            }
        };
        let trace = if next.trace == old.trace {
            self.trace.as_ref().map(TraceExporter::shared)
        } else {
            let failures = &self.registry.trace_export_failures;
            let started = match next
                .trace
                .clone()
                .map(|c| TraceExporter::start(c, failures.clone()))
                .transpose()
            {
                Ok(t) => t,
                Err(e) => {
                    error!(error = %e, "configuration reload failed: cannot start the trace exporter; keeping the running configuration");
                    return Err(format!(
                        "cannot start the trace exporter: {}",
                        without_os_error(&e.to_string())
                    ));
                }
            };
            let shared = started.as_ref().map(TraceExporter::shared);
            if let Some(prev) = std::mem::replace(&mut self.trace, started) {
                self.retired_traces.push(prev);
            }
            shared
        };
        let next = Arc::new(next);
        self.registry
            .routes
            .store(Arc::new(next.routes.labels().to_vec()));
        crate::cache::zone::start_disk_tiers(&next.caches);
        log_config_warnings(&next);
        match crate::upstream::discovery::spawn_discovery(&next.upstreams, &next.resolver) {
            Ok(d) => self.discovery = d,
            Err(e) => {
                self.discovery = Default::default();
                warn!(error = %e, "cannot start resolving the reloaded configuration's upstream names");
            }
        }
        match crate::upstream::health::spawn_health_checks(&next.upstreams) {
            Ok(checks) => self.health_checks = checks,
            Err(e) => {
                self.health_checks = Default::default();
                warn!(error = %e, "cannot start health checks of the reloaded configuration");
            }
        }
        if let Err(e) =
            crate::tls::acme::spawn_renewals(next.listeners.iter().filter_map(|l| l.tls.as_ref()))
        {
            warn!(error = %e, "cannot start ACME certificate management of the reloaded configuration");
        }
        let removed: Vec<ListenerKey> = old_keys
            .into_iter()
            .filter(|k| !next_keys.contains(k))
            .collect();
        self.sockets.retain(|(a, _)| !removed.contains(a));
        for (key, backlog) in &backlogs {
            for (_, s) in self.sockets.iter().filter(|(k, _)| k == key) {
                if let Err(e) = set_backlog(s, *backlog) {
                    warn!(listener = %key, backlog, error = %e, "cannot set the new backlog");
                }
            }
        }
        for (key, was) in &socket_changes {
            let Some(i) = next_keys.iter().position(|k| k == key) else {
                continue;
            };
            let (old_opts, new_opts) = (&old.listeners[*was].socket, &next.listeners[i].socket);
            let kept: Vec<_> = self.sockets.iter().filter(|(k, _)| k == key).collect();
            for (_, s) in &kept {
                if let Err(e) = sockopt::apply_listener(s, new_opts) {
                    warn!(listener = %key, error = %e, "cannot set the new socket options");
                }
            }
            for w in sockopt::changes_kept_apart(old_opts, new_opts) {
                warn!(listener = %key, "{w}");
            }
            if let Some((_, s)) = kept.first() {
                sockopt::log_listener(key, new_opts, s);
            }
        }
        let mut per_worker: Vec<WorkerListeners> = (0..workers).map(|_| Vec::new()).collect();
        for (key, socks) in added.iter_mut() {
            let bound = socks.first().and_then(|s| s.local_addr().ok());
            info!(listener = %key, bound = ?bound, "listener added");
            if let (Some(s), Some(i)) = (socks.first(), next_keys.iter().position(|k| k == key)) {
                sockopt::log_listener(key, &next.listeners[i].socket, s);
            }
            for (i, s) in socks.drain(..).enumerate() {
                match s.try_clone() {
                    Ok(copy) => self.sockets.push((*key, copy)),
                    Err(e) => {
                        warn!(listener = %key, error = %e, "cannot keep a copy of a socket for upgrades")
                    }
                }
                per_worker[i % workers.max(1)].push((*key, s));
            }
        }
        let (applied, switched) = std::sync::mpsc::channel();
        let mut sent = 0;
        self.quic.extend(quic_added);
        for ((tx, listeners), quic) in self.reloads.iter().zip(per_worker).zip(per_worker_quic) {
            let g = Generation {
                config: next.clone(),
                access_log: access_log.clone(),
                trace: trace.clone(),
                listeners,
                quic,
                applied: Some(applied.clone()),
            };
            if tx.send(g).is_ok() {
                sent += 1;
            }
        }
        drop(applied);
        // Once every worker has switched, a new connection gets the new
        // configuration: the log line below can be relied on.
        let mut deadline = Deadline::after(RELOAD_SWITCH_TIMEOUT);
        for _ in 0..sent {
            if switched.recv_timeout(deadline.remaining()).is_err() {
                warn!("a worker has not switched to the reloaded configuration yet");
                break;
            }
        }
        for lc in &next.listeners {
            if let Some(tls) = &lc.tls {
                info!(listener = %lc.addr, certificate = %tls.origin, sha256 = %tls.fingerprint, "TLS certificates reloaded");
            }
        }
        for key in &removed {
            info!(listener = %key, "listener removed");
        }
        info!(config = %next.source, "configuration reloaded");
        self.config = next;
        Ok(())
    }

    /// SIGUSR2: starts the new binary with the listening sockets.
    pub(super) fn start_upgrade(&self) -> std::io::Result<binary_upgrade::Pending> {
        info!(binary = %self.exe.display(), "binary upgrade: starting the new process");
        let quic: Vec<_> = self
            .quic
            .iter()
            .flat_map(|q| q.sockets.iter().map(move |s| (q.key, s)))
            .collect();
        binary_upgrade::spawn_successor(
            &self.exe,
            &self.args,
            &self.sockets,
            &quic,
            self.admin.as_ref(),
        )
    }
}
