//! Per-upstream-server counters end to end: a real `pier` with two workers in
//! front of servers that answer, refuse connections, reset them, answer
//! garbage and hang; the counters are read from the admin listener's
//! `/metrics` and `/status.json`.

mod common;

use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use common::upstream::{ok, Reply, Upstream};
use common::{get, refused_addr, Pier};
use serde_json::Value;

/// A server that reads each request head and resets the connection (RST,
/// not FIN) instead of answering. Runs until the test process ends.
fn resetting_upstream() -> SocketAddr {
    common::upstream::resetting_origin(|_| {})
}

/// Two workers (so the counters are summed over both), one group per kind
/// of server, no retries and no passive marking down, so each request is
/// exactly one attempt on its server.
fn config(
    good: SocketAddr,
    dead: SocketAddr,
    reset: SocketAddr,
    bad: SocketAddr,
    slow: SocketAddr,
) -> String {
    let mut text = String::from(
        "[server]\nworkers = 2\n[admin]\nlisten = \"127.0.0.1:0\"\n[[listener]]\nlisten = \"127.0.0.1:0\"\n",
    );
    for (name, addr) in [
        ("good", good),
        ("dead", dead),
        ("reset", reset),
        ("bad", bad),
        ("slow", slow),
    ] {
        text += &format!(
            "[[upstream]]\nname = \"{name}\"\nservers = [{{ address = \"{addr}\" }}]\n\
             retries = 0\nmax_fails = 0\nresponse_timeout = \"1500ms\"\n\
             [[route]]\npath = \"/{name}\"\nhandler = \"proxy\"\nupstream = \"{name}\"\n"
        );
    }
    text
}

fn req(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: app.test\r\n\r\n")
}

fn metrics(admin: SocketAddr) -> String {
    let r = get(admin, "GET /metrics HTTP/1.1\r\nHost: admin\r\n\r\n");
    assert_eq!(r.status, 200);
    String::from_utf8(r.body).unwrap()
}

fn status(admin: SocketAddr) -> Value {
    let r = get(admin, "GET /status.json HTTP/1.1\r\nHost: admin\r\n\r\n");
    assert_eq!(r.status, 200);
    serde_json::from_slice(&r.body).expect("status.json is JSON")
}

