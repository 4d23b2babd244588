//! Process start and stop: load config, bind every worker's sockets, start N worker
//! threads (optionally pinned), reload the configuration on SIGHUP (or take one
//! posted to the admin API, see `config_post.rs`; what a reload changes is in
//! `reload.rs`), reopen the
//! access log on SIGUSR1, replace the binary on SIGUSR2, wait for SIGTERM/SIGINT,
//! then drain.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::{mpsc, watch};
use tracing::{error, info, warn};

use crate::binary_upgrade::{self, Inherited};
use crate::cli::{BinaryUpgradeArgs, CheckArgs, ProcessArgs, ServeArgs, TunnelArgs};
use crate::config::{self, Config, ConfigError, ListenerConfig};
use crate::deadline::Deadline;
use crate::io_text::without_os_error;
use crate::listener::{bind_listener, bound_to, open_listener, set_backlog};
use crate::listener_key::{ListenerKey, WorkerListeners};
use crate::observe::access_log::AccessLog;
use crate::observe::config_api::ConfigPost;
use crate::observe::status::StatusState;
use crate::observe::trace::export::TraceExporter;
use crate::observe::{admin, metrics::Registry};
use crate::sockopt;
use crate::worker::Generation;
use quic_sockets::{bind_quic, PerWorkerQuic, QuicListener};

mod config_post;
mod quic_sockets;
mod reload;

/// How long a binary upgrade waits for the new process to report ready before
/// it gives up on it and keeps serving.
const UPGRADE_READY_TIMEOUT: Duration = Duration::from_secs(30);

/// `pier check`: validate and report.
pub fn check(args: CheckArgs) -> anyhow::Result<()> {
    let mut cfg = config::build::load_file(&args.config)?;
    // What a server would run with but not as written: every one said, in
    // order, the last returned as the error that sets the exit code.
    if let Some(last) = cfg.findings.pop() {
        for f in &cfg.findings {
            eprintln!("pier: configuration error: {f}");
        }
        return Err(last.into());
    }
    for w in check_warnings(&cfg) {
        eprintln!("warning: {w}");
    }
    for lc in cfg.listeners.iter().filter(|l| l.http3) {
        println!("listener {}: HTTP/3 over QUIC on udp {}", lc.addr, lc.addr);
    }
    println!(
        "{}: ok ({} listener(s), {} route(s), {} worker(s))",
        args.config.display(),
        cfg.listeners.len(),
        cfg.routes.handlers().count(),
        cfg.workers
    );
    if args.routes {
        let listeners: Vec<crate::route::print::ListenerLine> = cfg
            .listeners
            .iter()
            .enumerate()
            .filter(|(_, l)| l.tcp.is_none())
            .map(|(index, l)| crate::route::print::ListenerLine {
                index,
                label: match &l.name {
                    Some(n) => format!("{n} ({})", l.addr),
                    None => l.addr.to_string(),
                },
                secure: l.tls.is_some(),
            })
            .collect();
        print!(
            "{}",
            crate::route::print::describe(&cfg.routes, &listeners, cfg.routes.labels())
        );
    }
    Ok(())
}

/// What `pier check` warns about without failing: values the kernel will
/// not grant, names that do not resolve yet.
fn check_warnings(cfg: &Config) -> Vec<String> {
    let mut out = Vec::new();
    for (lc, key) in cfg.listeners.iter().zip(ListenerKey::of(cfg)) {
        for w in sockopt::limit_warnings(&lc.socket) {
            out.push(format!("listener {key}: {w}"));
        }
    }
    for g in &cfg.upstreams {
        for w in sockopt::limit_warnings(&g.socket) {
            out.push(format!("upstream {}: {w}", g.name));
        }
    }
    out.extend(cfg.warnings.iter().cloned());
    out
}

/// `pier serve`: run until SIGTERM or SIGINT has drained.
pub fn run_server(args: ServeArgs) -> anyhow::Result<()> {
    let process = args.process.clone();
    run(Source::Serve(args), process)
}

