//! HTTP/3 over QUIC on TLS listeners, with real clients: aioquic (PyPI,
//! driven by tests/http3/h3_client.py) and ngtcp2's client (Debian's
//! `ngtcp2-client`, binary `gtlsclient`), both installed by .ci/run. The
//! same routes answer as over HTTP/1.1 and HTTP/2: a static file, a
//! `respond` route, HEAD, a 404, several requests on one connection, the
//! access log; HTTPS answers announce HTTP/3 with Alt-Svc; a drain sends
//! GOAWAY and closes once the requests in flight are answered.

mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::aioquic::{present as aioquic_present, run as aioquic};
use common::upstream::{Reply, Upstream};
use common::Pier;
use serde_json::Value;

/// A TLS listener with HTTP/3 (on by default), a file under /files/ and a
/// `respond` route; `extra` goes at the end.
fn config(extra: &str) -> String {
    format!(
        r#"
[server]
workers = 2
[[listener]]
listen = "127.0.0.1:0"
tls = {{ self_signed = true }}
[[route]]
path = "/hello"
handler = "respond"
status = 200
body = "hello over h3\n"
[[route]]
path = "/files/"
handler = "static"
root = "{{dir}}"
{extra}
"#
    )
}

/// Starts Pier on [`config`] with `files/a.txt` and `files/big.bin` (300 KB)
/// under its root.
fn start(extra: &str) -> (Pier, Vec<u8>) {
    let pier = Pier::with_config(&config(extra), &[]);
    let files = pier.root().join("files");
    std::fs::create_dir_all(&files).unwrap();
    std::fs::write(files.join("a.txt"), "a static file\n").unwrap();
    let big: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(files.join("big.bin"), &big).unwrap();
    (pier, big)
}

/// ngtcp2's HTTP/3 client, when installed.
fn ngtcp2_client() -> Option<&'static str> {
    let here = Command::new("gtlsclient")
        .arg("--help")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !here {
        assert!(
            std::env::var_os("CI").is_none(),
            "ngtcp2's gtlsclient is missing; .ci/run installs ngtcp2-client"
        );
        eprintln!("skipped: ngtcp2-client is not installed");
        return None;
    }
    Some("gtlsclient")
}

/// The aioquic client asking `path` and then holding its connection open
/// (`--wait-close`), started and not yet answered.
struct HeldClient {
    child: std::process::Child,
    out: BufReader<std::process::ChildStdout>,
}

impl HeldClient {
    fn start(addr: SocketAddr, path: &str, hold_secs: &str) -> HeldClient {
        let mut child = Command::new("timeout")
            .arg("30")
            .arg("python3")
            .arg(common::python_peer::script("http3/h3_client.py"))
            .args([addr.ip().to_string(), addr.port().to_string()])
            .args(["GET", path, "--wait-close", hold_secs])
            .stdout(Stdio::piped())
            .spawn()
            .expect("run python3");
        let out = BufReader::new(child.stdout.take().unwrap());
        HeldClient { child, out }
    }

    /// Waits for the answer (the client says `answered`).
    fn answered(&mut self) {
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "answered");
    }

    /// The client's report once the connection closed (or its wait ended).
    fn report(mut self) -> Value {
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        let v: Value = serde_json::from_str(&line).expect("the client's report");
        assert!(self.child.wait().unwrap().success(), "{v}");
        v
    }
}

#[test]
fn aioquic_gets_a_file_a_respond_route_a_head_and_a_404_on_one_connection() {
    if !aioquic_present() {
        return;
    }
    let (pier, _) = start("");
    let addr = pier.https[0];
    let v = aioquic(
        addr,
        &[
            "GET",
            "/hello",
            "GET",
            "/files/a.txt",
            "HEAD",
            "/files/a.txt",
            "GET",
            "/nope",
        ],
    );
    assert_eq!(v["alpn"], "h3", "{v}");
    let a = v["answers"].as_array().unwrap();
    assert_eq!(a.len(), 4, "{v}");
    // One connection: the client's request streams 0, 4, 8, 12.
    let streams: Vec<u64> = a.iter().map(|x| x["stream"].as_u64().unwrap()).collect();
    assert_eq!(streams, [0, 4, 8, 12], "{v}");
    assert_eq!(a[0]["status"], 200);
    assert_eq!(a[0]["body"], "hello over h3\n");
    assert_eq!(a[0]["headers"]["server"], "pier");
    assert_eq!(a[1]["status"], 200);
    assert_eq!(a[1]["body"], "a static file\n");
    assert_eq!(a[1]["headers"]["content-type"], "text/plain; charset=utf-8");
    assert_eq!(a[1]["headers"]["content-length"], "14");
    // HEAD: the GET's fields, no content.
    assert_eq!(a[2]["status"], 200);
    assert_eq!(a[2]["body"], "");
    assert_eq!(a[2]["headers"]["content-length"], "14");
    assert_eq!(a[2]["headers"]["etag"], a[1]["headers"]["etag"]);
    assert_eq!(a[3]["status"], 404);
    assert_eq!(a[3]["body"], "404 Not Found\n");
}