/// The one server of group `name` in `/status.json`.
fn server<'a>(v: &'a Value, name: &str) -> &'a Value {
    let g = v["upstreams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == name && g["draining"] == false)
        .unwrap_or_else(|| panic!("no group {name} in {v}"));
    &g["servers"][0]
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn per_server_counters_count_answers_failures_by_cause_and_requests_in_flight() {
    let good = Upstream::start(|r| match r.target.as_str() {
        "/good/fail" => Reply::Http(503, Vec::new(), b"busy".to_vec()),
        _ => ok("fine"),
    });
    let bad = Upstream::start(|_| Reply::RawClose(b"HTTP/1.1 200 OK\nbare: lf\n\n".to_vec()));
    let slow = Upstream::start(|_| Reply::Silent);
    let (dead, reset) = (refused_addr(), resetting_upstream());
    let pier = Pier::with_config(&config(good.addr, dead, reset, bad.addr, slow.addr), &[]);
    let (addr, admin) = (pier.addr(), pier.admin.expect("admin listener"));

    for _ in 0..5 {
        assert_eq!(get(addr, &req("/good")).status, 200);
    }
    assert_eq!(get(addr, &req("/good/fail")).status, 503);
    assert_eq!(get(addr, &req("/dead")).status, 502);
    assert_eq!(get(addr, &req("/dead")).status, 502);
    assert_eq!(get(addr, &req("/reset")).status, 502);
    assert_eq!(get(addr, &req("/bad")).status, 502);

    // A request the server never answers is in flight until its timeout.
    let hung = std::thread::spawn(move || get(addr, &req("/slow")).status);
    let in_flight = "pier_upstream_server_in_flight{group=\"slow\",server=\"";
    let slow_in_flight = format!("{in_flight}{}\"}}", slow.addr);
    wait_until("the hung request to show in flight", || {
        common::metric(&metrics(admin), &slow_in_flight) == Some(1.0)
    });
    let v = status(admin);
    assert_eq!(server(&v, "slow")["in_flight"], 1);
    assert_eq!(server(&v, "slow")["requests"], 1);
    assert_eq!(server(&v, "good")["in_flight"], 0);
    assert_eq!(hung.join().unwrap(), 504);

    let text = metrics(admin);
    let m = |series: String| {
        common::metric(&text, &series).unwrap_or_else(|| panic!("no {series} in\n{text}"))
    };
    let labels = |group: &str, addr: SocketAddr| format!("group=\"{group}\",server=\"{addr}\"");
    let g = labels("good", good.addr);
    assert_eq!(
        m(format!("pier_upstream_server_requests_total{{{g}}}")),
        6.0
    );
    assert_eq!(
        m(format!(
            "pier_upstream_server_responses_total{{{g},class=\"2xx\"}}"
        )),
        5.0
    );
    assert_eq!(
        m(format!(
            "pier_upstream_server_responses_total{{{g},class=\"5xx\"}}"
        )),
        1.0
    );
    assert_eq!(
        m(format!("pier_upstream_server_latency_seconds_count{{{g}}}")),
        6.0
    );
    assert_eq!(
        m(format!(
            "pier_upstream_server_latency_seconds_bucket{{{g},le=\"+Inf\"}}"
        )),
        6.0
    );
    assert_eq!(
        m(format!(
            "pier_upstream_server_errors_total{{{g},cause=\"reset\"}}"
        )),
        0.0
    );
    assert_eq!(m(format!("pier_upstream_server_up{{{g}}}")), 1.0);
    assert_eq!(m(format!("pier_upstream_server_in_flight{{{g}}}")), 0.0);
    for (group, addr, cause, n) in [
        ("dead", dead, "connect", 2.0),
        ("reset", reset, "reset", 1.0),
        ("bad", bad.addr, "bad_response", 1.0),
        ("slow", slow.addr, "timeout", 1.0),
    ] {
        let l = labels(group, addr);
        assert_eq!(
            m(format!("pier_upstream_server_requests_total{{{l}}}")),
            n,
            "{group}"
        );
        assert_eq!(
            m(format!(
                "pier_upstream_server_errors_total{{{l},cause=\"{cause}\"}}"
            )),
            n,
            "{group}"
        );
        let other_causes: f64 = [
            "connect",
            "connect_timeout",
            "reset",
            "timeout",
            "bad_response",
        ]
        .iter()
        .filter(|&&c| c != cause)
        .map(|c| {
            m(format!(
                "pier_upstream_server_errors_total{{{l},cause=\"{c}\"}}"
            ))
        })
        .sum();
        assert_eq!(other_causes, 0.0, "{group}: only {cause} counted");
        assert_eq!(
            m(format!("pier_upstream_server_latency_seconds_count{{{l}}}")),
            0.0
        );
        assert_eq!(m(format!("pier_upstream_server_in_flight{{{l}}}")), 0.0);
    }

    let v = status(admin);
    let s = server(&v, "good");
    assert_eq!(s["requests"], 6);
    assert_eq!(s["responses"]["2xx"], 5);
    assert_eq!(s["responses"]["5xx"], 1);
    assert_eq!(s["errors"], 0);
    assert_eq!(s["state"], "up");
    assert_eq!(server(&v, "dead")["failures"]["connect"], 2);
    assert_eq!(server(&v, "dead")["errors"], 2);
    assert_eq!(server(&v, "reset")["failures"]["reset"], 1);
    assert_eq!(server(&v, "bad")["failures"]["bad_response"], 1);
    assert_eq!(server(&v, "slow")["failures"]["timeout"], 1);
    assert_eq!(server(&v, "slow")["in_flight"], 0);

    // Rates and percentiles are those of the last sampled second: with
    // traffic going on, they show it.
    wait_until("a second with answers from the good server", || {
        assert_eq!(get(addr, &req("/good")).status, 200);
        let v = status(admin);
        let s = server(&v, "good");
        s["requests_per_s"].as_f64().unwrap() > 0.0 && s["latency_p99_ms"].as_f64().is_some()
    });
}

#[test]
fn a_reload_starts_the_servers_counters_again() {
    let good = Upstream::start(|_| ok("fine"));
    let (dead, reset) = (refused_addr(), resetting_upstream());
    let text = config(good.addr, dead, reset, refused_addr(), refused_addr());
    let pier = Pier::with_config(&text, &[]);
    let (addr, admin) = (pier.addr(), pier.admin.expect("admin listener"));
    for _ in 0..3 {
        assert_eq!(get(addr, &req("/good")).status, 200);
    }
    let series = format!(
        "pier_upstream_server_requests_total{{group=\"good\",server=\"{}\"}}",
        good.addr
    );
    assert_eq!(common::metric(&metrics(admin), &series), Some(3.0));

    pier.signal(rustix::process::Signal::HUP);
    pier.wait_log("configuration reloaded", Duration::from_secs(10))
        .expect("reloaded");
    // The admin side learns of the new configuration just after the log line.
    wait_until("the status page to show the reload", || {
        status(admin)["generation"] == 2
    });
    // The running generation's group starts at zero and counts from there.
    assert_eq!(common::metric(&metrics(admin), &series), Some(0.0));
    assert_eq!(get(addr, &req("/good")).status, 200);
    assert_eq!(common::metric(&metrics(admin), &series), Some(1.0));
    let v = status(admin);
    assert_eq!(v["generation"], 2);
    assert_eq!(server(&v, "good")["requests"], 1);
}

#[test]
fn a_server_every_worker_keeps_out_after_failures_shows_down() {
    let good = Upstream::start(|_| ok("fine"));
    let dead = refused_addr();
    let text = format!(
        "[server]\nworkers = 1\n[admin]\nlisten = \"127.0.0.1:0\"\n[[listener]]\nlisten = \"127.0.0.1:0\"\n\
         [[upstream]]\nname = \"pair\"\nservers = [{{ address = \"{dead}\" }}, {{ address = \"{}\" }}]\n\
         retries = 1\nmax_fails = 1\nfail_timeout = \"60s\"\n\
         [[route]]\npath = \"/\"\nhandler = \"proxy\"\nupstream = \"pair\"\n",
        good.addr
    );
    let pier = Pier::with_config(&text, &[]);
    let (addr, admin) = (pier.addr(), pier.admin.expect("admin listener"));
    // Round robin tries the dead server once; the refused attempt goes on
    // to the good one, and the dead one is kept out for a minute.
    for _ in 0..4 {
        assert_eq!(get(addr, &req("/")).status, 200);
    }
    let text = metrics(admin);
    let m = |series: String| {
        common::metric(&text, &series).unwrap_or_else(|| panic!("no {series} in\n{text}"))
    };
    let d = format!("group=\"pair\",server=\"{dead}\"");
    let g = format!("group=\"pair\",server=\"{}\"", good.addr);
    assert_eq!(
        m(format!("pier_upstream_server_marked_down_workers{{{d}}}")),
        1.0
    );
    assert_eq!(m(format!("pier_upstream_server_up{{{d}}}")), 0.0);
    assert_eq!(
        m(format!("pier_upstream_server_requests_total{{{d}}}")),
        1.0
    );
    assert_eq!(
        m(format!(
            "pier_upstream_server_errors_total{{{d},cause=\"connect\"}}"
        )),
        1.0
    );
    assert_eq!(
        m(format!("pier_upstream_server_marked_down_workers{{{g}}}")),
        0.0
    );
    assert_eq!(m(format!("pier_upstream_server_up{{{g}}}")), 1.0);
    assert_eq!(
        m(format!("pier_upstream_server_requests_total{{{g}}}")),
        4.0
    );
    let v = status(admin);
    let servers = &v["upstreams"][0]["servers"];
    assert_eq!(servers[0]["state"], "down");
    assert_eq!(servers[0]["down"], true);
    assert_eq!(servers[0]["marked_down_workers"], 1);
    assert_eq!(servers[1]["state"], "up");
}

/// A server that echoes what it reads until the client half-closes.
fn echo_upstream() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let mut reader = conn.try_clone().unwrap();
                let _ = std::io::copy(&mut reader, &mut conn);
            });
        }
    });
    addr
}