/// `pier tunnel`: a TLS terminator (or plain TCP forwarder) built from flags.
pub fn run_tunnel(args: TunnelArgs) -> anyhow::Result<()> {
    let process = args.process.clone();
    run(Source::Tunnel(args), process)
}

/// `pier upgrade`: asks a running Pier to replace itself with the binary at its
/// path (SIGUSR2). The outcome is in that server's log; with `--pid-file` this
/// waits until the file names the new process (exit 0) or the server reports a
/// failed upgrade by rewriting it with its own PID (exit 1).
pub fn binary_upgrade(args: BinaryUpgradeArgs) -> anyhow::Result<()> {
    let read_pid = |path: &PathBuf| -> anyhow::Result<i32> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the PID file {}", path.display()))?;
        text.trim()
            .parse()
            .with_context(|| format!("{}: not a process ID: {:?}", path.display(), text.trim()))
    };
    let pid = match (&args.pid, &args.pid_file) {
        (Some(pid), _) => *pid as i32,
        (None, Some(path)) => read_pid(path)?,
        (None, None) => anyhow::bail!("give --pid or --pid-file"),
    };
    // The server rewrites the file when an upgrade fails, so a new modification
    // time with the old PID in it is the failure report.
    let modified = |path: &PathBuf| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    let before = args.pid_file.as_ref().and_then(modified);
    let target =
        rustix::process::Pid::from_raw(pid).with_context(|| format!("not a process ID: {pid}"))?;
    rustix::process::kill_process(target, rustix::process::Signal::USR2)
        .with_context(|| format!("cannot signal PID {pid}"))?;
    eprintln!("pier: sent SIGUSR2 to PID {pid}");
    let Some(path) = &args.pid_file else {
        return Ok(());
    };
    let mut deadline = Deadline::after(UPGRADE_READY_TIMEOUT + Duration::from_secs(5));
    while !deadline.passed() {
        std::thread::sleep(Duration::from_millis(50));
        match read_pid(path) {
            Ok(new) if new != pid => {
                eprintln!("pier: PID {new} serves now; PID {pid} drains and exits");
                return Ok(());
            }
            Ok(_) if modified(path) != before => {
                anyhow::bail!("the upgrade failed; PID {pid} still serves (see its log)")
            }
            _ => {}
        }
        if rustix::process::test_kill_process(target).is_err() {
            anyhow::bail!(
                "PID {pid} exited and {} names no new process",
                path.display()
            );
        }
    }
    anyhow::bail!(
        "{} still names PID {pid}: the upgrade failed (see that server's log)",
        path.display()
    )
}

/// What errors in a configuration built from `pier tunnel`'s flags call its origin.
const TUNNEL_ORIGIN: &str = "pier tunnel flags";

/// Where the running configuration came from, so SIGHUP can build it again the
/// same way: the file (or embedded default) with the same flags applied, or the
/// flags of `pier tunnel`.
enum Source {
    Serve(ServeArgs),
    Tunnel(TunnelArgs),
}

impl Source {
    fn load(&self) -> Result<Config, ConfigError> {
        match self {
            Source::Serve(args) => config::build::load(args.config.as_deref(), &args.overrides()),
            Source::Tunnel(args) => config::build::load_str(TUNNEL_ORIGIN, &args.config_text()),
        }
    }
}

fn scheme(lc: &ListenerConfig) -> &'static str {
    match (lc.tcp.is_some(), lc.tls.is_some()) {
        (false, false) => "http",
        (false, true) => "https",
        (true, false) => "tcp",
        (true, true) => "tls",
    }
}

/// Logs what a configuration runs with but `pier check` warns about.
fn log_config_warnings(config: &Config) {
    for w in &config.warnings {
        warn!("{w}");
    }
}