#[test]
fn aioquic_sends_many_requests_at_once_on_one_connection() {
    if !aioquic_present() {
        return;
    }
    let (pier, _) = start("");
    let mut args = vec!["--parallel"];
    for _ in 0..10 {
        args.extend(["GET", "/hello", "GET", "/files/a.txt"]);
    }
    let v = aioquic(pier.https[0], &args);
    let a = v["answers"].as_array().unwrap();
    assert_eq!(a.len(), 20, "{v}");
    for (i, answer) in a.iter().enumerate() {
        assert_eq!(answer["status"], 200, "{answer}");
        let want = if i % 2 == 0 {
            "hello over h3\n"
        } else {
            "a static file\n"
        };
        assert_eq!(answer["body"], want, "{answer}");
    }
    let mut streams: Vec<u64> = a.iter().map(|x| x["stream"].as_u64().unwrap()).collect();
    streams.sort_unstable();
    streams.dedup();
    assert_eq!(streams.len(), 20, "each request on its own stream: {v}");
}

#[test]
fn ngtcp2_client_downloads_a_file_and_a_respond_route() {
    let Some(client) = ngtcp2_client() else {
        return;
    };
    let (pier, big) = start("");
    let addr = pier.https[0];
    let dl = tempfile::tempdir().unwrap();
    let base = format!("https://localhost:{}", addr.port());
    let out = Command::new("timeout")
        .arg("30")
        .arg(client)
        .args(["-q", "--exit-on-all-streams-close"])
        .arg(format!("--download={}", dl.path().display()))
        .arg(addr.ip().to_string())
        .arg(addr.port().to_string())
        .arg(format!("{base}/files/big.bin"))
        .arg(format!("{base}/hello"))
        .output()
        .expect("run gtlsclient");
    assert!(
        out.status.success(),
        "gtlsclient failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read(dl.path().join("big.bin")).unwrap(), big);
    assert_eq!(
        std::fs::read_to_string(dl.path().join("hello")).unwrap(),
        "hello over h3\n"
    );
}

/// The response head curl shows for `url` with `flag` (`--http1.1`, `--http2`).
fn curl_head(flag: &str, url: &str) -> String {
    let out = Command::new("curl")
        .args(["-sk", "-o", "/dev/null", "-D", "-", flag, url])
        .output()
        .expect("run curl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn https_answers_announce_http3_with_alt_svc_unless_it_is_off() {
    let (pier, _) = start("");
    let port = pier.https[0].port();
    let want = format!("h3=\":{port}\"; ma=86400");
    let url = format!("https://localhost:{port}/hello");
    let h1 = curl_head("--http1.1", &url);
    assert!(h1.contains(&format!("Alt-Svc: {want}\r\n")), "{h1}");
    let h2 = curl_head("--http2", &url);
    assert!(h2.starts_with("HTTP/2 200"), "{h2}");
    assert!(h2.contains(&format!("alt-svc: {want}\r\n")), "{h2}");
    assert!(
        pier.startup
            .iter()
            .any(|l| l.contains("HTTP/3 over QUIC") && l.contains(&format!("udp=127.0.0.1:{port}"))),
        "the start log names the UDP address: {:?}",
        pier.startup
    );

    let off = Pier::with_config(
        &config("").replace(
            "tls = { self_signed = true }",
            "tls = { self_signed = true }\nhttp3 = false",
        ),
        &[],
    );
    let url = format!("https://localhost:{}/hello", off.https[0].port());
    let h1 = curl_head("--http1.1", &url);
    assert!(h1.starts_with("HTTP/1.1 200"), "{h1}");
    assert!(!h1.to_ascii_lowercase().contains("alt-svc"), "{h1}");
    assert!(
        !off.startup.iter().any(|l| l.contains("HTTP/3")),
        "{:?}",
        off.startup
    );
}

#[test]
fn http3_on_a_listener_without_tls_names_the_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h3.toml");
    std::fs::write(
        &path,
        "[[listener]]\nlisten = \"127.0.0.1:1\"\nhttp3 = true\n[[route]]\nhandler = \"respond\"\n",
    )
    .unwrap();
    let err = common::assert_config_error(&path, 2, "listener[1].http3");
    assert!(err.contains("needs TLS"), "{err}");
}

#[test]
fn pier_check_names_the_udp_address_of_http3() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h3.toml");
    std::fs::write(&path, config("").replace("{dir}", "/tmp")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_pier"))
        .args(["check", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("listener 127.0.0.1:0: HTTP/3 over QUIC on udp 127.0.0.1:0"),
        "{text}"
    );
}

#[test]
fn http3_requests_are_in_the_access_log_as_http_3_0() {
    if !aioquic_present() {
        return;
    }
    let (pier, _) = start(
        "[access_log]\npath = \"{dir}/access.log\"\nformat = \"combined\"\nflush_interval = \"50ms\"",
    );
    aioquic(pier.https[0], &["GET", "/hello", "GET", "/nope"]);
    let log = pier.root().join("access.log");
    let mut text = String::new();
    for _ in 0..100 {
        text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.lines().count() >= 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(text.contains("\"GET /hello HTTP/3.0\" 200 14"), "{text}");
    assert!(text.contains("\"GET /nope HTTP/3.0\" 404"), "{text}");
    assert!(text.contains("aioquic-test"), "{text}");
}

#[test]
fn sigterm_sends_goaway_and_closes_the_connection_once_answered() {
    if !aioquic_present() {
        return;
    }
    let (mut pier, _) = start("");
    let addr = pier.https[0];
    let mut client = HeldClient::start(addr, "/hello", "10");
    client.answered();
    pier.signal(rustix::process::Signal::TERM);
    let v = client.report();
    assert_eq!(v["answers"][0]["status"], 200, "{v}");
    // The server closed the connection with H3_NO_ERROR (0x100).
    assert_eq!(v["closed"], 0x100, "{v}");
    assert_eq!(pier.wait_exit(Duration::from_secs(10)), Some(0));
}

/// [`config`] with a `proxy` route under /up/ to `origin`.
fn proxied(origin: SocketAddr) -> String {
    format!(
        "[[upstream]]\nname = \"origin\"\nservers = [{{ address = \"{origin}\" }}]\n\
         [[route]]\npath = \"/up/\"\nhandler = \"proxy\"\nupstream = \"origin\""
    )
}

#[test]
fn a_request_body_streams_through_the_proxy_within_flow_control() {
    if !aioquic_present() {
        return;
    }
    let origin = Upstream::start(|req| {
        Reply::Http(
            200,
            Vec::new(),
            format!("{} {} bytes", req.method, req.body.len()).into_bytes(),
        )
    });
    let (pier, _) = start(&proxied(origin.addr));
    // Four times what a request may hold unread in Pier: it is read as the
    // proxy sends it on.
    let v = aioquic(
        pier.https[0],
        &[
            "--body-size",
            "262144",
            "--header",
            "content-length: 262144",
            "POST",
            "/up/echo",
        ],
    );
    let a = &v["answers"][0];
    assert_eq!(a["status"], 200, "{v}");
    assert_eq!(a["body"], "POST 262144 bytes", "{v}");
    // Without a content-length, the body ends with the stream: relayed
    // chunked.
    let v = aioquic(
        pier.https[0],
        &["--body-size", "100000", "POST", "/up/echo"],
    );
    assert_eq!(v["answers"][0]["body"], "POST 100000 bytes", "{v}");
    let seen = origin.requests();
    assert_eq!(seen.len(), 2);
    assert!(seen[0].body.iter().all(|&b| b == b'x'));
    assert_eq!(seen[0].header("content-length"), Some("262144"));
    assert!(seen[1].chunked, "{:?}", seen[1].head);
}

#[test]
fn a_drain_answers_the_request_in_flight_then_closes() {
    if !aioquic_present() {
        return;
    }
    let origin = Upstream::start(|_| {
        std::thread::sleep(Duration::from_millis(800));
        common::upstream::ok("slow answer")
    });
    let (mut pier, _) = start(&proxied(origin.addr));
    let addr = pier.https[0];
    let mut client = HeldClient::start(addr, "/up/slow", "10");
    for _ in 0..200 {
        if origin.request_count() > 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(origin.request_count(), 1, "the request reached the origin");
    pier.signal(rustix::process::Signal::TERM);
    client.answered();
    let v = client.report();
    assert_eq!(v["answers"][0]["status"], 200, "{v}");
    assert_eq!(v["answers"][0]["body"], "slow answer", "{v}");
    assert_eq!(v["closed"], 0x100, "{v}");
    assert_eq!(pier.wait_exit(Duration::from_secs(10)), Some(0));
}

#[test]
fn quic_connections_count_toward_max_connections() {
    if !aioquic_present() {
        return;
    }
    let pier = Pier::with_config(
        &config("").replace("workers = 2", "workers = 1\nmax_connections = 1"),
        &[],
    );
    let addr = pier.https[0];
    // One connection held open...
    let mut held = HeldClient::start(addr, "/hello", "5");
    held.answered();
    // ...and a second one is refused while it is.
    let second = common::aioquic::output(addr, 10, &["GET", "/hello"]);
    assert!(!second.status.success(), "a second connection was served");
    // Refused at once (CONNECTION_REFUSED), not left to time out.
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains("ConnectionError"), "{err}");
    let _ = held.child.kill();
    let _ = held.child.wait();
}

#[test]
fn a_reload_serves_new_quic_connections_the_new_configuration() {
    if !aioquic_present() {
        return;
    }
    let (pier, _) = start("");
    let addr = pier.https[0];
    assert_eq!(
        aioquic(addr, &["GET", "/hello"])["answers"][0]["body"],
        "hello over h3\n"
    );
    let path = pier.root().join("pier.toml");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("hello over h3", "reloaded");
    std::fs::write(&path, text).unwrap();
    pier.signal(rustix::process::Signal::HUP);
    pier.wait_log("configuration reloaded", Duration::from_secs(10))
        .expect("reload logged");
    let v = aioquic(addr, &["GET", "/hello"]);
    assert_eq!(v["answers"][0]["body"], "reloaded\n", "{v}");
}

/// The value of `series` (`name{labels}`) in a `/metrics` scrape.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map(|v| v.parse().unwrap())
}

#[test]
fn metrics_count_http3_requests_apart_with_quic_transport_figures() {
    if !aioquic_present() {
        return;
    }
    let (pier, _) = start("[admin]\nlisten = \"127.0.0.1:0\"");
    let admin = pier.admin.expect("admin listener");
    let v = aioquic(
        pier.https[0],
        &["GET", "/hello", "GET", "/files/a.txt", "GET", "/nope"],
    );
    assert_eq!(v["answers"][2]["status"], 404, "{v}");
    let url = format!("https://localhost:{}/hello", pier.https[0].port());
    assert!(curl_head("--http2", &url).starts_with("HTTP/2 200"));
    let want = [
        ("pier_http3_requests_total", 3.0),
        ("pier_http3_connections_total", 1.0),
        ("pier_quic_handshakes_total{result=\"completed\"}", 1.0),
        ("pier_quic_handshakes_total{result=\"failed\"}", 0.0),
        ("pier_http3_streams_open", 0.0),
        ("pier_quic_rtt_seconds_count", 3.0),
        ("pier_http2_requests_total", 1.0),
    ];
    let mut text = String::new();
    for _ in 0..100 {
        let r = common::get(admin, "GET /metrics HTTP/1.1\r\nHost: admin\r\n\r\n");
        text = String::from_utf8(r.body).unwrap();
        if want.iter().all(|(s, v)| sample(&text, s) == Some(*v)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for (s, v) in want {
        assert_eq!(sample(&text, s), Some(v), "{s} in\n{text}");
    }
    let figure = |s: &str| sample(&text, s).unwrap_or_else(|| panic!("{s} in\n{text}"));
    let sent = figure("pier_quic_datagrams_sent_total");
    let sends = figure("pier_quic_udp_sends_total");
    assert!(sent >= 4.0, "the handshake and three answers: {sent}");
    assert!((1.0..=sent).contains(&sends), "{sends} sends of {sent}");
    assert!(figure("pier_quic_datagrams_received_total") >= 4.0);
    figure("pier_quic_packets_lost_total");
    // Loopback: a smoothed RTT above zero and far below a second.
    let rtt = figure("pier_quic_rtt_seconds_sum") / 3.0;
    assert!(rtt > 0.0 && rtt < 0.5, "{rtt}");

    // The status page shows them beside HTTP/2's.
    let r = common::get(admin, "GET /status.json HTTP/1.1\r\nHost: admin\r\n\r\n");
    let status: Value = serde_json::from_slice(&r.body).expect("status.json");
    let p = &status["total"]["protocols"];
    assert_eq!(p["http3_requests"], 3, "{p}");
    assert_eq!(p["http2_requests"], 1, "{p}");
    assert_eq!(p["quic_connections"], 1, "{p}");
    let ms = p["quic_rtt_ms"].as_f64().unwrap();
    assert!((ms / 1e3 - rtt).abs() < 0.001, "{ms} ms against {rtt} s");
    let r = common::get(
        admin,
        "GET /status HTTP/1.1\r\nHost: admin\r\nAccept: text/html\r\n\r\n",
    );
    let page = String::from_utf8(r.body).unwrap();
    assert!(
        page.contains("<th>HTTP/3 requests</th><td data-v=\"total.protocols.http3_requests\""),
        "{page}"
    );
}

#[test]
fn a_listener_added_or_switched_to_http3_by_a_reload_serves_it_at_once() {
    if !aioquic_present() {
        return;
    }
    let off = config("").replace(
        "tls = { self_signed = true }",
        "tls = { self_signed = true }\nhttp3 = false",
    );
    let pier = Pier::with_config(&off, &[]);
    let files = pier.root().join("files");
    std::fs::create_dir_all(&files).unwrap();
    let first = pier.https[0];
    let url = format!("https://localhost:{}/hello", first.port());
    assert!(!curl_head("--http1.1", &url)
        .to_ascii_lowercase()
        .contains("alt-svc"));
    let added = std::net::SocketAddr::from(([127, 0, 0, 1], common::free_port()));
    // HTTP/3 on for the first listener, and a second TLS listener.
    let path = pier.root().join("pier.toml");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("http3 = false\n", "")
        .replacen(
            "[[route]]",
            &format!(
                "[[listener]]\nlisten = \"{added}\"\ntls = {{ self_signed = true }}\n[[route]]"
            ),
            1,
        );
    std::fs::write(&path, text).unwrap();
    pier.signal(rustix::process::Signal::HUP);
    pier.wait_log("configuration reloaded", Duration::from_secs(10))
        .expect("reload logged");
    for addr in [first, added] {
        let v = aioquic(addr, &["GET", "/hello"]);
        assert_eq!(v["alpn"], "h3", "{v}");
        assert_eq!(v["answers"][0]["body"], "hello over h3\n", "{addr}: {v}");
        let url = format!("https://localhost:{}/hello", addr.port());
        let want = format!("Alt-Svc: h3=\":{}\"; ma=86400\r\n", addr.port());
        let head = curl_head("--http1.1", &url);
        assert!(head.contains(&want), "{head}");
    }
    // Off again: the endpoint stays bound but refuses new connections.
    let text = std::fs::read_to_string(&path).unwrap().replacen(
        "tls = { self_signed = true }",
        "tls = { self_signed = true }\nhttp3 = false",
        1,
    );
    std::fs::write(&path, text).unwrap();
    pier.signal(rustix::process::Signal::HUP);
    pier.wait_log("configuration reloaded", Duration::from_secs(10))
        .expect("second reload logged");
    let refused = common::aioquic::output(first, 10, &["GET", "/hello"]);
    assert!(
        !refused.status.success(),
        "served after HTTP/3 was turned off"
    );
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("ConnectionError"),
        "refused, not timed out: {err}"
    );
    assert_eq!(
        aioquic(added, &["GET", "/hello"])["answers"][0]["status"],
        200
    );
}
