//! Upstreams that follow DNS, against a real DNS server (dnsmasq): a name's
//! records change under load without a failed request, SRV priorities and
//! weights steer the balancer, a DNS server that stops answering changes
//! nothing, and a name that does not resolve at start answers 503 until it
//! does. Origins listen on distinct loopback addresses (127.0.0.2, .3, .4) on
//! one port, so that A records alone tell them apart.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::dnsmasq::{Dnsmasq, TTL};
use common::load::Load;
use common::upstream::{ok, Upstream};
use common::{check_config, get, Pier};
use serde_json::Value;

/// Origins on 127.0.0.2, 127.0.0.3, ... all on one port, each answering
/// with its own address.
fn origins(n: u8) -> Vec<Upstream> {
    let first = Upstream::start_at("127.0.0.2:0".parse().unwrap(), |_| ok("127.0.0.2"));
    let port = first.addr.port();
    let mut all = vec![first];
    for i in 3..n + 2 {
        let addr: SocketAddr = format!("127.0.0.{i}:{port}").parse().unwrap();
        let body = addr.ip().to_string();
        all.push(Upstream::start_at(addr, move |_| ok(&body)));
    }
    all
}

/// A DNS server for the test, or `None` (and a message) without dnsmasq.
fn dns(dir: &std::path::Path, hosts: &str, srv: &str) -> Option<Dnsmasq> {
    let d = Dnsmasq::start(dir, hosts, srv);
    if d.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "dnsmasq is missing; .ci/run installs it"
        );
        eprintln!("skipped: dnsmasq is not installed (apt-get install dnsmasq)");
    }
    d
}

/// A configuration whose route `/` proxies to group `app`, described by `group`.
fn config(dns: &Dnsmasq, group: &str) -> String {
    format!(
        "[server]\nworkers = 2\n[admin]\nlisten = \"127.0.0.1:0\"\n\
         [resolver]\nnameservers = [\"{}\"]\ntimeout = \"300ms\"\nattempts = 1\n\
         [[listener]]\nlisten = \"127.0.0.1:0\"\n\
         [[upstream]]\nname = \"app\"\n{group}\n\
         [[route]]\npath = \"/\"\nhandler = \"proxy\"\nupstream = \"app\"\n",
        dns.addr
    )
}

fn wait_until(what: &str, within: Duration, mut f: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < within, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
    start.elapsed()
}

fn admin_get(admin: SocketAddr, path: &str) -> Vec<u8> {
    let r = get(
        admin,
        &format!("GET {path} HTTP/1.1\r\nHost: admin\r\n\r\n"),
    );
    assert_eq!(r.status, 200);
    r.body
}