#[test]
fn tcp_streams_count_on_their_server_while_open_and_refused_connects_as_errors() {
    use std::io::Write;
    let (echo, dead) = (echo_upstream(), refused_addr());
    let text = format!(
        "[server]\nworkers = 2\n[admin]\nlisten = \"127.0.0.1:0\"\n\
         [[listener]]\nlisten = \"127.0.0.1:0\"\nkind = \"tcp\"\nupstream = \"echo\"\n\
         [[listener]]\nlisten = \"127.0.0.1:0\"\nkind = \"tcp\"\nupstream = \"dead\"\n\
         [[upstream]]\nname = \"echo\"\nservers = [{{ address = \"{echo}\" }}]\n\
         [[upstream]]\nname = \"dead\"\nservers = [{{ address = \"{dead}\" }}]\nretries = 0\n"
    );
    let pier = Pier::with_config(&text, &[]);
    let admin = pier.admin.expect("admin listener");
    let e = format!("group=\"echo\",server=\"{echo}\"");
    let in_flight = format!("pier_upstream_server_in_flight{{{e}}}");

    let mut stream = std::net::TcpStream::connect(pier.streams[0]).unwrap();
    stream.write_all(b"ping").unwrap();
    let mut back = [0u8; 4];
    stream.read_exact(&mut back).unwrap();
    assert_eq!(&back, b"ping");
    let text = metrics(admin);
    assert_eq!(common::metric(&text, &in_flight), Some(1.0), "{text}");
    assert_eq!(
        common::metric(
            &text,
            &format!("pier_upstream_server_requests_total{{{e}}}")
        ),
        Some(1.0)
    );
    drop(stream);
    wait_until("the stream to end", || {
        common::metric(&metrics(admin), &in_flight) == Some(0.0)
    });

    // A stream to a server that refuses is closed, and counted as a connect error.
    let mut refused = std::net::TcpStream::connect(pier.streams[1]).unwrap();
    let _ = refused.read(&mut [0u8; 1]);
    let d = format!("group=\"dead\",server=\"{dead}\"");
    let errors = format!("pier_upstream_server_errors_total{{{d},cause=\"connect\"}}");
    wait_until("the refused connect to count", || {
        common::metric(&metrics(admin), &errors) == Some(1.0)
    });
    assert_eq!(server(&status(admin), "dead")["failures"]["connect"], 1);
}