/// What the signal loop needs to reload and upgrade.
struct ServerProcess {
    source: Source,
    config: Arc<Config>,
    /// A copy of every worker's listening socket by configured address: what a
    /// binary upgrade hands over, and how a reload tells added listeners from kept ones.
    sockets: Vec<(ListenerKey, std::net::TcpListener)>,
    /// Listeners whose UDP sockets the workers run (also after HTTP/3 is
    /// turned off or the listener removed: its endpoint refuses new
    /// connections then, and serves again if it comes back).
    quic: Vec<QuicListener>,
    admin: Option<std::net::TcpListener>,
    /// What the status page shows; `None` without an admin listener.
    status: Option<Arc<StatusState>>,
    reloads: Vec<mpsc::UnboundedSender<Generation>>,
    access_log: Option<AccessLog>,
    /// Access logs a reload replaced; their writers stop at exit, after the
    /// connections that still write to them.
    retired_logs: Vec<AccessLog>,
    /// The trace exporter, when `[trace]` is on.
    trace: Option<TraceExporter>,
    /// Exporters a reload replaced; they send what they hold at exit.
    retired_traces: Vec<TraceExporter>,
    /// The running generation's health checks; a reload replaces (and so
    /// stops) them.
    health_checks: crate::upstream::health::HealthChecks,
    /// The running generation's re-resolution of upstream names; a reload
    /// replaces (and so stops) it.
    discovery: crate::upstream::discovery::DiscoveryTasks,
    pid_file: Option<PathBuf>,
    exe: PathBuf,
    args: Vec<OsString>,
    /// The counters `/metrics` shows; a reload gives it the new route labels.
    registry: Arc<Registry>,
}

/// How the signal loop ended.
enum Exit {
    /// SIGTERM or SIGINT.
    Stop,
    /// A new process took over the sockets.
    Upgraded(binary_upgrade::Succeeded),
}

