//! Servers that follow DNS: a group's names (A and AAAA records, every address
//! a server) and `srv` records (each target resolved in turn), resolved again
//! as their TTLs say, bounded by the group's `min_ttl` and `max_ttl`.
//!
//! Resolution runs off the workers' event loops: once, blocking, while a
//! configuration is built (so a server starts with its servers and `pier
//! check` can warn), then on one background thread per configuration
//! generation with its own current-thread runtime and a hickory resolver
//! (`/etc/resolv.conf`, or `[resolver]`). An answer reaches the workers through
//! the group's [`ServerTable`](super::server_table::ServerTable): a version
//! number they compare on each pick, no lock on the request path.
//!
//! A lookup that fails or finds nothing keeps the last good set: a name that
//! stops resolving for a minute must not take a healthy fleet out of service.
//! Each entry logs a problem once when it starts (or changes) and once when it
//! ends, not on every attempt.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use hickory_resolver::config::{LookupIpStrategy, NameServerConfig, ResolverConfig};
use hickory_resolver::name_server::TokioConnectionProvider;
use hickory_resolver::proto::xfer::Protocol;
use hickory_resolver::{ResolveError, TokioResolver};
use tracing::{info, warn};

use super::group::UpstreamGroup;
use super::resolution::{DiscoveryEntry, DiscoveryKind, ResolutionResult, ResolverSettings};
use super::server_table::FoundServer;

/// Why a lookup gave no server.
#[derive(Debug)]
struct Unresolved {
    result: ResolutionResult,
    why: String,
}

impl Unresolved {
    fn of(e: &ResolveError, what: &str) -> Self {
        if e.is_no_records_found() {
            Unresolved {
                result: ResolutionResult::Empty,
                why: format!("{what} has no records"),
            }
        } else {
            Unresolved {
                result: ResolutionResult::Failed,
                why: format!("looking up {what} failed: {e}"),
            }
        }
    }
}

/// A resolver as `settings` say, for the current runtime.
fn build_resolver(settings: &ResolverSettings) -> Result<TokioResolver, String> {
    let provider = TokioConnectionProvider::default();
    let mut builder = if settings.nameservers.is_empty() {
        TokioResolver::builder(provider)
            .map_err(|e| format!("cannot read the system's resolver configuration: {e}"))?
    } else {
        let mut config = ResolverConfig::new();
        for &addr in &settings.nameservers {
            config.add_name_server(NameServerConfig::new(addr, Protocol::Udp));
            config.add_name_server(NameServerConfig::new(addr, Protocol::Tcp));
        }
        TokioResolver::builder_with_config(config, provider)
    };
    let opts = builder.options_mut();
    opts.timeout = settings.timeout;
    opts.attempts = settings.attempts as usize;
    opts.ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
    // Pier schedules each name by its own TTL bounds; a cache here would
    // only stretch `max_ttl` to the record's TTL.
    opts.cache_size = 0;
    Ok(builder.build())
}

/// The addresses of `host`, and how long they are good for.
async fn lookup_addresses(
    resolver: &TokioResolver,
    host: &str,
) -> Result<(Vec<IpAddr>, Instant), Unresolved> {
    let name = host.trim_end_matches('.');
    let found = resolver
        .lookup_ip(host)
        .await
        .map_err(|e| Unresolved::of(&e, name))?;
    let addrs: Vec<IpAddr> = found.iter().collect();
    if addrs.is_empty() {
        return Err(Unresolved {
            result: ResolutionResult::Empty,
            why: format!("{name} has no A or AAAA records"),
        });
    }
    Ok((addrs, found.valid_until()))
}

/// Looks `entry` up once: its servers, and until when the answer holds.
async fn resolve_entry(
    resolver: &TokioResolver,
    entry: &DiscoveryEntry,
) -> Result<(Vec<FoundServer>, Instant), Unresolved> {
    match &entry.kind {
        DiscoveryKind::Name { host, port } => {
            let (addrs, until) = lookup_addresses(resolver, host).await?;
            let found = addrs
                .into_iter()
                .map(|ip| FoundServer {
                    addr: SocketAddr::new(ip, *port),
                    authority: entry.written.clone(),
                    weight: entry.weight,
                    priority: 0,
                })
                .collect();
            Ok((found, until))
        }
        DiscoveryKind::Srv(name) => {
            let records = resolver
                .srv_lookup(name.as_str())
                .await
                .map_err(|e| Unresolved::of(&e, name))?;
            let mut until = records.as_lookup().valid_until();
            let mut found = Vec::new();
            for srv in records.iter() {
                let target = srv.target().to_utf8();
                let target = target.trim_end_matches('.');
                // "." as the target: the service is decidedly not available here.
                if target.is_empty() {
                    continue;
                }
                let (addrs, valid) = lookup_addresses(resolver, target).await?;
                until = until.min(valid);
                for ip in addrs {
                    found.push(FoundServer {
                        addr: SocketAddr::new(ip, srv.port()),
                        authority: format!("{target}:{}", srv.port()),
                        // RFC 2782's weight 0 ("very small chance") counts as
                        // 1; the balancer's weights stop at 1000.
                        weight: u32::from(srv.weight()).clamp(1, 1000),
                        priority: u32::from(srv.priority()),
                    });
                }
            }
            if found.is_empty() {
                return Err(Unresolved {
                    result: ResolutionResult::Empty,
                    why: format!("{name} has no SRV records with a target"),
                });
            }
            Ok((found, until))
        }
    }
}

