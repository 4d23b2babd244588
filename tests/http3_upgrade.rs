//! HTTP/3 across a binary upgrade: the new process takes over the UDP
//! sockets with the TCP ones, and relays the packets of the connections the
//! old process still serves back to it, so a download under way at the
//! upgrade finishes (its acknowledgements reach the old process), new
//! connections reach the new process, and the old one exits once drained.

mod common;

use std::time::Duration;

use common::aioquic::{body, present as aioquic_present, run as aioquic};
use common::successor::Successor;
use common::upstream::{Reply, Upstream};
use common::Pier;
use rustix::process::Signal;

/// A body far larger than QUIC's first congestion window: it arrives only
/// if the client's acknowledgements reach the process sending it.
const LARGE: u64 = 600_000;

fn config(upstream: std::net::SocketAddr, body: &str) -> String {
    format!(
        r#"
[server]
workers = 2
[[listener]]
listen = "127.0.0.1:0"
tls = {{ self_signed = true }}
[[upstream]]
name = "slow"
servers = ["{upstream}"]
read_timeout = "20s"
[[route]]
path = "/slow"
handler = "proxy"
upstream = "slow"
[[route]]
path = "/hello"
handler = "respond"
status = 200
body = "{body}"
"#
    )
}

#[test]
fn a_download_under_way_at_an_upgrade_finishes_and_new_connections_reach_the_new_process() {
    if !aioquic_present() {
        return;
    }
    // The origin waits before it answers, so the answer is sent while the
    // upgrade happens.
    let origin = Upstream::start(|_| {
        std::thread::sleep(Duration::from_millis(2500));
        Reply::Stream(LARGE)
    });
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pier.pid");
    let mut pier = Pier::with_config(
        &config(origin.addr, "old"),
        &["--pid-file", pid_file.to_str().unwrap()],
    );
    let addr = pier.https[0];
    assert_eq!(
        aioquic(addr, &["GET", "/hello"])["answers"][0]["body"],
        "old"
    );

    let download = std::thread::spawn(move || aioquic(addr, &["GET", "/slow"]));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while origin.requests().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the request never reached the origin"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::write(pier.root().join("pier.toml"), config(origin.addr, "new")).unwrap();
    let old = pier.pid();
    pier.signal(Signal::USR2);
    let successor = Successor::from_pid_file(&pid_file, old);
    // The new process logs to the same standard error as the old one.
    pier.wait_log(
        "using the UDP sockets of the replaced process",
        Duration::from_secs(20),
    )
    .expect("the new process took the UDP sockets over");
    pier.wait_log("the new process serves", Duration::from_secs(20))
        .expect("hand-over logged");

    // New connections reach the new process while the old one drains.
    assert_eq!(
        aioquic(addr, &["GET", "/hello"])["answers"][0]["body"],
        "new"
    );

    let v = download.join().expect("the download's client");
    let answer = &v["answers"][0];
    assert_eq!(answer["status"], 200, "{v}");
    let got = body(answer);
    assert_eq!(got.len() as u64, LARGE);
    assert!(got.iter().enumerate().all(|(i, b)| *b == (i % 251) as u8));
    assert_eq!(
        pier.wait_exit(Duration::from_secs(20)),
        Some(0),
        "the old process drains and exits by itself"
    );
    assert!(successor.alive(), "the new process serves");
    assert_eq!(
        aioquic(addr, &["GET", "/hello"])["answers"][0]["body"],
        "new"
    );
}
