//! Running `pier bench` from a test, and the server it is pointed at: the
//! load generator's tests (tests/bench.rs, tests/bench_report.rs,
//! tests/bench_h2.rs, tests/bench_h3.rs) share them.

use std::process::{Command, Output};

use serde_json::Value;

/// A server for the load generator: a plain and a TLS listener, a 200 at `/`
/// and a 418 at `/teapot`.
pub const BENCH_SERVER: &str = r#"
[server]
workers = 1
[[listener]]
listen = "127.0.0.1:0"
[[listener]]
listen = "127.0.0.1:0"
tls = { self_signed = true }
[[route]]
path = "/"
handler = "respond"
status = 200
body = "Hello, World!"
[[route]]
path = "/teapot"
handler = "respond"
status = 418
body = "short and stout"
"#;

/// Runs `pier bench` with `args`.
pub fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pier"))
        .arg("bench")
        .args(args)
        .output()
        .expect("run pier bench")
}

/// Runs `pier bench` with `--json`, expects exit 0, returns the object.
pub fn bench_json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = bench(&all);
    assert!(
        out.status.success(),
        "pier bench {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

/// Failed requests of a `--json` report, every kind together.
pub fn errors_total(v: &Value) -> u64 {
    v["errors"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum()
}
