//! OpenTelemetry traces in a real backend: Pier exports to Jaeger's OTLP/HTTP
//! receiver and the spans are read back through Jaeger's query API. Skipped
//! with a message when Jaeger is not installed (`.ci/run` builds it; `JAEGER`
//! names the binary).

mod common;

use std::net::SocketAddr;

use common::jaeger::{parents, tag, Jaeger};
use common::otlp::{
    traced_proxy_config, traced_request as request, upstream_traceparent as upstream_parent,
    with_dead_route,
};
use common::upstream::{ok, Upstream};
use common::{get, Pier};
use serde_json::Value;

fn config(jaeger: &Jaeger, servers: &[SocketAddr], trace_extra: &str) -> String {
    traced_proxy_config(&jaeger.otlp, servers, trace_extra)
}

/// `config` exporting to Jaeger's OTLP/gRPC receiver instead.
fn grpc_config(jaeger: &Jaeger, servers: &[SocketAddr]) -> String {
    traced_proxy_config(&jaeger.otlp_grpc, servers, "protocol = \"grpc\"")
}

fn kind(span: &Value) -> String {
    tag(span, "span.kind").unwrap_or_default()
}

/// The trace id the access log gives the request to `path`.
fn logged_trace(pier: &Pier, path: &str) -> String {
    let log = pier.dir.path().join("access.log");
    assert!(common::websocket::wait_for_line(&log, |l| l.contains(path)));
    let text = std::fs::read_to_string(&log).unwrap();
    let line = text.lines().find(|l| l.contains(path)).unwrap();
    let v: Value = serde_json::from_str(line).unwrap();
    v["trace_id"].as_str().expect("a trace_id").to_string()
}

#[test]
fn jaeger_shows_the_server_span_and_one_client_span_per_attempt() {
    let Some(jaeger) = Jaeger::start() else {
        return;
    };
    let dead = common::refused_addr();
    let up = Upstream::start(|_| ok("up"));
    let pier = Pier::with_config(&config(&jaeger, &[dead, up.addr], ""), &[]);
    shows_a_trace_per_request_with_each_attempt(&jaeger, &pier, &up, dead);
}

#[test]
fn jaeger_takes_the_same_traces_over_otlp_grpc() {
    let Some(jaeger) = Jaeger::start() else {
        return;
    };
    let dead = common::refused_addr();
    let up = Upstream::start(|_| ok("up"));
    let pier = Pier::with_config(&grpc_config(&jaeger, &[dead, up.addr]), &[]);
    shows_a_trace_per_request_with_each_attempt(&jaeger, &pier, &up, dead);
}

