//! What `pier bench` reports beyond requests and latency, against real servers:
//! connect time and time to first byte per connection in the `http` report, and
//! the `sweep http` figure (a logarithmic concurrency axis, throughput beside p50
//! and p99 latency, one line per URL).

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::Command;
use std::time::Duration;

use common::bench_run::{bench, bench_json, BENCH_SERVER};
use common::Pier;
use serde_json::Value;

fn us(v: &Value, key: &str, p: &str) -> u64 {
    v[key][p]
        .as_u64()
        .unwrap_or_else(|| panic!("{key}.{p} missing in {v}"))
}

/// Each connection's first byte comes after its connect finished, both timed
/// from the start of the connect: every figure of one is at least the other's,
/// and none is longer than the run.
fn check_per_connection(v: &Value, connections: u64) {
    for key in ["connect_us", "first_byte_us"] {
        assert_eq!(v[key]["count"], connections, "{key} in {v}");
        for p in ["p50", "p90", "p99", "p99_9", "max"] {
            assert!(us(v, key, p) > 0, "{key}.{p} in {v}");
        }
    }
    for p in ["p50", "p90", "p99", "max"] {
        assert!(
            us(v, "first_byte_us", p) >= us(v, "connect_us", p),
            "{p}: first byte before connect in {v}"
        );
    }
    let run_us = (v["duration_s"].as_f64().unwrap() * 1e6) as u64 + 1_000;
    assert!(us(v, "first_byte_us", "max") <= run_us, "{v}");
}

#[test]
fn http_report_times_connects_and_first_bytes_per_connection() {
    let pier = Pier::with_config(BENCH_SERVER, &[]);
    let plain = format!("http://{}/", pier.http[0]);
    // Closed loop on plain TCP (the epoll engine): one connect per connection.
    let v = bench_json(&["http", &plain, "-n", "90", "-c", "3"]);
    assert_eq!(v["requests"], 90);
    check_per_connection(&v, 3);
    // A connection per request (the general engine): one connect per request.
    let v = bench_json(&["http", &plain, "-n", "20", "-c", "2", "--new-conn"]);
    assert_eq!(v["requests"], 20);
    check_per_connection(&v, 20);
    // TLS: the connect time covers the handshake, one per connection.
    let tls = format!("https://{}/", pier.https[0]);
    let v = bench_json(&["http", &tls, "-k", "-n", "40", "-c", "2"]);
    assert_eq!(v["requests"], 40);
    check_per_connection(&v, 2);
    assert_eq!(v["tls"]["handshakes"], 2);

    let out = bench(&["http", &plain, "-n", "10", "-c", "2"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let line = |name: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no {name} line in:\n{text}"))
            .to_string()
    };
    for name in ["connect", "1st byte"] {
        let l = line(name);
        assert!(
            l.contains("p50 ")
                && l.contains("p99 ")
                && l.contains("(mean ")
                && l.contains("2 connections"),
            "{l}"
        );
    }
    assert!(line("transfer").contains("/s read"), "{text}");
}

#[test]
fn time_to_first_byte_waits_for_the_server_and_connect_time_does_not() {
    // Accepts at once, answers each connection's first request 300 ms late.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let mut first = true;
                let mut seen = Vec::new();
                loop {
                    let n = match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    seen.extend_from_slice(&buf[..n]);
                    while let Some(i) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        seen.drain(..i + 4);
                        if first {
                            std::thread::sleep(Duration::from_millis(300));
                            first = false;
                        }
                        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
                        if s.write_all(ok).is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    let url = format!("http://{addr}/");
    let v = bench_json(&["http", &url, "-n", "20", "-c", "2"]);
    assert_eq!(v["requests"], 20);
    check_per_connection(&v, 2);
    assert!(us(&v, "first_byte_us", "p50") >= 300_000, "{v}");
    assert!(us(&v, "connect_us", "max") < 300_000, "{v}");
}

/// The `cx` of every `<circle>` in the SVG, in drawing order.
fn circle_xs(svg: &str) -> Vec<f64> {
    svg.lines()
        .filter(|l| l.starts_with("<circle"))
        .map(|l| {
            let rest = &l[l.find("cx=\"").expect("cx") + 4..];
            rest[..rest.find('"').unwrap()].parse().unwrap()
        })
        .collect()
}

#[test]
fn sweep_draws_latency_beside_throughput_on_a_log_axis_one_line_per_url() {
    let pier = Pier::with_config(BENCH_SERVER, &[]);
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("sweep");
    // Two paths on one server: two lines, labelled by URL.
    let out = Command::new(env!("CARGO_BIN_EXE_pier"))
        .args(["bench", "sweep", "http"])
        .arg(format!("http://{}/", pier.http[0]))
        .arg(format!("http://{}/teapot", pier.http[0]))
        .args(["-c", "1,4,16", "-n", "48", "-o"])
        .arg(&prefix)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = std::fs::read_to_string(dir.path().join("sweep.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 6, "{csv}");
    for r in &rows {
        let p50: u64 = r[col("p50_us")].parse().unwrap();
        let p99: u64 = r[col("p99_us")].parse().unwrap();
        assert!(p50 > 0 && p99 >= p50, "{r:?}");
        let connect: u64 = r[col("connect_p50_us")].parse().unwrap();
        let first: u64 = r[col("first_byte_p50_us")].parse().unwrap();
        assert!(connect > 0 && first >= connect, "{r:?}");
    }

    let svg = std::fs::read_to_string(dir.path().join("sweep.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    let host = pier.http[0].to_string();
    for text in [
        "Requests/s against connections".to_string(),
        "Latency (p50, p99) against connections".to_string(),
        "connections (log scale)".to_string(),
        "latency (ms)".to_string(),
        format!("{host} p50"),
        format!("{host} p99"),
        format!("{host}/teapot p50"),
        format!("{host}/teapot p99"),
    ] {
        assert!(svg.contains(&text), "{text} missing from the chart");
    }
    // Lines: 2 throughput + 4 latency, each with its legend mark.
    let wide = svg
        .lines()
        .filter(|l| l.starts_with("<polyline") && l.contains("stroke-width=\"2\""))
        .count();
    assert_eq!(wide, 2 * 6);
    // p99 points are triangles, one per run.
    assert_eq!(svg.matches("<polygon").count(), 6);
    // Circles: 6 throughput points (left panel), then 6 p50 points (right).
    let xs = circle_xs(&svg);
    assert_eq!(xs.len(), 12, "{xs:?}");
    let width: f64 = 960.0;
    assert!(xs[..6].iter().all(|&x| x < width) && xs[6..].iter().all(|&x| x >= width));
    // On a log axis 1, 4 and 16 are evenly spaced; on a linear one the second
    // gap would be four times the first.
    for line in xs.chunks(3) {
        let (a, b) = (line[1] - line[0], line[2] - line[1]);
        assert!(a > 50.0 && (a - b).abs() <= 2.0, "not a log axis: {line:?}");
    }
}
