//! OpenTelemetry traces against a collector written here (tests/common/otlp.rs
//! decodes the OTLP protobuf Pier sends): spans, their attributes and
//! parents, retries, sampling, trust of incoming context, and the access log.

mod common;
#[path = "common/h2_origin.rs"]
mod h2_origin;

use std::net::SocketAddr;

use common::otlp::{
    attr, hex, server_and_client, traced_proxy_config, traced_request as request,
    upstream_traceparent as upstream_parent, with_dead_route, Collector,
};
use common::upstream::{ok, Upstream};
use common::{get, Pier};
use pier::observe::trace::otlp::decoded::Span;

const SERVER: i32 = 2;
const CLIENT: i32 = 3;
const STATUS_ERROR: i32 = 2;

fn config(collector: &Collector, servers: &[SocketAddr], trace_extra: &str) -> String {
    let endpoint = format!("http://{}/v1/traces", collector.addr);
    traced_proxy_config(&endpoint, servers, trace_extra)
}

/// An upstream that answers 200 and keeps what it saw.
fn echo() -> Upstream {
    Upstream::start(|_| ok("up"))
}

fn of_trace<'a>(spans: &'a [Span], trace: &str) -> Vec<&'a Span> {
    spans.iter().filter(|s| hex(&s.trace_id) == trace).collect()
}