#[test]
fn one_name_per_upstream_server_in_logs_metrics_and_status_and_no_os_error_numbers() {
    let dead = refused_addr();
    let name = format!("localhost:{}", dead.port());
    let text = format!(
        "[server]\nworkers = 1\n[admin]\nlisten = \"127.0.0.1:0\"\n[[listener]]\nlisten = \"127.0.0.1:0\"\n\
         [[upstream]]\nname = \"named\"\nservers = [\"{name}\"]\nretries = 0\n\
         health_check = {{ kind = \"tcp\", interval = \"100ms\", fall = 1 }}\n\
         [[route]]\npath = \"/\"\nhandler = \"proxy\"\nupstream = \"named\"\n"
    );
    let pier = Pier::with_config(&text, &[]);
    let (addr, admin) = (pier.addr(), pier.admin.expect("admin listener"));
    let down = pier
        .wait_log("health check: server is down", Duration::from_secs(10))
        .expect("the health check logs the server down");
    assert!(down.contains(&format!("upstream={name}")), "{down}");
    assert!(!down.contains("os error"), "{down}");
    // `localhost` may stand for more than one address, each checked on its
    // own: the group answers 503 once every one of them is down.
    wait_until("every address of the server down", || {
        get(addr, &req("/")).status == 503
    });
    let series = format!("pier_upstream_server_up{{group=\"named\",server=\"{name}\"}}");
    wait_until("the server shown down", || {
        common::metric(&metrics(admin), &series) == Some(0.0)
    });
    let v = status(admin);
    let s = server(&v, "named");
    assert_eq!(s["name"], name.as_str());
    let error = s["last_check_error"].as_str().expect("a check error");
    assert!(!error.contains("os error"), "{error}");
    for line in pier.log_lines() {
        assert!(!line.contains("os error"), "{line}");
        assert!(
            !line.contains(&format!("upstream={dead}")),
            "the server is named as configured: {line}"
        );
    }
}
