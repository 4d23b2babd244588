//! Process start and stop: load config, bind every worker's sockets, start N worker
//! threads (optionally pinned), reload TLS certificates on SIGHUP, reopen the access
//! log on SIGUSR1, wait for SIGTERM/SIGINT, then drain.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::cli::{CheckArgs, ServeArgs, TunnelArgs};
use crate::config::{self, Config};
use crate::listener::bind_reuseport;
use crate::observe::access_log::AccessLog;
use crate::observe::{admin, metrics::Registry};
use crate::worker::{self, WorkerListeners};

/// `pier check`: validate and report.
pub fn check(args: CheckArgs) -> anyhow::Result<()> {
    let cfg = config::load_file(&args.config)?;
    println!(
        "{}: ok ({} listener(s), {} route(s), {} worker(s))",
        args.config.display(),
        cfg.listeners.len(),
        cfg.routes.handlers().count(),
        cfg.workers
    );
    Ok(())
}

/// `pier serve`: run until SIGTERM or SIGINT has drained.
pub fn serve(args: ServeArgs) -> anyhow::Result<()> {
    crate::logging::init(args.log_format);
    let config = Arc::new(config::load(&args)?);
    run(config)
}

/// `pier tunnel`: a TLS terminator (or plain TCP forwarder) built from flags.
pub fn tunnel(args: TunnelArgs) -> anyhow::Result<()> {
    crate::logging::init(args.log_format);
    let config = Arc::new(config::tunnel(&args)?);
    run(config)
}

/// Runs a validated configuration until SIGTERM or SIGINT has drained.
pub fn run(config: Arc<Config>) -> anyhow::Result<()> {
    let workers = config.workers;

    // Bind everything before starting threads, so a busy port fails the start.
    let mut per_worker: Vec<WorkerListeners> = (0..workers).map(|_| Vec::new()).collect();
    let mut shown = Vec::new();
    let mut inherited =
        crate::systemd::inherited_listeners().context("cannot take the sockets systemd passed")?;
    for (index, lc) in config.listeners.iter().enumerate() {
        let sockets = match inherited.iter().position(|(a, _)| *a == lc.addr) {
            Some(i) => {
                // One socket shared by every worker: it was bound without
                // SO_REUSEPORT, so the workers take turns accepting from it.
                let (_, s) = inherited.swap_remove(i);
                info!(listener = %lc.addr, "using the socket passed by systemd");
                (0..workers.max(1))
                    .map(|_| s.try_clone())
                    .collect::<std::io::Result<Vec<_>>>()
                    .with_context(|| format!("cannot share the socket for {}", lc.addr))?
            }
            None => bind_reuseport(lc.addr, lc.backlog, workers)
                .with_context(|| format!("cannot listen on {}", lc.addr))?,
        };
        let bound = sockets[0].local_addr()?;
        let scheme = match (lc.tcp.is_some(), lc.tls.is_some()) {
            (false, false) => "http",
            (false, true) => "https",
            (true, false) => "tcp",
            (true, true) => "tls",
        };
        shown.push(format!("{scheme}://{bound}"));
        if let Some(tls) = &lc.tls {
            info!(listener = %bound, certificate = %tls.origin, sha256 = %tls.fingerprint, "TLS certificate");
        }
        for (w, s) in sockets.into_iter().enumerate() {
            per_worker[w].push((index, s));
        }
    }
    for (addr, _) in &inherited {
        warn!(%addr, "systemd passed a socket no listener uses; ignoring it");
    }
    let registry = Arc::new(Registry::new(workers, shown.clone()));
    let admin_shown = match config.admin {
        Some(addr) => {
            let listener = std::net::TcpListener::bind(addr)
                .with_context(|| format!("cannot listen on {addr} (admin)"))?;
            let bound = listener.local_addr()?;
            admin::spawn(listener, registry.clone()).context("cannot start the admin listener")?;
            bound.to_string()
        }
        None => "off".to_string(),
    };
    raise_nofile_limit(config.max_connections);
    crate::handler::proxy::health::spawn(&config).context("cannot start health checks")?;
    let access_log = match &config.access_log {
        Some(c) => Some(
            AccessLog::start(c.clone(), workers)
                .with_context(|| format!("cannot open the access log {}", c.target))?,
        ),
        None => None,
    };

    // Handlers go in before the workers start: SIGUSR1 and SIGHUP would otherwise
    // kill a server that logrotate or a reload reached during its start.
    let signal_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let signals = {
        let _in_rt = signal_rt.enter();
        Signals::new()?
    };

    let (tx, rx) = watch::channel(false);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut handles = Vec::with_capacity(workers);
    for (id, listeners) in per_worker.into_iter().enumerate() {
        let cfg = config.clone();
        let rx = rx.clone();
        let pin = config.pin_cpus.then_some(id % cores);
        let stats = registry.workers[id].clone();
        let log = access_log.as_ref().map(AccessLog::shared);
        let h = std::thread::Builder::new()
            .name(format!("pier-worker-{id}"))
            .spawn(move || {
                if let Some(cpu) = pin {
                    pin_to_cpu(cpu);
                }
                if let Err(e) = worker::run(id, cfg, listeners, rx, stats, log) {
                    tracing::error!(worker = id, error = %e, "worker failed");
                }
            })
            .context("cannot start a worker thread")?;
        handles.push(h);
    }
    info!(
        listeners = %shown.join(" "),
        workers,
        admin = %admin_shown,
        config = %config.source,
        "pier started"
    );
    notify_systemd("READY=1");

    wait_for_signal(&signal_rt, signals, &config, access_log.as_ref())?;
    info!(drain_timeout = ?config.drain_timeout, "shutting down: draining connections");
    notify_systemd("STOPPING=1");
    let _ = tx.send(true);
    join_within(handles, &config);
    if let Some(log) = access_log {
        log.finish();
    }
    info!("stopped");
    Ok(())
}