#[test]
fn a_proxied_request_gives_a_server_span_and_a_client_span_parent_of_the_upstream() {
    let collector = Collector::start();
    let up = echo();
    let pier = Pier::with_config(&config(&collector, &[up.addr], ""), &[]);
    // Not trusted: the client's context is neither honoured nor forwarded.
    let theirs = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
    let resp = get(
        pier.addr(),
        &request(
            "/api/items?x=1",
            &format!("traceparent: {theirs}\r\ntracestate: a=b\r\n"),
        ),
    );
    assert_eq!(resp.status, 200);
    let (trace, parent) = upstream_parent(&up, 0);
    assert_ne!(trace, "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(up.requests()[0].header("tracestate"), None);
    let spans = collector.wait_for(|s| of_trace(s, &trace).len() >= 2);
    // The upstream's parent is Pier's client span, whose parent is the server span.
    let (server, client) = server_and_client(&of_trace(&spans, &trace));
    assert_eq!(hex(&client.span_id), parent);
    assert!(
        server.parent_span_id.is_empty(),
        "an untrusted parent was taken"
    );
    assert_eq!(server.name, "GET /api/");
    assert_eq!(attr(server, "http.request.method").as_deref(), Some("GET"));
    assert_eq!(attr(server, "url.path").as_deref(), Some("/api/items"));
    assert_eq!(attr(server, "http.route").as_deref(), Some("/api/"));
    assert_eq!(
        attr(server, "http.response.status_code").as_deref(),
        Some("200")
    );
    assert_eq!(
        attr(server, "server.address").as_deref(),
        Some("shop.example")
    );
    assert_eq!(attr(server, "client.address").as_deref(), Some("127.0.0.1"));
    assert_eq!(
        attr(server, "network.protocol.version").as_deref(),
        Some("1.1")
    );
    assert_eq!(
        attr(server, "user_agent.original").as_deref(),
        Some("trace-test/1")
    );
    assert!(server.status.is_none());
    assert_eq!(attr(client, "server.address").as_deref(), Some("127.0.0.1"));
    assert_eq!(
        attr(client, "server.port"),
        Some(up.addr.port().to_string())
    );
    assert_eq!(
        attr(client, "http.response.status_code").as_deref(),
        Some("200")
    );
    assert!(client.start_time_unix_nano >= server.start_time_unix_nano);
    assert!(client.end_time_unix_nano <= server.end_time_unix_nano);
    assert_eq!(collector.services(), ["edge-test"]);
    // The access log names the same trace and server span.
    let log = pier.dir.path().join("access.log");
    let line = common::websocket::wait_for_line(&log, |l| l.contains(&trace));
    assert!(line, "no access-log line names trace {trace}");
    let text = std::fs::read_to_string(&log).unwrap();
    let v: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(v["trace_id"], trace.as_str());
    assert_eq!(v["span_id"], hex(&server.span_id).as_str());
}

#[test]
fn each_attempt_is_a_client_span_and_a_failed_upstream_is_an_error() {
    let collector = Collector::start();
    let dead = common::refused_addr();
    let up = echo();
    let pier = Pier::with_config(&config(&collector, &[dead, up.addr], ""), &[]);
    // Round robin over the two servers: one of two requests meets the dead
    // one first and is retried on the other.
    for _ in 0..2 {
        assert_eq!(get(pier.addr(), &request("/api/r", "")).status, 200);
    }
    let traces: Vec<(String, String)> = (0..2).map(|i| upstream_parent(&up, i)).collect();
    let spans = collector.wait_for(|s| s.len() >= 5);
    let mut clients_per_trace = Vec::new();
    for (trace, parent) in &traces {
        let t = of_trace(&spans, trace);
        let clients: Vec<&&Span> = t.iter().filter(|s| s.kind == CLIENT).collect();
        // The span the upstream names is the attempt that reached it: the last.
        assert_eq!(hex(&clients.last().unwrap().span_id), *parent);
        clients_per_trace.push(clients.len());
        if clients.len() == 2 {
            let (failed, retried) = (clients[0], clients[1]);
            assert_eq!(attr(failed, "error.type").as_deref(), Some("connect"));
            assert_eq!(failed.status.as_ref().map(|s| s.code), Some(STATUS_ERROR));
            assert_eq!(attr(failed, "server.port"), Some(dead.port().to_string()));
            assert_eq!(
                attr(retried, "http.request.resend_count").as_deref(),
                Some("1")
            );
            let server = t.iter().find(|s| s.kind == SERVER).unwrap();
            assert_eq!(server.events.len(), 1, "{:?}", server.events);
            assert_eq!(server.events[0].name, "retry");
        }
    }
    clients_per_trace.sort();
    assert_eq!(clients_per_trace, [1, 2]);

    // No server answers: 502, an error span.
    drop(up);
    let pier2 = Pier::with_config(&config(&collector, &[dead], ""), &[]);
    assert_eq!(get(pier2.addr(), &request("/api/gone", "")).status, 502);
    let spans = collector.wait_for(|s| {
        s.iter()
            .any(|s| attr(s, "url.path").as_deref() == Some("/api/gone"))
    });
    let server = spans
        .iter()
        .find(|s| attr(s, "url.path").as_deref() == Some("/api/gone"))
        .expect("the 502's server span");
    assert_eq!(
        attr(server, "http.response.status_code").as_deref(),
        Some("502")
    );
    assert_eq!(attr(server, "error.type").as_deref(), Some("502"));
    assert_eq!(server.status.as_ref().map(|s| s.code), Some(STATUS_ERROR));
    drop(pier);
}

#[test]
fn sampled_out_requests_are_not_exported_unless_kept_as_errors() {
    let collector = Collector::start();
    let dead = common::refused_addr();
    let up = echo();
    let text = with_dead_route(
        &config(&collector, &[up.addr], "sample = 0.0\nkeep_errors = true"),
        dead,
    );
    let pier = Pier::with_config(&text, &[]);
    assert_eq!(get(pier.addr(), &request("/api/quiet", "")).status, 200);
    let (trace, _) = upstream_parent(&up, 0);
    // Sampled out: the upstream is told so.
    assert!(up.requests()[0]
        .header("traceparent")
        .unwrap()
        .ends_with("-00"));
    // A 5xx answer is kept though not sampled; it comes after the 200, so
    // once it is in, the 200 would have been too.
    assert_eq!(get(pier.addr(), &request("/dead/x", "")).status, 502);
    let spans = collector.wait_for(|s| {
        s.iter()
            .any(|s| attr(s, "url.path").as_deref() == Some("/dead/x"))
    });
    assert!(spans
        .iter()
        .any(|s| s.kind == CLIENT && attr(s, "error.type").as_deref() == Some("connect")));
    assert!(
        of_trace(&spans, &trace).is_empty(),
        "a sampled-out request was exported"
    );
}

#[test]
fn a_trusted_parent_is_continued_and_its_sampling_followed() {
    let collector = Collector::start();
    let up = echo();
    let pier = Pier::with_config(
        &config(&collector, &[up.addr], "trust_incoming = true"),
        &[],
    );
    let caller = "4bf92f3577b34da6a3ce929d0e0e4736";
    let resp = get(
        pier.addr(),
        &request("/api/t", &format!("traceparent: 00-{caller}-00f067aa0ba902b7-01\r\ntracestate: rojo=00f067aa0ba902b7\r\n")),
    );
    assert_eq!(resp.status, 200);
    let (trace, parent) = upstream_parent(&up, 0);
    assert_eq!(trace, caller);
    assert_ne!(parent, "00f067aa0ba902b7");
    assert_eq!(
        up.requests()[0].header("tracestate"),
        Some("rojo=00f067aa0ba902b7")
    );
    let spans = collector.wait_for(|s| of_trace(s, caller).len() >= 2);
    let server = spans.iter().find(|s| s.kind == SERVER).unwrap();
    assert_eq!(hex(&server.parent_span_id), "00f067aa0ba902b7");
    assert_eq!(server.trace_state, "rojo=00f067aa0ba902b7");

    // Trusted networks: loopback is one, so the caller is believed; a
    // listed network that is not the caller's is not.
    for (trust, continued) in [
        ("[\"127.0.0.0/8\"]", true),
        ("[\"10.0.0.0/8\", \"::1\"]", false),
    ] {
        let up2 = echo();
        let text = config(
            &collector,
            &[up2.addr],
            &format!("trust_incoming = {trust}"),
        );
        let pier2 = Pier::with_config(&text, &[]);
        let tp = format!("traceparent: 00-{caller}-00f067aa0ba902b7-01\r\n");
        assert_eq!(get(pier2.addr(), &request("/api/n", &tp)).status, 200);
        assert_eq!(upstream_parent(&up2, 0).0 == caller, continued, "{trust}");
    }

    // The caller did not sample: neither does Pier (sample = 1 is for new traces).
    let unsampled = "5bf92f3577b34da6a3ce929d0e0e4736";
    get(
        pier.addr(),
        &request(
            "/api/u",
            &format!("traceparent: 00-{unsampled}-00f067aa0ba902b7-00\r\n"),
        ),
    );
    assert_eq!(upstream_parent(&up, 1).0, unsampled);
    // A malformed one (uppercase hex) starts a new trace.
    get(
        pier.addr(),
        &request(
            "/api/m",
            "traceparent: 00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01\r\n",
        ),
    );
    let (fresh, _) = upstream_parent(&up, 2);
    assert_ne!(fresh.to_uppercase(), "4BF92F3577B34DA6A3CE929D0E0E4736");
    let spans = collector.wait_for(|s| !of_trace(s, &fresh).is_empty());
    assert!(!of_trace(&spans, &fresh).is_empty());
    assert!(
        of_trace(&spans, unsampled).is_empty(),
        "an unsampled trace was exported"
    );
}

#[test]
fn metrics_show_dropped_spans_and_a_dead_collector_fails_no_request() {
    let collector = Collector::start();
    let up = echo();
    let dead = common::refused_addr();
    // The exporter wakes only at shutdown: the queue of one is full after
    // the first request.
    let text = config(&collector, &[up.addr], "queue = 1")
        .replace(&collector.addr.to_string(), &dead.to_string())
        .replace(
            "service_name = \"edge-test\"\nflush_interval = \"50ms\"",
            "flush_interval = \"1h\"",
        )
        .replace("[server]", "[admin]\nlisten = \"127.0.0.1:0\"\n[server]");
    let pier = Pier::with_config(&text, &[]);
    for _ in 0..20 {
        assert_eq!(get(pier.addr(), &request("/api/x", "")).status, 200);
    }
    let metrics = get(
        pier.admin.unwrap(),
        "GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    );
    let text = String::from_utf8_lossy(&metrics.body).to_string();
    let line = text
        .lines()
        .find(|l| l.starts_with("pier_trace_spans_dropped_total"))
        .expect("the dropped-spans counter");
    let n: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert_eq!(n, 19 * 2, "{line}");
}

#[test]
fn each_http2_stream_is_a_server_span() {
    let Some(nghttp) = common::which("nghttp") else {
        eprintln!("skipped: nghttp is not installed");
        return;
    };
    let collector = Collector::start();
    let up = echo();
    let text = config(&collector, &[up.addr], "").replace(
        "listen = \"127.0.0.1:0\"\n",
        "listen = \"127.0.0.1:0\"\nhttp2 = true\n",
    );
    let pier = Pier::with_config(&text, &[]);
    let base = format!("http://{}", pier.addr());
    let out = std::process::Command::new(nghttp)
        .args(["-n", &format!("{base}/api/one"), &format!("{base}/api/two")])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let servers = |s: &[Span]| -> Vec<Span> {
        s.iter()
            .filter(|s| {
                s.kind == SERVER && attr(s, "network.protocol.version").as_deref() == Some("2")
            })
            .cloned()
            .collect()
    };
    let spans = collector.wait_for(|s| servers(s).len() >= 2 && s.len() >= 4);
    let mut paths: Vec<String> = servers(&spans)
        .iter()
        .filter_map(|s| attr(s, "url.path"))
        .collect();
    paths.sort();
    assert_eq!(paths, ["/api/one", "/api/two"], "{spans:?}");
    // Two streams, two traces, each with its client span.
    let traces: std::collections::BTreeSet<String> =
        spans.iter().map(|s| hex(&s.trace_id)).collect();
    assert_eq!(traces.len(), 2);
    for i in 0..2 {
        let (trace, parent) = upstream_parent(&up, i);
        assert!(of_trace(&spans, &trace)
            .iter()
            .any(|s| s.kind == CLIENT && hex(&s.span_id) == parent));
    }
}

#[test]
fn trace_settings_are_checked_with_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pier.toml");
    for (body, line, key, says) in [
        (
            "endpoint = \"https://collector:4318/v1/traces\"",
            2,
            "trace.endpoint",
            "https",
        ),
        (
            "endpoint = \"collector:4318\"",
            2,
            "trace.endpoint",
            "http://",
        ),
        (
            "endpoint = \"http://:4318/v1/traces\"",
            2,
            "trace.endpoint",
            "not an http://host:port/path URL",
        ),
        (
            "endpoint = \"http://c/v1/traces\"\nsample = 1.5",
            3,
            "trace.sample",
            "between 0 and 1",
        ),
        (
            "endpoint = \"http://c/v1/traces\"\nqueue = 0",
            3,
            "trace.queue",
            "out of range",
        ),
        (
            "endpoint = \"http://c/v1/traces\"\nservice_name = \" \"",
            3,
            "trace.service_name",
            "empty",
        ),
        (
            "endpoint = \"http://c/v1/traces\"\nflush_interval = \"0s\"",
            3,
            "trace.flush_interval",
            "above zero",
        ),
        (
            "endpoint = \"http://c:4317/v1/traces\"\nprotocol = \"grpc\"",
            2,
            "trace.endpoint",
            "has a path, which gRPC export does not take",
        ),
        (
            "endpoint = \"http://c:4317\"\nprotocol = \"thrift\"",
            3,
            "trace.protocol",
            "\"thrift\" is not a protocol Pier exports with: write \"http/protobuf\" or \"grpc\"",
        ),
        (
            "endpoint = \"http://c:4318/v1/traces\"\nprotocol = \"http/json\"",
            3,
            "trace.protocol",
            "OTLP/JSON is not supported",
        ),
    ] {
        let listener = "[[listener]]\nlisten = \"127.0.0.1:0\"\n[[route]]\nhandler = \"redirect\"\nlocation = \"/x\"";
        std::fs::write(&path, format!("[trace]\n{body}\n{listener}\n")).unwrap();
        let err = common::assert_config_error(&path, line, key);
        assert!(err.contains(says), "{err}");
    }
    for (body, line, key, says) in [
        (
            "trust_incoming = [\"10.0.0.0/8\", \"all\"]",
            3,
            "trace.trust_incoming[2]",
            "trust_incoming = true",
        ),
        (
            "trust_incoming = [\"10.0.0.0/33\"]",
            3,
            "trace.trust_incoming[1]",
            "",
        ),
        (
            "trust_incoming = \"yes\"",
            3,
            "trace.trust_incoming",
            "true, false or a list of addresses",
        ),
    ] {
        let listener = "[[listener]]\nlisten = \"127.0.0.1:0\"\n[[route]]\nhandler = \"redirect\"\nlocation = \"/x\"";
        let text = format!("[trace]\nendpoint = \"http://c/v1/traces\"\n{body}\n{listener}\n");
        std::fs::write(&path, text).unwrap();
        let err = common::assert_config_error(&path, line, key);
        assert!(err.contains(says), "{err}");
    }
    // Both protocols' endpoints pass.
    let listener = "[[listener]]\nlisten = \"127.0.0.1:0\"\n[[route]]\nhandler = \"redirect\"\nlocation = \"/x\"";
    for body in [
        "endpoint = \"http://c:4317\"\nprotocol = \"grpc\"",
        "endpoint = \"http://c:4317/\"\nprotocol = \"grpc\"",
        "endpoint = \"http://c:4318/v1/traces\"\nprotocol = \"http/protobuf\"",
    ] {
        std::fs::write(&path, format!("[trace]\n{body}\n{listener}\n")).unwrap();
        let (code, err) = common::check_config(&path);
        assert_eq!(code, Some(0), "{body}: {err}");
    }
    // A missing endpoint is named too.
    std::fs::write(&path, "[trace]\nsample = 0.5\n").unwrap();
    let (code, err) = common::check_config(&path);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("endpoint"), "{err}");
}

