//! The status page against a real `pier` with traffic, a TLS listener and a
//! proxy route with one server down: curl gets text, `/status.json` parses
//! with `python3 -m json.tool` and holds the figures, and headless Chromium
//! renders the HTML page (its script running under the page's CSP) with the
//! figures and the down server, and leaves a screenshot.

mod common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::chromium::{chromium, headless};
use common::tls::{connect_tls, recording_client, tls_get};
use common::upstream::{ok, Upstream};
use common::{get, which, Pier};

/// Requests sent to the fixed route over plain HTTP.
const PLAIN_REQUESTS: u64 = 25;
/// TLS connections made, one request each.
const TLS_REQUESTS: u64 = 3;
/// Proxied requests (all reach the server that is up).
const PROXIED: u64 = 4;

struct Running {
    pier: Pier,
    admin: SocketAddr,
    /// The address no server listens on.
    dead: SocketAddr,
    _upstream: Upstream,
}

/// A free loopback port nothing listens on.
fn json(admin: SocketAddr) -> serde_json::Value {
    let r = get(admin, "GET /status.json HTTP/1.1\r\nHost: admin\r\n\r\n");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    serde_json::from_slice(&r.body).expect("status.json is JSON")
}

/// Starts Pier, sends known traffic, and waits until the status shows all of
/// it, the dead server down, and a sampled interval.
fn running_with_traffic() -> Running {
    let upstream = Upstream::start(|_| ok("from upstream"));
    let dead = common::refused_addr();
    let config = format!(
        r#"
[server]
workers = 2
[admin]
listen = "127.0.0.1:0"
[[listener]]
listen = "127.0.0.1:0"
[[listener]]
listen = "127.0.0.1:0"
tls = {{ self_signed = true }}
[[route]]
path = "/app"
handler = "proxy"
upstream = "app"
[[route]]
path = "/"
handler = "respond"
body = "fixed"
[[upstream]]
name = "app"
servers = [{{ address = "{up}" }}, {{ address = "{dead}" }}]
health_check = {{ kind = "tcp", interval = "200ms", timeout = "200ms", rise = 1, fall = 1 }}
"#,
        up = upstream.addr
    );
    let pier = Pier::with_config(&config, &[]);
    let admin = pier.admin.expect("admin listener on");
    for _ in 0..PLAIN_REQUESTS {
        assert_eq!(
            get(pier.addr(), "GET / HTTP/1.1\r\nHost: t\r\n\r\n").status,
            200
        );
    }
    let (tls, _) = recording_client(true);
    for _ in 0..TLS_REQUESTS {
        let mut c = connect_tls(pier.https[0], "localhost", &tls).unwrap();
        assert_eq!(tls_get(&mut c, "/").unwrap().status, 200);
    }
    // Wait for the checker to take the dead server out, so every proxied
    // request reaches the live one.
    let deadline = Instant::now() + Duration::from_secs(10);
    while json(admin)["upstreams"][0]["servers"][1]["state"] != "down" {
        assert!(
            Instant::now() < deadline,
            "the dead server never shows down"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for _ in 0..PROXIED {
        let r = get(pier.addr(), "GET /app HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(r.status, 200);
    }
    let want = PLAIN_REQUESTS + TLS_REQUESTS + PROXIED;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v = json(admin);
        // A rate and a p99 over an interval that saw some of the traffic
        // prove the sampler runs; the total proves every worker's counters
        // are read.
        let sampled = v["history"]["requests_per_s"]
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x.as_f64().unwrap() > 0.0));
        let timed = v["history"]["p99_ms"]
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x.as_f64().is_some_and(|ms| ms > 0.0)));
        if v["total"]["requests"] == want && sampled && timed {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "status never showed the traffic: {v}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    Running {
        pier,
        admin,
        dead,
        _upstream: upstream,
    }
}