/// Runs a configuration until SIGTERM or SIGINT (or a binary upgrade) has drained.
fn run(source: Source, process: ProcessArgs) -> anyhow::Result<()> {
    crate::logging::init(process.log_format);
    let pid_file = process.pid_file;
    let exe = binary_upgrade::startup_exe();
    let mut inherited =
        Inherited::from_env().context("cannot take the sockets of the replaced process")?;
    let config = Arc::new(source.load()?);
    let workers = config.workers;

    // Bind everything before starting threads, so a busy port fails the start.
    let mut per_worker: Vec<WorkerListeners> = (0..workers).map(|_| Vec::new()).collect();
    let mut per_worker_quic: PerWorkerQuic = (0..workers).map(|_| Vec::new()).collect();
    let mut quic = Vec::new();
    let predecessor = inherited.take_quic_relay();
    let mut sockets = Vec::new();
    let mut shown = Vec::new();
    let mut systemd =
        crate::systemd::inherited_listeners().context("cannot take the sockets systemd passed")?;
    for (lc, key) in config.listeners.iter().zip(ListenerKey::of(&config)) {
        let listeners = open_listener(lc, key, workers, &mut systemd, &mut inherited)?;
        let bound = listeners[0].local_addr()?;
        shown.push(format!("{}://{bound}", scheme(lc)));
        sockopt::log_listener(&bound, &lc.socket, &listeners[0]);
        if let Some(tls) = &lc.tls {
            info!(listener = %bound, certificate = %tls.origin, sha256 = %tls.fingerprint, "TLS certificate");
        }
        if lc.http3 {
            let handed = inherited.take_quic(key);
            let bound_udp = bind_quic(
                key,
                bound,
                lc.socket.ipv6_only,
                &mut per_worker_quic,
                handed,
                predecessor.clone(),
            )
            .with_context(|| format!("cannot listen on UDP {bound} for HTTP/3"))?;
            quic.push(bound_udp);
        }
        for (i, s) in listeners.into_iter().enumerate() {
            sockets.push((key, s.try_clone()?));
            per_worker[i % workers.max(1)].push((key, s));
        }
    }
    for (addr, _) in &systemd {
        warn!(%addr, "systemd passed a socket no listener uses; ignoring it");
    }
    for (key, _) in inherited.leftover() {
        warn!(listener = %key, "the replaced process passed a socket no listener uses; closing it");
    }
    let registry = Arc::new(Registry::new(workers, shown.clone()));
    registry
        .routes
        .store(Arc::new(config.routes.labels().to_vec()));
    let mut admin_socket = None;
    let mut status = None;
    let (posts, posted) = mpsc::unbounded_channel();
    let admin_shown = match config.admin {
        Some(addr) => {
            // The replaced process's admin socket, unless the address changed.
            let listener = match inherited.take_admin().filter(|l| bound_to(l, addr)) {
                Some(l) => l,
                None => std::net::TcpListener::bind(addr)
                    .with_context(|| format!("cannot listen on {addr} (admin)"))?,
            };
            let bound = listener.local_addr()?;
            admin_socket = Some(listener.try_clone()?);
            let state = Arc::new(StatusState::new(
                registry.clone(),
                config.clone(),
                shown.clone(),
            ));
            state
                .start_sampler()
                .context("cannot start the status sampler")?;
            admin::spawn_admin(listener, registry.clone(), state.clone(), posts)
                .context("cannot start the admin listener")?;
            status = Some(state);
            bound.to_string()
        }
        None => "off".to_string(),
    };
    raise_nofile_limit(config.max_connections);
    let health_checks = crate::upstream::health::spawn_health_checks(&config.upstreams)
        .context("cannot start health checks")?;
    log_config_warnings(&config);
    let discovery =
        crate::upstream::discovery::spawn_discovery(&config.upstreams, &config.resolver)
            .context("cannot start resolving upstream names")?;
    crate::cache::zone::start_disk_tiers(&config.caches);
    crate::tls::acme::spawn_renewals(config.listeners.iter().filter_map(|l| l.tls.as_ref()))
        .context("cannot start ACME certificate management")?;
    let access_log = match &config.access_log {
        Some(c) => Some(
            AccessLog::start(c.clone(), workers)
                .with_context(|| format!("cannot open the access log {}", c.target))?,
        ),
        None => None,
    };
    let trace = config
        .trace
        .clone()
        .map(|c| TraceExporter::start(c, registry.trace_export_failures.clone()))
        .transpose()
        .context("cannot start the trace exporter")?;

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
    let mut reloads = Vec::with_capacity(workers);
    for (id, (listeners, quic)) in per_worker.into_iter().zip(per_worker_quic).enumerate() {
        let first = Generation {
            config: config.clone(),
            access_log: access_log.as_ref().map(AccessLog::shared),
            trace: trace.as_ref().map(TraceExporter::shared),
            listeners,
            quic,
            applied: None,
        };
        let (reload_tx, reload_rx) = mpsc::unbounded_channel();
        reloads.push(reload_tx);
        let rx = rx.clone();
        let pin = config.pin_cpus.then_some(id % cores);
        let stats = registry.workers[id].clone();
        let h = std::thread::Builder::new()
            .name(format!("pier-worker-{id}"))
            .spawn(move || {
                if let Some(cpu) = pin {
                    pin_to_cpu(cpu);
                }
                if let Err(e) = crate::server::run::run_worker(id, first, reload_rx, rx, stats) {
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
    write_pid_file(pid_file.as_deref());
    if inherited.is_upgrade() {
        // The replaced process tells systemd the new main PID once it has
        // this report; READY=1 from here would come from a PID systemd does
        // not watch yet.
        if let Err(e) = inherited.report_ready() {
            warn!(error = %e, "cannot tell the replaced process that this one is ready");
        }
    } else {
        notify_systemd("READY=1");
    }

    let mut server = ServerProcess {
        source,
        config,
        sockets,
        quic,
        admin: admin_socket,
        status,
        reloads,
        access_log,
        retired_logs: Vec::new(),
        trace,
        retired_traces: Vec::new(),
        health_checks,
        discovery,
        pid_file,
        exe,
        args: std::env::args_os().skip(1).collect(),
        registry,
    };
    let exit = wait_for_signal(&signal_rt, signals, posted, &mut server)?;
    let stopped = matches!(exit, Exit::Stop);
    match exit {
        Exit::Stop => {
            info!(drain_timeout = ?server.config.drain_timeout, "shutting down: draining connections");
            notify_systemd("STOPPING=1");
        }
        Exit::Upgraded(done) => {
            info!(new_pid = done.pid, drain_timeout = ?server.config.drain_timeout, "binary upgrade: the new process serves; draining connections");
            // The new process reads the UDP sockets now: this one's QUIC
            // connections get their packets from what it relays.
            for q in &server.quic {
                q.group.hand_over();
            }
            let groups = server
                .quic
                .iter()
                .map(|q| (q.key, q.group.clone()))
                .collect();
            if let Err(e) = crate::quic::handover::serve_relayed(done.quic_relay, groups) {
                warn!(error = %e, "cannot take the QUIC packets the new process relays; open HTTP/3 connections may stall");
            }
        }
    }
    let _ = tx.send(true);
    // The workers close their sockets as they stop accepting; these copies go too.
    server.sockets.clear();
    server.admin = None;
    join_within(handles, &server.config);
    if let Some(log) = server.access_log.take() {
        log.finish();
    }
    for log in server.retired_logs.drain(..) {
        log.finish();
    }
    for exporter in server
        .trace
        .take()
        .into_iter()
        .chain(server.retired_traces.drain(..))
    {
        exporter.finish();
    }
    if stopped {
        remove_pid_file(server.pid_file.as_deref());
    }
    info!("stopped");
    Ok(())
}

/// Writes this process's PID to `path` whole: under another name first and
/// renamed over it, so a reader (`pier upgrade`, an init system) never finds
/// the file empty or half written. Where the directory takes no new file, the
/// file is written in place.
fn write_pid_file(path: Option<&std::path::Path>) {
    let Some(path) = path else { return };
    let text = format!("{}\n", std::process::id());
    if crate::config::file_replace::write_atomically(path, text.as_bytes()).is_ok() {
        return;
    }
    if let Err(e) = std::fs::write(path, text) {
        warn!(path = %path.display(), error = %e, "cannot write the PID file");
    }
}

/// Removes the PID file if it still names this process (after an upgrade it
/// names the new one).
fn remove_pid_file(path: Option<&std::path::Path>) {
    let Some(path) = path else { return };
    let ours =
        std::fs::read_to_string(path).is_ok_and(|t| t.trim() == std::process::id().to_string());
    if ours {
        let _ = std::fs::remove_file(path);
    }
}

/// Waits for the workers; past the drain deadline (plus a grace for the workers'
/// own timers) the process exits anyway, which closes every remaining socket.
fn join_within(handles: Vec<std::thread::JoinHandle<()>>, config: &Config) {
    let mut deadline = Deadline::after(config.drain_timeout + Duration::from_secs(1));
    for h in handles {
        if !deadline.join_thread(h) {
            warn!("drain deadline passed; force-closing");
            return;
        }
    }
}

/// The signals `serve` handles, registered inside the signal runtime.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    usr1: tokio::signal::unix::Signal,
    usr2: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> std::io::Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
            usr1: signal(SignalKind::user_defined1())?,
            usr2: signal(SignalKind::user_defined2())?,
        })
    }
}