/// Group `app`'s servers in `/status.json`, by address.
fn status_servers(admin: SocketAddr) -> Vec<Value> {
    let v: Value = serde_json::from_slice(&admin_get(admin, "/status.json")).unwrap();
    let g = v["upstreams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "app" && g["draining"] == false)
        .expect("group app")
        .clone();
    g["servers"].as_array().unwrap().clone()
}

fn server_state(servers: &[Value], addr: SocketAddr) -> (String, String) {
    let s = servers
        .iter()
        .find(|s| s["address"] == addr.to_string().as_str())
        .unwrap_or_else(|| panic!("no server {addr} in {servers:?}"));
    (
        s["origin"].as_str().unwrap().to_string(),
        s["state"].as_str().unwrap().to_string(),
    )
}

#[test]
fn a_name_follows_its_records_under_load_and_no_request_fails() {
    let dir = tempfile::tempdir().unwrap();
    let o = origins(2);
    let (a, b) = (&o[0], &o[1]);
    let port = a.addr.port();
    let Some(dns) = dns(dir.path(), "127.0.0.2 app.pier.test\n", "") else {
        return;
    };
    let pier = Pier::with_config(
        &config(
            &dns,
            &format!("servers = [\"app.pier.test:{port}\"]\nmin_ttl = \"1s\""),
        ),
        &[],
    );
    let admin = pier.admin.expect("admin listener");
    let load = Load::start(pier.addr(), 4);
    wait_until(
        "traffic on the first address",
        Duration::from_secs(5),
        || a.request_count() > 20,
    );
    assert_eq!(b.request_count(), 0);

    // A second address: it takes traffic within the TTL and a second.
    dns.set_hosts("127.0.0.2 app.pier.test\n127.0.0.3 app.pier.test\n");
    let took = wait_until(
        "traffic on the added address",
        Duration::from_secs(10),
        || b.request_count() > 0,
    );
    assert!(
        took <= TTL + Duration::from_secs(1),
        "the added server took {took:?}"
    );
    let servers = status_servers(admin);
    assert_eq!(server_state(&servers, b.addr), ("dns".into(), "up".into()));

    // The first address goes: once its requests in flight ended it gets no more.
    dns.set_hosts("127.0.0.3 app.pier.test\n");
    pier.wait_log("removed=127.0.0.2", Duration::from_secs(10))
        .expect("the removal is logged");
    std::thread::sleep(Duration::from_millis(300));
    let after = a.request_count();
    let b_before = b.request_count();
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(a.request_count(), after, "the removed server got requests");
    assert!(b.request_count() > b_before + 20, "the load went on");
    let servers = status_servers(admin);
    assert_eq!(
        server_state(&servers, a.addr),
        ("dns".into(), "removed".into())
    );

    // The DNS server stops answering: nothing changes, once logged.
    dns.pause();
    pier.wait_log("does not resolve", Duration::from_secs(10))
        .expect("the failure is logged");
    let b_before = b.request_count();
    std::thread::sleep(Duration::from_millis(2500));
    assert!(
        b.request_count() > b_before + 20,
        "the last servers are kept"
    );
    assert_eq!(a.request_count(), after);
    let repeated = pier
        .log_lines()
        .iter()
        .filter(|l| l.contains("does not resolve"))
        .count();
    assert_eq!(repeated, 0, "a failure that goes on is logged once");
    dns.resume();
    pier.wait_log("resolves again", Duration::from_secs(10))
        .expect("the recovery is logged");

    let (answered, failed) = load.finish();
    assert_eq!(
        failed,
        0,
        "{failed} of {} requests failed",
        answered + failed
    );
    assert!(answered > 100, "{answered}");

    let text = String::from_utf8(admin_get(admin, "/metrics")).unwrap();
    let ok = common::metric(
        &text,
        "pier_upstream_resolutions_total{group=\"app\",result=\"ok\"}",
    );
    assert!(ok.unwrap_or(0.0) >= 3.0, "{text}");
    let failed = common::metric(
        &text,
        "pier_upstream_resolutions_total{group=\"app\",result=\"failed\"}",
    );
    assert!(failed.unwrap_or(0.0) >= 1.0, "{text}");
    let age = common::metric(&text, "pier_upstream_resolution_age_seconds{group=\"app\"}");
    assert!(age.is_some_and(|a| a < 60.0), "{text}");
    // The first address keeps its series (and label) while out of the group.
    let name = format!("app.pier.test:{port}");
    assert_eq!(
        common::metric(
            &text,
            &format!("pier_upstream_server_in_group{{group=\"app\",server=\"{name}\"}}")
        ),
        Some(0.0),
        "{text}"
    );
}

#[test]
fn srv_records_give_servers_by_priority_and_weight() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = origins(3);
    let port = o[0].addr.port();
    let hosts = "127.0.0.2 a.pier.test\n127.0.0.3 b.pier.test\n127.0.0.4 c.pier.test\n";
    // a and b share priority 10 at weights 3 and 1; c is a backup (20).
    let srv = format!(
        "srv-host=_http._tcp.app.pier.test,a.pier.test,{port},10,3\n\
         srv-host=_http._tcp.app.pier.test,b.pier.test,{port},10,1\n\
         srv-host=_http._tcp.app.pier.test,c.pier.test,{port},20,1\n"
    );
    let Some(mut dns) = dns(dir.path(), hosts, &srv) else {
        return;
    };
    let group =
        "srv = \"_http._tcp.app.pier.test\"\nretries = 2\nmax_fails = 1\nfail_timeout = \"30s\"";
    let text = config(&dns, group).replace("workers = 2", "workers = 1");
    let pier = Pier::with_config(&text, &[]);
    let admin = pier.admin.expect("admin listener");
    for _ in 0..400 {
        assert_eq!(
            get(pier.addr(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n").status,
            200
        );
    }
    let counts: Vec<usize> = o.iter().map(Upstream::request_count).collect();
    assert_eq!(counts, [300, 100, 0], "weights 3:1, the backup idle");
    let servers = status_servers(admin);
    assert_eq!(
        server_state(&servers, o[2].addr),
        ("srv".into(), "up".into())
    );

    // New weights (dnsmasq reads SRV records at start: it restarts).
    dns.set_srv(&format!(
        "srv-host=_http._tcp.app.pier.test,a.pier.test,{port},10,1\n\
         srv-host=_http._tcp.app.pier.test,b.pier.test,{port},10,1\n\
         srv-host=_http._tcp.app.pier.test,c.pier.test,{port},20,1\n"
    ));
    wait_until("the new weights", Duration::from_secs(10), || {
        let s = status_servers(admin);
        s.iter().all(|s| s["weight"] == 1)
    });
    let before: Vec<usize> = o.iter().map(Upstream::request_count).collect();
    for _ in 0..200 {
        assert_eq!(
            get(pier.addr(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n").status,
            200
        );
    }
    let delta: Vec<usize> = o
        .iter()
        .zip(&before)
        .map(|(u, b)| u.request_count() - b)
        .collect();
    assert!(
        delta[0].abs_diff(100) <= 2 && delta[1].abs_diff(100) <= 2 && delta[2] == 0,
        "weights 1:1, the backup idle: {delta:?}"
    );

    // Every server of priority 10 down: the backup answers.
    o[0].stop();
    o[1].stop();
    for _ in 0..20 {
        let r = get(pier.addr(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(r.status, 200);
        assert_eq!(r.body, b"127.0.0.4");
    }
    assert!(o[2].request_count() >= 20);
}

#[test]
fn a_name_that_does_not_resolve_at_start_answers_503_until_it_does() {
    let dir = tempfile::tempdir().unwrap();
    let o = origins(1);
    let port = o[0].addr.port();
    let Some(dns) = dns(dir.path(), "", "") else {
        return;
    };
    let text = config(
        &dns,
        &format!("servers = [\"late.pier.test:{port}\"]\nmin_ttl = \"1s\""),
    );
    // `pier check` warns, and passes.
    let path = dir.path().join("check.toml");
    std::fs::write(&path, &text).unwrap();
    let (code, err) = check_config(&path);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("warning: upstream app: late.pier.test has no records"),
        "{err}"
    );

    let pier = Pier::with_config(&text, &[]);
    let r = get(pier.addr(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(r.status, 503);
    dns.set_hosts("127.0.0.2 late.pier.test\n");
    wait_until("the name to resolve", Duration::from_secs(10), || {
        get(pier.addr(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n").status == 200
    });
    assert!(o[0].request_count() > 0);
}