#[test]
fn status_json_holds_the_figures_and_parses_with_python() {
    let r = running_with_traffic();
    let v = json(r.admin);
    assert_eq!(
        v["total"]["requests"],
        PLAIN_REQUESTS + TLS_REQUESTS + PROXIED
    );
    assert_eq!(v["total"]["errors"], 0);
    assert_eq!(v["total"]["tls"]["full"], TLS_REQUESTS);
    assert_eq!(v["worker_count"], 2);
    assert_eq!(v["workers"].as_array().unwrap().len(), 2);
    let group = &v["upstreams"][0];
    assert_eq!(group["name"], "app");
    assert_eq!(group["servers"][0]["state"], "up");
    assert_eq!(group["servers"][1]["state"], "down");
    assert_eq!(group["servers"][1]["address"], r.dead.to_string());
    assert!(group["servers"][1]["last_check_error"].is_string());
    // Every proxied request reached the live server and was answered.
    assert_eq!(group["servers"][0]["requests"], PROXIED);
    assert_eq!(group["servers"][0]["responses"]["2xx"], PROXIED);
    assert_eq!(group["servers"][0]["in_flight"], 0);
    assert_eq!(group["servers"][1]["requests"], 0);
    assert_eq!(group["servers"][1]["down"], true);
    assert_eq!(v["certificates"][0]["names"][0], "localhost");

    let Some(python) = which("python3") else {
        assert!(std::env::var_os("CI").is_none(), ".ci/run installs python3");
        eprintln!("python3 not installed; .ci/run installs it");
        return;
    };
    let body = get(r.admin, "GET /status.json HTTP/1.1\r\nHost: a\r\n\r\n").body;
    let mut child = Command::new(python)
        .args(["-m", "json.tool"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(&body).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "json.tool refused it: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"state\": \"down\""));
}

#[test]
fn curl_gets_text_and_a_browser_accept_gets_the_html_page() {
    let r = running_with_traffic();
    let Some(curl) = which("curl") else {
        assert!(std::env::var_os("CI").is_none(), ".ci/run installs curl");
        eprintln!("curl not installed; .ci/run installs it");
        return;
    };
    let url = format!("http://{}/status", r.admin);
    let text = Command::new(&curl)
        .args(["-sS", "-i", &url])
        .output()
        .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("content-type: text/plain"), "{text}");
    assert!(text.contains("\r\n\r\npier "), "{text}");
    assert!(text.contains("listeners  http://127.0.0.1:"), "{text}");

    let html = Command::new(&curl)
        .args(["-sS", "-i", "-H", "Accept: text/html,*/*;q=0.8", &url])
        .output()
        .unwrap();
    let html = String::from_utf8(html.stdout).unwrap();
    assert!(
        html.contains("content-type: text/html; charset=utf-8"),
        "{html}"
    );
    assert!(html.contains("content-security-policy: default-src 'none'; script-src 'sha256-"));
    // The figures are in the server's table, for browsers without JavaScript.
    let total = PLAIN_REQUESTS + TLS_REQUESTS + PROXIED;
    assert!(html.contains(&format!(
        "data-v=\"total.requests\" data-f=\"count\">{total}<"
    )));
    assert!(html.contains(&format!("<td>{}</td>", r.dead)));
    assert!(html.contains(
        "<td class=\"state down\" data-v=\"upstreams.0.servers.1.state\" data-f=\"state\">down</td>"
    ));
    assert!(html.contains("<noscript><meta http-equiv=\"refresh\" content=\"10\"></noscript>"));
}