#[test]
fn cached_answers_carry_their_outcome_and_a_hit_asks_no_upstream() {
    let collector = Collector::start();
    let origin = Upstream::start(|_| {
        common::upstream::Reply::Http(
            200,
            vec![("Cache-Control".into(), "max-age=60".into())],
            b"stored".to_vec(),
        )
    });
    let text = format!(
        "{}\n[trace]\nendpoint = \"http://{}/v1/traces\"\nflush_interval = \"50ms\"\n",
        common::cache::cached_proxy_config(origin.addr, 1, ""),
        collector.addr
    );
    let pier = Pier::with_config(&text, &[]);
    for _ in 0..2 {
        assert_eq!(get(pier.addr(), &request("/obj", "")).status, 200);
    }
    assert_eq!(origin.requests().len(), 1);
    let servers =
        |s: &[Span]| -> Vec<Span> { s.iter().filter(|s| s.kind == SERVER).cloned().collect() };
    let spans = collector.wait_for(|s| servers(s).len() >= 2);
    let outcomes: Vec<Option<String>> = servers(&spans)
        .iter()
        .map(|s| attr(s, "pier.cache.outcome"))
        .collect();
    assert_eq!(outcomes, [Some("miss".into()), Some("hit".into())]);
    let hit = &servers(&spans)[1];
    assert!(!spans
        .iter()
        .any(|s| s.kind == CLIENT && s.parent_span_id == hit.span_id));
}

