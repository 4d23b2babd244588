//! What one `/status.json` (and one HTML page) costs the admin thread with 64
//! workers' worth of data: 64 workers with counters and a full minute of
//! history, three minutes of process history, 8 upstream groups of 8 servers
//! with 64 health-check results and every worker's counters each (requests,
//! responses, errors, latency), and two TLS listeners. The budget is
//! 1 ms per JSON answer; the figures are printed, and the exit status is 1
//! over budget.
//!
//! `cargo bench --bench status_json` (`-- --iterations N` to change the count).

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pier::observe::metrics::{HandlerKind, Registry};
use pier::observe::status::history::{Sampler, PROCESS_POINTS};
use pier::observe::status::{html, json, StatusState};
use pier::observe::upstream_counters::UpstreamFailure;

const WORKERS: usize = 64;
const GROUPS: usize = 8;
const SERVERS: usize = 8;
const BUDGET: Duration = Duration::from_millis(1);

fn config_text() -> String {
    let mut t = format!(
        "[server]\nworkers = {WORKERS}\n[[listener]]\nlisten = \"127.0.0.1:0\"\n\
         [[listener]]\nlisten = \"127.0.0.1:0\"\ntls = {{ self_signed = true }}\n\
         [[listener]]\nlisten = \"127.0.0.2:0\"\ntls = {{ self_signed = true }}\n"
    );
    for g in 0..GROUPS {
        let _ = write!(
            t,
            "[[route]]\npath = \"/g{g}\"\nhandler = \"proxy\"\nupstream = \"group-{g}\"\n"
        );
    }
    for g in 0..GROUPS {
        let servers: Vec<String> = (0..SERVERS)
            .map(|s| format!("{{ address = \"127.0.{g}.{}:8080\" }}", s + 1))
            .collect();
        let _ = write!(
            t,
            "[[upstream]]\nname = \"group-{g}\"\nservers = [{}]\n\
             health_check = {{ kind = \"http\", path = \"/health\" }}\n",
            servers.join(", ")
        );
    }
    t
}

/// A state as a busy process would have it after three minutes.
fn busy_state() -> StatusState {
    let config =
        Arc::new(pier::config::build::load_str("bench.toml", &config_text()).expect("config"));
    for (g, group) in config.upstreams.iter().enumerate() {
        for (s, server) in group.servers.iter().enumerate() {
            for i in 0..64 {
                let fail = (i + g + s) % 13 == 0;
                server.checks.record(if fail {
                    Err("connection refused")
                } else {
                    Ok(())
                });
            }
        }
    }
    // Every worker's per-server counters, as after three minutes of traffic
    // spread over every server of every group.
    let blocks: Vec<Vec<_>> = config
        .upstreams
        .iter()
        .map(|g| {
            (0..WORKERS)
                .map(|_| g.counters.register(g.servers.len()))
                .collect()
        })
        .collect();
    let registry = Arc::new(Registry::new(WORKERS, Vec::new()));
    let listeners = vec![
        "http://127.0.0.1:8080".to_string(),
        "https://127.0.0.1:8443".to_string(),
        "https://127.0.0.2:8443".to_string(),
    ];
    let state = StatusState::new(registry.clone(), config, listeners);
    let mut sampler = Sampler::default();
    let t0 = Instant::now();
    for tick in 0..=PROCESS_POINTS as u64 {
        for (i, w) in registry.workers.iter().enumerate() {
            for _ in 0..(1 + (i as u64 + tick) % 7) {
                w.request(HandlerKind::Proxy, 200);
            }
            w.request(HandlerKind::Static, if tick % 11 == 0 { 503 } else { 304 });
            w.accepted.add(3);
            w.open.set(100 + i as u64);
            w.tls_full.add(1);
            w.tls_resumed.add(2);
            w.bytes_in.add(12_345);
            w.bytes_out.add(1_234_567);
        }
        for (g, group) in blocks.iter().enumerate() {
            for (i, block) in group.iter().enumerate() {
                for (s, c) in block.iter() {
                    c.started();
                    if (i + g + s + tick as usize) % 17 == 0 {
                        c.failed(UpstreamFailure::Reset);
                    } else {
                        let status = if tick % 13 == 0 { 502 } else { 200 };
                        c.answered(status, Duration::from_micros(300 + 97 * s as u64));
                    }
                    c.finished();
                }
                if tick == PROCESS_POINTS as u64 {
                    // A few requests in flight at the end.
                    block[i % SERVERS].started();
                }
            }
        }
        state.sample(&mut sampler, t0 + Duration::from_secs(tick));
    }
    state
}

/// Runs `f` `n` times; returns the sorted durations.
fn time(n: usize, mut f: impl FnMut() -> usize) -> (Vec<Duration>, usize) {
    let mut out = Vec::with_capacity(n);
    let mut bytes = 0;
    for _ in 0..n {
        let start = Instant::now();
        bytes = std::hint::black_box(f());
        out.push(start.elapsed());
    }
    out.sort();
    (out, bytes)
}

fn report(name: &str, (d, bytes): &(Vec<Duration>, usize)) -> Duration {
    let pick = |q: f64| d[((d.len() - 1) as f64 * q) as usize];
    println!(
        "{name:<22} {:>9.1} µs p50 {:>9.1} µs p99 {:>9.1} µs max   {} bytes",
        pick(0.5).as_secs_f64() * 1e6,
        pick(0.99).as_secs_f64() * 1e6,
        d[d.len() - 1].as_secs_f64() * 1e6,
        bytes
    );
    pick(0.5)
}

fn main() {
    let mut iterations = 2000;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--iterations" {
            iterations = args
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or(iterations);
        }
    }
    let state = busy_state();
    println!(
        "status page with {WORKERS} workers, {GROUPS}x{SERVERS} upstream servers, {iterations} iterations"
    );
    report(
        "snapshot",
        &time(iterations, || state.snapshot().workers.len()),
    );
    let json = report(
        "snapshot + JSON",
        &time(iterations, || json::render_json(&state.snapshot()).len()),
    );
    report(
        "snapshot + HTML",
        &time(iterations / 4, || {
            html::render_html(&state.snapshot()).len()
        }),
    );
    report(
        "/metrics",
        &time(iterations / 4, || {
            let mut text = state.registry.render_prometheus();
            state.render_upstream_metrics(&mut text);
            text.len()
        }),
    );
    if json > BUDGET {
        println!("over budget: /status.json p50 {json:?} > {BUDGET:?}");
        std::process::exit(1);
    }
    println!("within budget: /status.json p50 {json:?} <= {BUDGET:?}");
}
