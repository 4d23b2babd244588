//! Load shedding at `max_connections`: past the limit, clients wait in the kernel
//! backlog (connected, unanswered) instead of being accepted and failed, and are all
//! served once earlier connections close.

mod common;

use std::io::{ErrorKind, Read};
use std::time::Duration;

use common::{connect, Pier, Reader};

const MAX: usize = 4;
const EXTRA: usize = 10;

const CONFIG: &str = r#"
[server]
workers = 1
max_connections = 4
[[listener]]
listen = "127.0.0.1:0"
[[route]]
path = "/"
handler = "respond"
status = 200
body = "ok"
[admin]
listen = "127.0.0.1:0"
"#;

/// `MAX` keep-alive connections, each answered once and left open.
fn fill_worker(pier: &Pier) -> Vec<Reader> {
    (0..MAX)
        .map(|_| {
            let mut r = Reader::new(connect(pier.addr()));
            r.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
            assert_eq!(r.response(false).expect("a response").status, 200);
            r
        })
        .collect()
}

#[test]
fn clients_past_max_connections_wait_in_the_backlog_and_are_served_later() {
    let pier = Pier::with_config_log(CONFIG, &[], "debug");

    // Fill the worker: keep-alive connections that stay open after their answer.
    let mut held = fill_worker(&pier);

    // The kernel completes their handshakes, but Pier does not accept them yet.
    let mut waiting: Vec<Reader> = (0..EXTRA)
        .map(|_| {
            let mut r = Reader::new(connect(pier.addr()));
            r.send(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
            r
        })
        .collect();
    for r in waiting.iter_mut() {
        r.stream
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let mut b = [0u8; 1];
        match r.stream.read(&mut b) {
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            other => panic!("a client past max_connections got {other:?} instead of waiting"),
        }
    }
    // The held connections are still served while the others wait.
    held[0].send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(held[0].response(false).unwrap().status, 200);
    assert!(pier
        .wait_log("pausing accepts", Duration::from_secs(5))
        .is_some());

    drop(held);
    for (i, r) in waiting.iter_mut().enumerate() {
        r.stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let resp = r
            .response(false)
            .unwrap_or_else(|| panic!("waiting client {i} was closed without an answer"));
        assert_eq!(resp.status, 200, "waiting client {i}");
        assert_eq!(resp.body, b"ok");
    }
    assert!(pier
        .wait_log("resuming accepts", Duration::from_secs(5))
        .is_some());

    // The pause shows on the admin listener too.
    let admin = pier.admin.expect("admin listener on");
    let scrape = common::get(admin, "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n");
    let text = String::from_utf8(scrape.body).unwrap();
    let pauses: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("pier_connections_shed_total "))
        .expect("pier_connections_shed_total in /metrics")
        .parse()
        .unwrap();
    assert!(pauses >= 1, "{text}");
}

#[test]
fn clients_waiting_in_the_backlog_at_sigterm_are_answered_not_reset() {
    let mut pier = Pier::with_config(CONFIG, &[]);
    // The worker is full of idle keep-alive connections...
    let _held = fill_worker(&pier);
    // ...so these wait in the kernel's queue, requests already sent.
    let mut waiting: Vec<Reader> = (0..EXTRA)
        .map(|_| {
            let mut r = Reader::new(connect(pier.addr()));
            r.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
            r
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    // The drain closes the idle connections and stops accepting; what the
    // kernel had queued is taken first and answered, not reset at the close.
    pier.signal(rustix::process::Signal::TERM);
    for (i, r) in waiting.iter_mut().enumerate() {
        let resp = r
            .response(false)
            .unwrap_or_else(|| panic!("queued client {i} got no answer"));
        assert_eq!(resp.status, 200, "queued client {i}");
        assert!(
            resp.header("connection")
                .is_some_and(|v| v.eq_ignore_ascii_case("close")),
            "queued client {i}: the drain answers with Connection: close"
        );
    }
    assert_eq!(pier.wait_exit(Duration::from_secs(10)), Some(0));
}