#[test]
fn a_reload_moves_export_to_the_new_endpoint_and_shutdown_sends_what_is_queued() {
    let (first, second) = (Collector::start(), Collector::start());
    let up = echo();
    // The exporters send only when stopped.
    let text = |c: &Collector| {
        config(c, &[up.addr], "").replace(
            "service_name = \"edge-test\"\nflush_interval = \"50ms\"",
            "flush_interval = \"1h\"",
        )
    };
    let mut pier = Pier::with_config(&text(&first), &[]);
    assert_eq!(get(pier.addr(), &request("/api/before", "")).status, 200);
    let dir = pier.dir.path().to_str().unwrap().to_string();
    std::fs::write(
        pier.dir.path().join("pier.toml"),
        text(&second).replace("{dir}", &dir),
    )
    .unwrap();
    pier.signal(rustix::process::Signal::HUP);
    pier.wait_log("configuration reloaded", std::time::Duration::from_secs(10))
        .expect("reload logged");
    assert_eq!(get(pier.addr(), &request("/api/after", "")).status, 200);
    assert!(first.spans().is_empty() && second.spans().is_empty());
    pier.signal(rustix::process::Signal::TERM);
    assert_eq!(pier.wait_exit(std::time::Duration::from_secs(15)), Some(0));
    let path_of = |c: &Collector| -> Vec<String> {
        c.spans()
            .iter()
            .filter(|s| s.kind == SERVER)
            .filter_map(|s| attr(s, "url.path"))
            .collect()
    };
    assert_eq!(path_of(&first), ["/api/before"]);
    assert_eq!(path_of(&second), ["/api/after"]);
}

