//! `/status.json`: the [`Snapshot`] serialized as it is, one object, so a
//! script reads the same figures the page shows. serde_json does the escaping.

use super::snapshot::Snapshot;

/// The JSON text of a snapshot.
pub fn render_json(snapshot: &Snapshot) -> String {
    // A snapshot is plain data (strings, numbers, vectors): serializing it
    // cannot fail, and a failure would be a bug worth an empty object, not a panic.
    serde_json::to_string(snapshot).unwrap_or_else(|_| "{}".into())
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use serde_json::Value;

    use super::super::history::Sampler;
    use super::super::StatusState;
    use super::Snapshot;
    use crate::observe::metrics::{HandlerKind, Registry};
    use crate::observe::upstream_counters::UpstreamFailure;

    /// A running-looking state: two workers with traffic, a TLS listener, and
    /// an upstream group with one server failing its checks.
    pub(crate) fn state_with_traffic() -> StatusState {
        let text = r#"
            [server]
            workers = 2
            [[listener]]
            listen = "127.0.0.1:0"
            [[listener]]
            listen = "127.0.0.1:0"
            tls = { self_signed = true }
            [[route]]
            handler = "proxy"
            upstream = "app"
            [[upstream]]
            name = "app"
            servers = [{ address = "127.0.0.1:1" }, { address = "127.0.0.1:2", weight = 3 }]
            health_check = { kind = "tcp", interval = "2s" }
        "#;
        let config = Arc::new(crate::config::build::load_str("test.toml", text).expect("config"));
        let g = &config.upstreams[0];
        g.servers[0].checks.record(Ok(()));
        g.servers[0]
            .checks
            .record(Err("connect: <b>refused</b> & \"gone\""));
        g.servers[0]
            .active_up
            .store(false, std::sync::atomic::Ordering::Relaxed);
        // Two workers' counters for the group: the second server answered
        // three times (one 5xx) and failed twice; one request is in flight.
        let blocks = [
            g.counters.register(g.servers.len()),
            g.counters.register(g.servers.len()),
        ];
        for (status, ms) in [(200, 2), (200, 3), (503, 40)] {
            blocks[0][1].started();
            blocks[0][1].answered(status, Duration::from_millis(ms));
            blocks[0][1].finished();
        }
        blocks[1][1].started();
        blocks[1][1].failed(UpstreamFailure::Reset);
        blocks[1][1].finished();
        blocks[1][1].started();
        blocks[1][1].failed(UpstreamFailure::Connect);
        blocks[1][1].finished();
        blocks[1][1].started();
        let registry = Arc::new(Registry::new(2, vec![]));
        let state = StatusState::new(
            registry.clone(),
            config,
            vec![
                "http://127.0.0.1:8080".into(),
                "https://127.0.0.1:8443".into(),
            ],
        );
        let mut sampler = Sampler::default();
        let t0 = Instant::now();
        state.sample(&mut sampler, t0);
        for _ in 0..30 {
            registry.workers[0].request(HandlerKind::Static, 200);
        }
        registry.workers[1].request(HandlerKind::Proxy, 502);
        registry.workers[1].request(HandlerKind::Proxy, 200);
        registry.workers[0].accepted.add(3);
        registry.workers[0].open.set(2);
        registry.workers[1].shedding.set(1);
        registry.workers[1].tls_full.add(2);
        registry.workers[1].tls_resumed.add(1);
        registry.workers[0].request_duration(0, 200, Duration::from_micros(500));
        blocks[0][1].started();
        blocks[0][1].answered(200, Duration::from_micros(800));
        blocks[0][1].finished();
        state.sample(&mut sampler, t0 + Duration::from_secs(1));
        state
    }

    /// Its snapshot with the group renamed to markup. The configuration
    /// refuses such names, but the page must not rely on that: whatever a
    /// name holds is shown as text.
    pub(crate) fn snapshot_with_markup() -> Snapshot {
        let mut snapshot = state_with_traffic().snapshot();
        snapshot.upstreams[0].name = "<script>alert(1)</script>".into();
        snapshot.upstreams[0].servers[0].name = "<script>alert(2)</script>".into();
        snapshot.upstreams[0].servers[0].address = "<img src=x onerror=alert(3)>".into();
        snapshot
    }

    #[test]
    fn status_json_has_process_workers_upstreams_and_certificates() {
        let v: Value = serde_json::from_str(&super::render_json(&snapshot_with_markup())).unwrap();
        assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(v["generation"], 1);
        assert!(v["last_reload"].is_null());
        assert_eq!(v["worker_count"], 2);
        assert_eq!(v["listeners"][1], "https://127.0.0.1:8443");
        assert_eq!(v["total"]["requests"], 32);
        assert_eq!(v["total"]["requests_per_s"], 32.0);
        assert_eq!(v["total"]["errors"], 1);
        assert_eq!(v["total"]["error_ratio"], 0.0313);
        assert_eq!(v["total"]["open"], 2);
        assert_eq!(v["total"]["shedding"], 1);
        assert_eq!(v["total"]["tls"]["full"], 2);
        assert_eq!(v["total"]["tls"]["resumed"], 1);
        assert_eq!(v["history"]["requests_per_s"], serde_json::json!([32.0]));
        assert_eq!(v["history"]["capacity"], 180);
        assert_eq!(v["workers"][0]["id"], 0);
        assert_eq!(v["workers"][0]["requests_per_s"], 30.0);
        assert_eq!(v["workers"][0]["accept_per_s"], 3.0);
        assert_eq!(v["workers"][1]["errors_per_s"], 1.0);
        assert_eq!(v["workers"][1]["shedding"], 1);
        // One request of 0.5 ms: in the first bucket (up to 1 ms), interpolated.
        assert_eq!(v["total"]["latency_p50_ms"], 0.5);
        assert_eq!(v["workers"][0]["latency_p99_ms"], 0.99);
        assert!(v["workers"][1]["latency_p50_ms"].is_null());
        assert_eq!(v["workers"][1]["chart"], serde_json::json!([2.0]));
        let group = &v["upstreams"][0];
        assert_eq!(group["name"], "<script>alert(1)</script>");
        assert_eq!(group["draining"], false);
        assert_eq!(group["health_check"], "TCP connect every 2s");
        assert_eq!(group["servers"][0]["state"], "down");
        assert_eq!(
            group["servers"][0]["checks"],
            serde_json::json!([true, false])
        );
        assert_eq!(
            group["servers"][0]["last_check_error"],
            "connect: <b>refused</b> & \"gone\""
        );
        assert_eq!(group["servers"][1]["state"], "up");
        assert_eq!(group["servers"][0]["name"], "<script>alert(2)</script>");
        assert_eq!(group["servers"][0]["down"], true);
        let up = &group["servers"][1];
        assert_eq!(up["down"], false);
        // Counters summed over both workers' blocks.
        assert_eq!(up["requests"], 7);
        assert_eq!(up["in_flight"], 1);
        assert_eq!(up["responses"]["2xx"], 3);
        assert_eq!(up["responses"]["5xx"], 1);
        assert_eq!(up["errors"], 2);
        assert_eq!(up["failures"]["reset"], 1);
        assert_eq!(up["failures"]["connect"], 1);
        assert_eq!(up["failures"]["timeout"], 0);
        // Rates of the sampled second: one attempt, answered in 0.8 ms.
        assert_eq!(up["requests_per_s"], 1.0);
        assert_eq!(up["errors_per_s"], 0.0);
        assert_eq!(up["latency_p50_ms"], 0.5);
        assert_eq!(up["latency_p99_ms"], 0.99);
        assert_eq!(group["servers"][0]["requests"], 0);
        assert!(group["servers"][0]["latency_p50_ms"].is_null());
        assert_eq!(group["servers"][1]["weight"], 3);
        let cert = &v["certificates"][0];
        assert_eq!(cert["names"][0], "localhost");
        assert!(cert["not_after_unix"].as_i64().unwrap() > v["now_unix"].as_i64().unwrap());
        assert_eq!(cert["expiring"], false);
        assert_eq!(v["cache_zones"], serde_json::json!([]));
    }

    #[test]
    fn a_reload_counts_a_generation_and_keeps_the_old_groups_while_they_drain() {
        let state = state_with_traffic();
        let old = state.config.load().current.clone();
        let next = crate::config::build::load_str(
            "next.toml",
            "[[listener]]\nlisten = \"127.0.0.1:0\"\n[[route]]\nhandler = \"respond\"\n",
        )
        .unwrap();
        state.reloaded(Arc::new(next), vec!["http://127.0.0.1:9".into()]);
        let v: Value = serde_json::from_str(&super::render_json(&state.snapshot())).unwrap();
        assert_eq!(v["generation"], 2);
        assert_eq!(v["last_reload"]["ok"], true);
        assert_eq!(v["listeners"], serde_json::json!(["http://127.0.0.1:9"]));
        assert_eq!(v["upstreams"][0]["draining"], true);
        assert_eq!(v["upstreams"][0]["generation"], 1);
        assert_eq!(v["upstreams"][0]["servers"][1]["state"], "draining");
        let layout = v["layout"].as_str().unwrap().to_string();
        drop(old);
        state.reload_failed("next.toml:3: route[0].handler: unknown handler".into());
        let v: Value = serde_json::from_str(&super::render_json(&state.snapshot())).unwrap();
        assert_eq!(v["generation"], 2);
        assert_eq!(v["last_reload"]["ok"], false);
        assert_eq!(
            v["last_reload"]["message"],
            "next.toml:3: route[0].handler: unknown handler"
        );
        assert_eq!(v["upstreams"], serde_json::json!([]), "drained groups go");
        assert_ne!(v["layout"], layout.as_str());
    }
}