#[test]
fn headless_chromium_renders_the_live_page_with_the_figures_and_the_down_server() {
    let Some(chromium) = chromium() else {
        return;
    };
    let r = running_with_traffic();
    let url = format!("http://{}/status", r.admin);
    let profile = r.pier.dir.path().join("chromium");
    let dom = headless(&chromium, &profile, &["--dump-dom"], &url);
    // The script ran (the page's CSP let its hash through) and polled.
    assert!(
        dom.contains("<span id=\"live\">Live: updated every second"),
        "{dom}"
    );
    let total = PLAIN_REQUESTS + TLS_REQUESTS + PROXIED;
    assert!(
        dom.contains(&format!(
            "data-v=\"total.requests\" data-f=\"count\">{total}<"
        )),
        "{dom}"
    );
    assert!(dom.contains(&format!(
        "data-v=\"total.tls.full\" data-f=\"count\">{TLS_REQUESTS}<"
    )));
    assert!(dom.contains(&format!("<td>{}</td>", r.dead)));
    assert!(dom.contains(
        "<td class=\"state down\" data-v=\"upstreams.0.servers.1.state\" data-f=\"state\">down</td>"
    ));
    assert!(dom.contains(
        "<td class=\"state up\" data-v=\"upstreams.0.servers.0.state\" data-f=\"state\">up</td>"
    ));
    // The down server's row is red; the live one shows its requests.
    assert!(dom.contains("<tr data-bad=\"upstreams.0.servers.1.down\" class=\"bad\">"));
    assert!(dom.contains(&format!(
        "data-v=\"upstreams.0.servers.0.requests\" data-f=\"count\">{PROXIED}<"
    )));
    assert!(dom.contains("data-v=\"upstreams.0.servers.1.failures\" data-f=\"causes\">-<"));
    // The script drew the failed checks of the dead server and the charts.
    assert!(dom.contains("<i class=\"no\"></i>"));
    assert!(dom.contains(" checks passed\""));
    assert!(dom.contains("localhost, 127.0.0.1, ::1"));

    // The screenshot is taken under light traffic, so the rates and charts
    // a person looks at move.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = {
        let (stop, addr) = (stop.clone(), r.pier.addr());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                get(addr, "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
                get(addr, "GET /app HTTP/1.1\r\nHost: t\r\n\r\n");
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    std::thread::sleep(Duration::from_secs(3));
    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("status-page.png");
    let _ = std::fs::remove_file(&shot);
    headless(
        &chromium,
        &profile,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1280,1500",
        ],
        &url,
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    load.join().unwrap();
    let png = std::fs::read(&shot).expect("a screenshot");
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
    eprintln!("screenshot of the status page: {}", shot.display());
}

/// Polls `/status.json` until `done` holds (five seconds at most).
fn json_until(admin: SocketAddr, done: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let v = json(admin);
        if done(&v) {
            return v;
        }
        assert!(Instant::now() < deadline, "status never got there: {v}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn reloads_show_as_a_new_generation_or_a_failure_with_its_reason() {
    let config = |body: &str| {
        format!(
            "[admin]\nlisten = \"127.0.0.1:0\"\n[[listener]]\nlisten = \"127.0.0.1:0\"\n\
             [[route]]\nhandler = \"respond\"\nbody = \"{body}\"\n"
        )
    };
    let pier = Pier::with_config(&config("one"), &[]);
    let admin = pier.admin.expect("admin listener on");
    let path = pier.dir.path().join("pier.toml");
    let v = json(admin);
    assert_eq!(v["generation"], 1);
    assert!(v["last_reload"].is_null());

    std::fs::write(&path, config("two")).unwrap();
    pier.signal(rustix::process::Signal::HUP);
    let v = json_until(admin, |v| v["generation"] == 2);
    assert_eq!(v["last_reload"]["ok"], true);
    assert_eq!(v["listeners"][0], format!("http://{}", pier.addr()));

    std::fs::write(&path, config("three").replace("handler", "handlr")).unwrap();
    pier.signal(rustix::process::Signal::HUP);
    let v = json_until(admin, |v| v["last_reload"]["ok"] == false);
    assert_eq!(v["generation"], 2, "a failed reload changes nothing");
    let why = v["last_reload"]["message"].as_str().unwrap();
    assert!(why.contains("pier.toml") && why.contains("handlr"), "{why}");
}