/// Resolves entry `index` of `group` once and applies the answer; returns
/// how long until the next resolution and, when it failed, why.
async fn resolve_and_apply(
    resolver: &TokioResolver,
    group: &UpstreamGroup,
    index: usize,
) -> (Duration, Option<String>) {
    let entry = &group.discovery.entries[index];
    let (min, max) = (group.discovery.min_ttl, group.discovery.max_ttl);
    match resolve_entry(resolver, entry).await {
        Ok((found, until)) => {
            group.resolutions.record(index, ResolutionResult::Ok);
            let change = group.servers.replace_source(index, entry.origin(), &found);
            if !change.added.is_empty() || !change.removed.is_empty() {
                let list = |a: &[SocketAddr]| {
                    a.iter()
                        .map(|a| a.to_string())
                        .collect::<Vec<_>>()
                        .join(" ")
                };
                info!(group = %group.name, entry = %entry.written, added = %list(&change.added), removed = %list(&change.removed), "upstream servers changed");
            }
            let ttl = until.saturating_duration_since(Instant::now());
            (ttl.clamp(min, max), None)
        }
        Err(e) => {
            group.resolutions.record(index, e.result);
            (min, Some(e.why))
        }
    }
}

/// Resolves every entry of `upstreams` once, blocking (on a thread of its
/// own, so a caller inside a runtime may call it), and returns a warning for
/// each that gave no server: the configuration is valid, and the group
/// answers 503 until its names resolve.
pub fn resolve_at_start(
    upstreams: &[Arc<UpstreamGroup>],
    settings: &ResolverSettings,
) -> Vec<String> {
    if upstreams.iter().all(|g| g.discovery.entries.is_empty()) {
        return Vec::new();
    }
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => return vec![format!("cannot start resolving upstream names: {e}")],
                };
                rt.block_on(async {
                    let resolver = match build_resolver(settings) {
                        Ok(r) => r,
                        Err(e) => return vec![e],
                    };
                    let mut warnings = Vec::new();
                    for g in upstreams {
                        for i in 0..g.discovery.entries.len() {
                            if let (_, Some(why)) = resolve_and_apply(&resolver, g, i).await {
                                warnings.push(format!(
                                    "upstream {}: {why}; the group answers 503 until it resolves",
                                    g.name
                                ));
                            }
                        }
                    }
                    warnings
                })
            })
            .join()
            .unwrap_or_else(|_| vec!["resolving upstream names failed".into()])
    })
}

/// The resolutions of one configuration generation: dropping it (a reload
/// replaced the configuration) stops them.
#[derive(Debug, Default)]
pub struct DiscoveryTasks {
    _stop: Option<tokio::sync::watch::Sender<()>>,
}

/// Starts the resolver thread if any group has names or SRV records; each
/// entry is resolved again as its TTL says until the returned handle is
/// dropped or its group is gone.
pub fn spawn_discovery(
    upstreams: &[Arc<UpstreamGroup>],
    settings: &ResolverSettings,
) -> std::io::Result<DiscoveryTasks> {
    let entries: Vec<(Weak<UpstreamGroup>, usize)> = upstreams
        .iter()
        .flat_map(|g| (0..g.discovery.entries.len()).map(move |i| (Arc::downgrade(g), i)))
        .collect();
    if entries.is_empty() {
        return Ok(DiscoveryTasks::default());
    }
    let (stop, stopped) = tokio::sync::watch::channel(());
    let settings = settings.clone();
    crate::local_thread::spawn_local_thread(
        "pier-resolve",
        "upstream name resolution",
        move || async move {
            let resolver = match build_resolver(&settings) {
                Ok(r) => Arc::new(r),
                Err(e) => {
                    warn!(error = %e, "upstream names are not resolved again");
                    return;
                }
            };
            let tasks: Vec<_> = entries
                .into_iter()
                .map(|(g, i)| {
                    tokio::task::spawn_local(follow_entry(resolver.clone(), g, i, stopped.clone()))
                })
                .collect();
            drop(stopped);
            for t in tasks {
                let _ = t.await;
            }
        },
    )?;
    Ok(DiscoveryTasks { _stop: Some(stop) })
}

/// Resolves entry `index` of a group again and again, as long as the group
/// and the generation live.
async fn follow_entry(
    resolver: Arc<TokioResolver>,
    group: Weak<UpstreamGroup>,
    index: usize,
    mut stopped: tokio::sync::watch::Receiver<()>,
) {
    // The start resolved it already (and warned if it failed): the first
    // wait is what that answer said.
    let mut problem: Option<String> = None;
    let mut failures = 0u32;
    loop {
        let Some(g) = group.upgrade() else {
            return;
        };
        let (wait, failed) = resolve_and_apply(&resolver, &g, index).await;
        let written = &g.discovery.entries[index].written;
        let wait = match failed {
            None => {
                if problem.take().is_some() {
                    info!(group = %g.name, entry = %written, "upstream name resolves again");
                }
                failures = 0;
                wait
            }
            Some(why) => {
                if problem.as_deref() != Some(why.as_str()) {
                    let kept = g
                        .servers
                        .iter()
                        .filter(|s| s.source == Some(index) && s.listed())
                        .count();
                    warn!(group = %g.name, entry = %written, error = %why, kept, "upstream name does not resolve; keeping its last servers");
                    problem = Some(why);
                }
                // Retries back off from min_ttl, doubling, up to 30 s (or max_ttl).
                failures = failures.saturating_add(1);
                let cap = g.discovery.max_ttl.min(Duration::from_secs(30)).max(wait);
                wait.saturating_mul(1 << failures.min(8).saturating_sub(1))
                    .min(cap)
            }
        };
        drop(g);
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stopped.changed() => return,
        }
    }
}