#[cfg(test)]
mod acme_tests {
    use std::sync::Arc;

    use serde_json::Value;

    use super::super::StatusState;
    use crate::observe::metrics::Registry;

    #[test]
    fn acme_names_show_before_their_certificate_is_issued() {
        let state_dir = tempfile::tempdir().unwrap();
        let text = format!(
            r#"
            [[listener]]
            listen = "127.0.0.1:0"
            [listener.tls.acme]
            directory = "https://127.0.0.1:9/directory"
            agree_terms = true
            names = ["a.example"]
            state_dir = "{}"
            [[route]]
            handler = "respond"
            "#,
            state_dir.path().display()
        );
        let config = Arc::new(crate::config::build::load_str("acme.toml", &text).expect("config"));
        let state = StatusState::new(Arc::new(Registry::new(1, vec![])), config, vec![]);
        let v: Value = serde_json::from_str(&super::render_json(&state.snapshot())).unwrap();
        let cert = &v["certificates"][0];
        assert_eq!(cert["names"], serde_json::json!(["a.example"]));
        assert_eq!(cert["acme"], true);
        assert!(cert["not_after_unix"].is_null());
        assert_eq!(cert["expiring"], false);
        let page = super::super::html::render_html(&state.snapshot());
        assert!(page.contains("a.example <small>(ACME, not issued yet)</small>"));
    }
}