/// Waits for SIGTERM or SIGINT, or a binary upgrade whose new process is ready;
/// SIGHUP meanwhile reloads the configuration and SIGUSR1 reopens the access
/// log (after logrotate moved it).
fn wait_for_signal(
    rt: &tokio::runtime::Runtime,
    signals: Signals,
    mut posted: mpsc::UnboundedReceiver<ConfigPost>,
    server: &mut ServerProcess,
) -> anyhow::Result<Exit> {
    let Signals {
        mut term,
        mut int,
        mut hup,
        mut usr1,
        mut usr2,
    } = signals;
    let exit = rt.block_on(async {
        // The new process of an upgrade under way, and the wait for its report.
        let mut upgrading: Option<(
            u32,
            tokio::task::JoinHandle<Result<binary_upgrade::Succeeded, String>>,
        )> = None;
        // Stopping while a new process starts: it must not stay behind serving.
        let abandon = |upgrading: &Option<(u32, _)>| {
            if let Some((pid, _)) = upgrading {
                warn!(new_pid = pid, "stopping the new process of the unfinished binary upgrade");
                if let Some(pid) = rustix::process::Pid::from_raw(*pid as i32) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
                }
            }
        };
        // Without an admin listener nothing posts; the branch is then off.
        let mut posting = server.status.is_some();
        loop {
            tokio::select! {
                post = posted.recv(), if posting => match post {
                    Some(post) => server.take_posted(post),
                    None => posting = false,
                },
                _ = term.recv() => {
                    info!(signal = "SIGTERM", "signal received");
                    abandon(&upgrading);
                    return Exit::Stop;
                }
                _ = int.recv() => {
                    info!(signal = "SIGINT", "signal received");
                    abandon(&upgrading);
                    return Exit::Stop;
                }
                _ = hup.recv() => {
                    info!(signal = "SIGHUP", "signal received: reloading the configuration");
                    server.reload();
                }
                _ = usr1.recv() => {
                    info!(signal = "SIGUSR1", "signal received: reopening the access log");
                    if let Some(log) = &server.access_log {
                        log.reopen();
                    }
                }
                _ = usr2.recv() => {
                    info!(signal = "SIGUSR2", "signal received: binary upgrade");
                    if upgrading.is_some() {
                        warn!("a binary upgrade is already waiting for its new process");
                        continue;
                    }
                    match server.start_upgrade() {
                        Ok(pending) => {
                            let pid = pending.child.id();
                            upgrading = Some((pid, tokio::task::spawn_blocking(move || {
                                pending.wait_ready(UPGRADE_READY_TIMEOUT)
                            })));
                        }
                        Err(e) => error!(error = %e, "binary upgrade failed: cannot start the new process; still serving"),
                    }
                }
                outcome = async { (&mut upgrading.as_mut().expect("guarded").1).await }, if upgrading.is_some() => {
                    upgrading = None;
                    match outcome {
                        Ok(Ok(done)) => {
                            notify_systemd(&format!("MAINPID={}", done.pid));
                            return Exit::Upgraded(done);
                        }
                        Ok(Err(why)) => {
                            // The file first: whoever acts on the log line
                            // finds the failure reported there too.
                            write_pid_file(server.pid_file.as_deref());
                            error!(cause = %why, "binary upgrade failed; still serving");
                        }
                        Err(e) => error!(error = %e, "binary upgrade failed; still serving"),
                    }
                }
            }
        }
    });
    Ok(exit)
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

#[cfg(test)]
mod tests {
    use super::write_pid_file;
    use std::io::Read;

    #[test]
    fn a_pid_file_is_replaced_whole_not_rewritten_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pier.pid");
        std::fs::write(&path, "1\n").unwrap();
        // A reader that opened the file before the rewrite still reads the
        // whole old text: the new one was written beside it and renamed
        // over it, never truncated under a reader.
        let mut reader = std::fs::File::open(&path).unwrap();
        write_pid_file(Some(&path));
        let mut old = String::new();
        reader.read_to_string(&mut old).unwrap();
        assert_eq!(old, "1\n");
        let now = std::fs::read_to_string(&path).unwrap();
        assert_eq!(now, format!("{}\n", std::process::id()));
        let names = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(names, 1, "no temporary file is left beside the PID file");
    }
}