/// Waits for the workers; past the drain deadline (plus a grace for the workers'
/// own timers) the process exits anyway, which closes every remaining socket.
fn join_within(handles: Vec<std::thread::JoinHandle<()>>, config: &Config) {
    let deadline = Instant::now() + config.drain_timeout + Duration::from_secs(1);
    for h in handles {
        while !h.is_finished() {
            if Instant::now() >= deadline {
                warn!("drain deadline passed; force-closing");
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = h.join();
    }
}

/// The signals `serve` handles, registered inside the signal runtime.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    usr1: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> std::io::Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
            usr1: signal(SignalKind::user_defined1())?,
        })
    }
}

/// Waits for SIGTERM or SIGINT; SIGHUP meanwhile reloads TLS certificates and
/// SIGUSR1 reopens the access log (after logrotate moved it).
fn wait_for_signal(
    rt: &tokio::runtime::Runtime,
    signals: Signals,
    config: &Config,
    access_log: Option<&AccessLog>,
) -> anyhow::Result<()> {
    let Signals {
        mut term,
        mut int,
        mut hup,
        mut usr1,
    } = signals;
    rt.block_on(async {
        loop {
            tokio::select! {
                _ = term.recv() => { info!(signal = "SIGTERM", "signal received"); break }
                _ = int.recv() => { info!(signal = "SIGINT", "signal received"); break }
                _ = hup.recv() => {
                    info!(signal = "SIGHUP", "signal received: reloading TLS certificates");
                    crate::tls::reload_all(config);
                }
                _ = usr1.recv() => {
                    info!(signal = "SIGUSR1", "signal received: reopening the access log");
                    if let Some(log) = access_log {
                        log.reopen();
                    }
                }
            }
        }
        Ok::<(), std::io::Error>(())
    })?;
    Ok(())
}

fn pin_to_cpu(cpu: usize) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    if let Err(e) = rustix::thread::sched_setaffinity(None, &set) {
        warn!(cpu, error = %e, "cannot pin worker to CPU");
    }
}

/// A failed notification is logged, not fatal: the service manager will time the
/// start out on its own, and outside systemd there is nothing to tell.
fn notify_systemd(state: &str) {
    if let Err(e) = crate::systemd::notify(state) {
        warn!(state, error = %e, "cannot notify systemd");
    }
}

/// Idle keep-alive connections are cheap in memory but each holds a descriptor.
/// A limit below `max_connections` would turn the intended backlog wait into
/// accept errors, so that is worth a warning at start.
fn raise_nofile_limit(max_connections: usize) {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let lim = getrlimit(Resource::Nofile);
    let mut current = lim.current;
    if lim.current < lim.maximum {
        let raised = rustix::process::Rlimit {
            current: lim.maximum,
            maximum: lim.maximum,
        };
        match setrlimit(Resource::Nofile, raised) {
            Ok(()) => current = lim.maximum,
            Err(e) => warn!(error = %e, "cannot raise the open-file limit"),
        }
    }
    if let Some(fds) = current {
        if max_connections > 0 && fds < max_connections as u64 {
            warn!(
                open_file_limit = fds,
                max_connections,
                "open-file limit is below max_connections; accepts will fail with EMFILE first"
            );
        }
    }
}
