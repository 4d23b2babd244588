//! What HTTP/3 does around the QUIC handshake, with aioquic as the client
//! (PyPI, installed by .ci/run): 0-RTT early data, off by default and on
//! with a listener's `tls.early_data`, serves only requests that read
//! (others get 425 Too Early, RFC 8470) and tells the upstream with
//! `Early-Data: 1`; Retry makes clients prove their address once new
//! handshakes come faster than `[http3] retry_above`, and a Retry's token
//! is still taken after a reload; a handshake that stalls is closed at the
//! listener's `tls.handshake_timeout`.

mod common;

use std::time::Duration;

use common::aioquic::{early_data, present as aioquic_present, run as aioquic, stalled_handshakes};
use common::upstream::{Reply, Upstream};
use common::Pier;
use serde_json::Value;

/// Two workers, a TLS listener with `tls_extra` in its tls table, a
/// `respond` route at / and a proxy route under /up/ to `origin`; `extra`
/// at the end.
fn config(origin: std::net::SocketAddr, tls_extra: &str, extra: &str) -> String {
    format!(
        r#"
[server]
workers = 2
[admin]
listen = "127.0.0.1:0"
[[listener]]
listen = "127.0.0.1:0"
tls = {{ self_signed = true{tls_extra} }}
[[upstream]]
name = "origin"
servers = [{{ address = "{origin}" }}]
[[route]]
path = "/up/"
handler = "proxy"
upstream = "origin"
[[route]]
path = "/"
handler = "respond"
status = 200
body = "root\n"
{extra}
"#
    )
}

/// An origin answering each request with its method and path.
fn origin() -> Upstream {
    Upstream::start(|req| {
        Reply::Http(
            200,
            Vec::new(),
            format!("{} {}", req.method, req.target).into_bytes(),
        )
    })
}

/// The value of `series` in a `/metrics` scrape of `pier`, once it is
/// `want` (the workers publish their counters a moment after the request).
fn metric_reaches(pier: &Pier, series: &str, want: f64) -> f64 {
    let admin = pier.admin.expect("admin listener");
    let mut seen = f64::NAN;
    for _ in 0..100 {
        let r = common::get(admin, "GET /metrics HTTP/1.1\r\nHost: admin\r\n\r\n");
        let text = String::from_utf8(r.body).unwrap();
        seen = text
            .lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .map_or(f64::NAN, |v| v.parse().unwrap());
        if seen == want {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    seen
}

fn answer(v: &Value, i: usize) -> &Value {
    &v["answers"][i]
}

#[test]
fn early_data_serves_a_get_in_0rtt_and_answers_a_post_425() {
    if !aioquic_present() {
        return;
    }
    let origin = origin();
    let pier = Pier::with_config(&config(origin.addr, ", early_data = true", ""), &[]);
    let v = early_data(pier.https[0], &["GET", "/up/read", "POST", "/up/write"]);
    assert_eq!(v["ticket_allows_early_data"], true, "{v}");
    assert_eq!(v["sent_0rtt"], true, "{v}");
    assert_eq!(v["resumed"], true, "{v}");
    assert_eq!(v["early_data_accepted"], true, "{v}");
    assert_eq!(answer(&v, 0)["status"], 200, "{v}");
    assert_eq!(answer(&v, 0)["body"], "GET /up/read", "{v}");
    assert_eq!(answer(&v, 1)["status"], 425, "{v}");
    let seen = origin.requests();
    assert_eq!(seen.len(), 1, "the POST never reaches the origin: {seen:?}");
    assert_eq!(
        seen[0].header("early-data"),
        Some("1"),
        "{:?}",
        seen[0].head
    );
    assert_eq!(
        metric_reaches(&pier, "pier_quic_early_data_total", 1.0),
        1.0
    );
    assert_eq!(
        metric_reaches(&pier, "pier_http3_too_early_total", 1.0),
        1.0
    );
}

#[test]
fn without_early_data_0rtt_is_refused_and_the_request_served_after_the_handshake() {
    if !aioquic_present() {
        return;
    }
    let origin = origin();
    let pier = Pier::with_config(&config(origin.addr, "", ""), &[]);
    // The server's tickets do not offer early data.
    let v = early_data(pier.https[0], &["GET", "/up/read"]);
    assert_eq!(v["ticket_allows_early_data"], false, "{v}");
    assert_eq!(v["sent_0rtt"], false, "{v}");
    assert_eq!(answer(&v, 0)["status"], 200, "{v}");
    // A client that sends 0-RTT all the same has it refused; its request,
    // sent again after the handshake, is served as any other. So is a POST.
    let v = early_data(
        pier.https[0],
        &["--force-early", "GET", "/up/again", "POST", "/up/write"],
    );
    assert_eq!(v["sent_0rtt"], true, "{v}");
    assert_eq!(v["early_data_accepted"], false, "{v}");
    assert_eq!(answer(&v, 0)["body"], "GET /up/again", "{v}");
    assert_eq!(answer(&v, 1)["body"], "POST /up/write", "{v}");
    let seen = origin.requests();
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert!(
        seen.iter().all(|r| r.header("early-data").is_none()),
        "{seen:?}"
    );
    assert_eq!(
        metric_reaches(&pier, "pier_quic_early_data_total", 0.0),
        0.0
    );
}

#[test]
fn early_data_without_a_session_cache_names_the_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("early.toml");
    std::fs::write(
        &path,
        "[[listener]]\nlisten = \"127.0.0.1:1\"\n[listener.tls]\nself_signed = true\n\
         session_cache = 0\nearly_data = true\n[[route]]\nhandler = \"respond\"\n",
    )
    .unwrap();
    let err = common::assert_config_error(&path, 6, "listener[1].tls.early_data");
    assert!(err.contains("session cache"), "{err}");
}

#[test]
fn early_data_on_a_listener_without_http3_names_the_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("early.toml");
    std::fs::write(
        &path,
        "[[listener]]\nlisten = \"127.0.0.1:1\"\nhttp3 = false\n[listener.tls]\n\
         self_signed = true\nearly_data = true\n[[route]]\nhandler = \"respond\"\n",
    )
    .unwrap();
    let err = common::assert_config_error(&path, 6, "listener[1].tls.early_data");
    assert!(err.contains("HTTP/3"), "{err}");
}