/// Two requests through `pier` to a group of `dead` and `up`, one of them
/// retried, each with an untrusted `traceparent`: Jaeger holds a trace per
/// request with its server span and a client span per attempt, and the
/// upstream's parent is the last of them.
fn shows_a_trace_per_request_with_each_attempt(
    jaeger: &Jaeger,
    pier: &Pier,
    up: &Upstream,
    dead: SocketAddr,
) {
    // An untrusted traceparent: not honoured.
    let theirs = "4bf92f3577b34da6a3ce929d0e0e4736";
    let tp = format!("traceparent: 00-{theirs}-00f067aa0ba902b7-01\r\n");
    // Round robin over a dead and a live server: one of the two requests is
    // retried.
    for i in 0..2 {
        let resp = get(pier.addr(), &request(&format!("/api/items/{i}"), &tp));
        assert_eq!(resp.status, 200);
    }
    let mut attempts = Vec::new();
    for i in 0..2 {
        let (trace, parent) = upstream_parent(up, i);
        assert_ne!(trace, theirs);
        let spans = jaeger.trace(&trace, 2);
        let server = spans
            .iter()
            .find(|s| kind(s) == "server")
            .unwrap_or_else(|| panic!("a server span in {spans:?}"));
        let clients: Vec<&Value> = spans.iter().filter(|s| kind(s) == "client").collect();
        assert_eq!(spans.len(), 1 + clients.len(), "{spans:?}");
        attempts.push(clients.len());
        let server_id = server["spanID"].as_str().unwrap();
        assert!(parents(server).is_empty(), "an untrusted parent was taken");
        assert_eq!(server["operationName"], "GET /api/");
        for (key, want) in [
            ("http.request.method", "GET".to_string()),
            (
                "url.path",
                format!("/api/items/{}", if clients.len() == 2 { "0" } else { "1" }),
            ),
            ("http.route", "/api/".into()),
            ("http.response.status_code", "200".into()),
            ("server.address", "shop.example".into()),
            ("client.address", "127.0.0.1".into()),
            ("network.protocol.version", "1.1".into()),
            ("user_agent.original", "trace-test/1".into()),
        ] {
            if key == "url.path" {
                assert!(tag(server, key).unwrap().starts_with("/api/items/"));
                continue;
            }
            assert_eq!(tag(server, key), Some(want), "{key} of {server}");
        }
        for c in &clients {
            assert_eq!(parents(c), [server_id]);
            assert_eq!(tag(c, "server.address").as_deref(), Some("127.0.0.1"));
        }
        // The upstream's parent is Pier's last client span.
        let last = clients
            .iter()
            .max_by_key(|c| c["startTime"].as_u64())
            .unwrap();
        assert_eq!(last["spanID"], parent.as_str());
        assert_eq!(tag(last, "server.port"), Some(up.addr.port().to_string()));
        if clients.len() == 2 {
            let failed = clients
                .iter()
                .find(|c| c["spanID"] != parent.as_str())
                .unwrap();
            assert_eq!(tag(failed, "error.type").as_deref(), Some("connect"));
            assert_eq!(tag(failed, "error").as_deref(), Some("true"));
            assert_eq!(tag(failed, "server.port"), Some(dead.port().to_string()));
            let logs = server["logs"].as_array().unwrap();
            assert!(
                logs.iter()
                    .any(|l| l["fields"].to_string().contains("retry")),
                "{logs:?}"
            );
        }
    }
    attempts.sort();
    assert_eq!(attempts, [1, 2]);
    // Both traces are in: the client's id would be too, had it been used.
    let found = jaeger.api(&format!("/api/traces/{theirs}"));
    assert!(found.is_none(), "the client's trace id was used: {found:?}");
}

#[test]
fn jaeger_gets_a_502_as_an_error_and_no_sampled_out_request() {
    let Some(jaeger) = Jaeger::start() else {
        return;
    };
    let dead = common::refused_addr();
    let up = Upstream::start(|_| ok("up"));
    let text = with_dead_route(
        &config(&jaeger, &[up.addr], "sample = 0.0\nkeep_errors = true"),
        dead,
    );
    let pier = Pier::with_config(&text, &[]);
    assert_eq!(get(pier.addr(), &request("/api/quiet", "")).status, 200);
    let (quiet, _) = upstream_parent(&up, 0);
    assert_eq!(get(pier.addr(), &request("/dead/x", "")).status, 502);
    let failed = logged_trace(&pier, "/dead/x");
    let spans = jaeger.trace(&failed, 2);
    let server = spans
        .iter()
        .find(|s| kind(s) == "server")
        .expect("the 502's server span");
    assert_eq!(
        tag(server, "http.response.status_code").as_deref(),
        Some("502")
    );
    assert_eq!(tag(server, "error").as_deref(), Some("true"));
    assert_eq!(tag(server, "otel.status_code").as_deref(), Some("ERROR"));
    let client = spans
        .iter()
        .find(|s| kind(s) == "client")
        .expect("the failed attempt");
    assert_eq!(tag(client, "error.type").as_deref(), Some("connect"));
    // Exported in order: the sampled-out 200 would be in by now.
    let found = jaeger.api(&format!("/api/traces/{quiet}"));
    assert!(
        found.is_none(),
        "a sampled-out request was exported: {found:?}"
    );
}
