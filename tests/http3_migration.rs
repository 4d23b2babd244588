//! A QUIC client whose address changes mid-connection (NAT rebinding)
//! keeps its connection and its streams, even when the kernel's
//! SO_REUSEPORT hash now gives its packets to another worker: the
//! connection IDs name the worker that owns the connection, and the worker
//! that reads such a packet hands it over (`pier_quic_packets_steered_total`).

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::aioquic::{present as aioquic_present, run as aioquic};
use common::udp_relay::UdpRelay;
use common::Pier;

const CONFIG: &str = r#"
[server]
workers = 2
[[listener]]
listen = "127.0.0.1:0"
tls = { self_signed = true }
[[route]]
path = "/hello"
handler = "respond"
status = 200
body = "hello over h3\n"
[admin]
listen = "127.0.0.1:0"
"#;

#[test]
fn a_client_whose_port_keeps_changing_keeps_its_connection_across_workers() {
    if !aioquic_present() {
        return;
    }
    let pier = Pier::with_config(CONFIG, &[]);
    let admin = pier.admin.expect("admin listener");
    // Sixteen source ports, a new one every three datagrams from the
    // client: the two workers each get some of them.
    let relay = UdpRelay::start(pier.https[0], 16, 3);
    let mut args = Vec::new();
    for _ in 0..40 {
        args.extend(["GET", "/hello"]);
    }
    let v = aioquic(relay.front, &args);
    let answers = v["answers"].as_array().expect("answers");
    assert_eq!(answers.len(), 40, "{v}");
    for a in answers {
        assert_eq!(a["status"], 200, "{v}");
        assert_eq!(a["body"], "hello over h3\n", "{v}");
    }
    let moves = relay.moves.load(Ordering::Relaxed);
    assert!(moves >= 10, "the relay moved only {moves} times");
    drop(relay);

    // One connection, and the packets the other worker read reached it.
    let mut text = String::new();
    for _ in 0..50 {
        let r = common::get(admin, "GET /metrics HTTP/1.1\r\nHost: admin\r\n\r\n");
        text = String::from_utf8(r.body).unwrap();
        if common::metric(&text, "pier_http3_requests_total") == Some(40.0) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        common::metric(&text, "pier_http3_connections_total"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        common::metric(&text, "pier_http3_requests_total"),
        Some(40.0),
        "{text}"
    );
    let steered = common::metric(&text, "pier_quic_packets_steered_total").unwrap_or(0.0);
    assert!(
        steered > 0.0,
        "{moves} moves and no packet read by the other worker:\n{text}"
    );
}