#[test]
fn retry_above_0_sends_every_client_a_retry_which_aioquic_follows() {
    if !aioquic_present() {
        return;
    }
    let origin = origin();
    let pier = Pier::with_config(&config(origin.addr, "", "[http3]\nretry_above = 0"), &[]);
    let v = aioquic(pier.https[0], &["GET", "/", "GET", "/up/x"]);
    assert_eq!(v["answers"][0]["body"], "root\n", "{v}");
    assert_eq!(v["answers"][1]["body"], "GET /up/x", "{v}");
    assert_eq!(
        metric_reaches(&pier, "pier_quic_retry_sent_total", 1.0),
        1.0
    );
    assert_eq!(
        metric_reaches(
            &pier,
            "pier_quic_handshakes_total{result=\"completed\"}",
            1.0
        ),
        1.0
    );
}

#[test]
fn by_default_a_quiet_listener_sends_no_retry() {
    if !aioquic_present() {
        return;
    }
    let origin = origin();
    let pier = Pier::with_config(&config(origin.addr, "", ""), &[]);
    for _ in 0..3 {
        let v = aioquic(pier.https[0], &["GET", "/"]);
        assert_eq!(v["answers"][0]["status"], 200, "{v}");
    }
    assert_eq!(
        metric_reaches(
            &pier,
            "pier_quic_handshakes_total{result=\"completed\"}",
            3.0
        ),
        3.0
    );
    assert_eq!(
        metric_reaches(&pier, "pier_quic_retry_sent_total", 0.0),
        0.0
    );
}

#[test]
fn a_flood_of_handshakes_from_many_ports_turns_retry_on_and_clients_still_get_in() {
    if !aioquic_present() {
        return;
    }
    let origin = origin();
    let pier = Pier::with_config(&config(origin.addr, "", "[http3]\nretry_above = 10"), &[]);
    let v = stalled_handshakes(pier.https[0], 60, 1);
    let retried = v["retried"].as_u64().unwrap();
    // Over two workers, each lets its first ten through.
    assert!((30..=50).contains(&retried), "{v}");
    assert_eq!(v["answered"], 60, "{v}");
    // A real client in the flood's wake follows its Retry and is served.
    let v = aioquic(pier.https[0], &["GET", "/"]);
    assert_eq!(v["answers"][0]["status"], 200, "{v}");
    let sent = metric_reaches(&pier, "pier_quic_retry_sent_total", retried as f64 + 1.0);
    assert!(sent >= retried as f64, "{sent} against {retried}");
}

#[test]
fn a_stalled_handshake_is_closed_at_the_handshake_timeout() {
    if !aioquic_present() {
        return;
    }
    let origin = origin();
    let pier = Pier::with_config(
        &config(
            origin.addr,
            ", handshake_timeout = \"1s\"",
            "[http3]\nidle_timeout = \"60s\"",
        ),
        &[],
    );
    let started = std::time::Instant::now();
    let v = stalled_handshakes(pier.https[0], 3, 1);
    assert_eq!(v["answered"], 3, "{v}");
    let failed = "pier_quic_handshakes_total{result=\"failed\"}";
    let mut seen = 0.0;
    while started.elapsed() < Duration::from_secs(15) && seen < 3.0 {
        seen = metric_reaches(&pier, failed, 3.0);
    }
    assert_eq!(seen, 3.0);
    // Closed (and drained) long before the idle timeout.
    assert!(started.elapsed() < Duration::from_secs(15));
}

#[test]
fn a_retry_token_issued_before_a_reload_is_taken_after_it() {
    use std::io::{BufRead, BufReader, Read, Write};
    if !aioquic_present() {
        return;
    }
    let origin = origin();
    let text = config(origin.addr, "", "[http3]\nretry_above = 0");
    let pier = Pier::with_config(&text, &[]);
    // The client holds the Initial that carries the Retry's token...
    let mut child = common::aioquic::spawn("http3/h3_held_retry.py", pier.https[0], &["/"]);
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "held");
    // ...while the configuration is reloaded (every listener's QUIC
    // settings built again)...
    pier.signal(rustix::process::Signal::HUP);
    pier.wait_log("configuration reloaded", Duration::from_secs(10))
        .expect("reload logged");
    // ...then sends it: the new generation takes the token.
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();
    drop(stdin);
    line.clear();
    out.read_to_string(&mut line).unwrap();
    assert!(child.wait().unwrap().success(), "{line}");
    let v: Value = serde_json::from_str(line.trim()).unwrap_or_else(|e| panic!("{e}: {line}"));
    assert_eq!(v["status"], 200, "{v}");
    assert_eq!(
        metric_reaches(&pier, "pier_quic_retry_sent_total", 1.0),
        1.0
    );
}