#[test]
fn an_http2_upstream_gets_pier_s_traceparent_in_place_of_the_client_s() {
    let collector = Collector::start();
    let origin = h2_origin::H2Origin::start();
    let text = config(&collector, &[origin.addr], "")
        .replace("retries = 1\n", "retries = 1\nprotocol = \"h2\"\n");
    let pier = Pier::with_config(&text, &[]);
    let theirs = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let extra = format!("traceparent: {theirs}\r\ntracestate: a=b\r\n");
    assert_eq!(get(pier.addr(), &request("/api/h2", &extra)).status, 200);
    let (_, fields) = origin.requests().pop().expect("the origin got the request");
    let sent: Vec<_> = fields.get_all("traceparent").iter().collect();
    assert_eq!(sent.len(), 1);
    let tp = sent[0].to_str().unwrap().to_string();
    assert_ne!(tp, theirs);
    assert!(fields.get("tracestate").is_none());
    let trace = tp.split('-').nth(1).unwrap().to_string();
    let spans = collector.wait_for(|s| of_trace(s, &trace).len() >= 2);
    let client = of_trace(&spans, &trace)
        .into_iter()
        .find(|s| s.kind == CLIENT)
        .cloned();
    assert_eq!(
        client.map(|c| hex(&c.span_id)),
        tp.split('-').nth(2).map(str::to_string)
    );
}
