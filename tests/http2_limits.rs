//! HTTP/2 limits and defences against a real `pier` process: each test makes
//! the abuse with frames written by hand (or a client that never opens its
//! window) and checks the bound: rapid reset, CONTINUATION and empty DATA
//! floods, PING and SETTINGS floods whose acks are never read, PRIORITY and
//! WINDOW_UPDATE floods (and a download that is not one), a client that
//! opens its window a byte at a time (data dribble), a client that
//! never reads, the idle timeout, max_requests, max_concurrent_streams,
//! oversized heads, and a drain's GOAWAY that lets streams in flight finish.
//! Where the abuse could slow the worker, a client on another connection
//! checks that its requests are still answered fast meanwhile.

mod common;

use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::h2raw::{self, block, frame, get_fields, RawH2};
use common::upstream::{Reply, Upstream};
use common::Pier;

/// Resident memory of a process, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Sends one GET on a raw connection and waits for its response HEADERS.
fn raw_get(c: &mut RawH2, stream: u32, path: &str) -> Option<h2raw::Frame> {
    c.send(&frame(
        h2raw::HEADERS,
        h2raw::END_HEADERS | h2raw::END_STREAM,
        stream,
        &block(&get_fields(path)),
    ));
    c.wait_for(Duration::from_secs(5), |f| {
        f.stream == stream && matches!(f.kind, h2raw::HEADERS | h2raw::RST_STREAM)
    })
}

/// Runs `abuse` on its own thread while a well-behaved client sends GETs on
/// another connection; returns that client's 99th percentile latency.
fn p99_during(addr: SocketAddr, abuse: impl FnOnce() + Send + 'static) -> Duration {
    let done = Arc::new(AtomicBool::new(false));
    let flag = done.clone();
    let abuser = std::thread::spawn(move || {
        abuse();
        flag.store(true, Ordering::SeqCst);
    });
    let mut c = RawH2::connect(addr);
    let mut took = Vec::new();
    let mut id = 1;
    while took.len() < 200 && !(done.load(Ordering::SeqCst) && took.len() >= 50) {
        let t = Instant::now();
        let f = raw_get(&mut c, id, "/fixed").expect("answered");
        assert_eq!(f.kind, h2raw::HEADERS);
        took.push(t.elapsed());
        id += 2;
        std::thread::sleep(Duration::from_millis(5));
    }
    abuser.join().unwrap();
    took.sort();
    took[took.len() * 99 / 100]
}

fn config(http2: &str, extra: &str) -> String {
    format!(
        r#"
[[listener]]
listen = "127.0.0.1:0"
http2 = true
[http2]
{http2}
{extra}
[[route]]
path = "/fixed"
handler = "respond"
body = "fixed\n"
[[route]]
path = "/"
handler = "static"
root = "{{dir}}"
"#
    )
}

#[test]
fn rapid_reset_closes_the_connection_past_its_budget_and_others_stay_fast() {
    let silent = Upstream::start(|_| Reply::Silent);
    let pier = Pier::with_config(
        &config(
            "max_client_resets = 20",
            &format!(
                "[[upstream]]\nname = \"slow\"\nservers = [{{ address = \"{}\" }}]\n\
                 [[route]]\npath = \"/slow\"\nhandler = \"proxy\"\nupstream = \"slow\"\n",
                silent.addr
            ),
        ),
        &[],
    );
    let addr = pier.addr();
    let p99 = p99_during(addr, move || {
        let mut c = RawH2::connect(addr);
        let mut sent = 0;
        for i in 0..200u32 {
            let id = 1 + 2 * i;
            let headers = frame(
                h2raw::HEADERS,
                h2raw::END_HEADERS | h2raw::END_STREAM,
                id,
                &block(&get_fields("/slow")),
            );
            if c.try_send(&headers).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
            if c.try_send(&frame(h2raw::RST_STREAM, 0, id, &8u32.to_be_bytes()))
                .is_err()
            {
                break;
            }
            sent += 1;
        }
        let goaway = c
            .wait_for(Duration::from_secs(5), |f| f.kind == h2raw::GOAWAY)
            .expect("a GOAWAY");
        assert_eq!(goaway.error_code(), Some(11), "ENHANCE_YOUR_CALM");
        assert!(c.closed_within(Duration::from_secs(5)));
        assert!(sent < 200, "the server took all {sent} resets");
    });
    assert!(
        p99 < Duration::from_millis(50),
        "p99 {p99:?} during the flood"
    );
    // The handlers' work went with the resets: no upstream request piles up.
    assert!(
        silent.accepts() <= 40,
        "{} upstream connections",
        silent.accepts()
    );
}

#[test]
fn continuation_and_empty_data_floods_end_the_connection() {
    let pier = Pier::with_config(&config("", ""), &[]);
    let addr = pier.addr();
    // CONTINUATION frames that never end the head.
    let mut c = RawH2::connect(addr);
    c.send(&frame(h2raw::HEADERS, 0, 1, &block(&get_fields("/fixed"))));
    let junk = block(&[("x-junk", &"a".repeat(1000))]);
    let mut written = 0usize;
    for _ in 0..5000 {
        if c.try_send(&frame(h2raw::CONTINUATION, 0, 1, &junk))
            .is_err()
        {
            break;
        }
        written += junk.len();
    }
    assert!(
        c.closed_within(Duration::from_secs(10)),
        "after {written} bytes"
    );
    assert!(
        written < 5000 * junk.len(),
        "all {written} bytes were taken"
    );

    // Empty DATA frames on an open stream.
    let mut c = RawH2::connect(addr);
    let mut fields = get_fields("/fixed");
    fields[0] = (":method", "POST");
    c.send(&frame(
        h2raw::HEADERS,
        h2raw::END_HEADERS,
        1,
        &block(&fields),
    ));
    let empty = frame(h2raw::DATA, 0, 1, &[]);
    for _ in 0..100_000 {
        if c.try_send(&empty).is_err() {
            break;
        }
    }
    let goaway = c.wait_for(Duration::from_secs(5), |f| f.kind == h2raw::GOAWAY);
    assert!(
        goaway.is_some_and(|g| g.error_code() != Some(0)),
        "no GOAWAY"
    );
    assert!(c.closed_within(Duration::from_secs(5)));
}

#[test]
fn priority_and_window_update_floods_end_the_connection_and_others_stay_fast() {
    let pier = Pier::with_config(&config("", ""), &[]);
    let addr = pier.addr();
    for kind in [h2raw::PRIORITY, h2raw::WINDOW_UPDATE] {
        let p99 = p99_during(addr, move || {
            let mut c = RawH2::connect(addr);
            // PRIORITY of idle stream 1 on stream 0; a connection window
            // raised by one byte at a time.
            let one = if kind == h2raw::PRIORITY {
                frame(kind, 0, 1, &[0, 0, 0, 0, 16])
            } else {
                frame(kind, 0, 0, &1u32.to_be_bytes())
            };
            let batch: Vec<u8> = one.iter().copied().cycle().take(one.len() * 100).collect();
            let mut sent = 0;
            // 100,000 frames: fifty times the default max_inert_frames.
            for _ in 0..1000 {
                if c.try_send(&batch).is_err() {
                    break;
                }
                sent += 100;
                std::thread::sleep(Duration::from_micros(200));
            }
            let goaway = c
                .wait_for(Duration::from_secs(5), |f| f.kind == h2raw::GOAWAY)
                .expect("a GOAWAY");
            assert_eq!(goaway.error_code(), Some(11), "ENHANCE_YOUR_CALM");
            assert!(c.closed_within(Duration::from_secs(5)));
            assert!(sent < 100_000, "the server took all {sent} frames");
        });
        assert!(
            p99 < Duration::from_millis(50),
            "p99 {p99:?} during the flood of frame type {kind}"
        );
    }
}

#[test]
fn a_download_answered_by_a_window_update_per_data_frame_is_not_a_flood() {
    let pier = Pier::with_config(&config("max_inert_frames = 100", ""), &[]);
    let big: Vec<u8> = (0..4_000_000).map(|i| (i % 251) as u8).collect();
    std::fs::write(pier.root().join("big.bin"), &big).unwrap();
    let mut c = RawH2::connect(pier.addr());
    c.send(&frame(
        h2raw::HEADERS,
        h2raw::END_HEADERS | h2raw::END_STREAM,
        1,
        &block(&get_fields("/big.bin")),
    ));
    let (mut got, mut data_frames) = (0usize, 0);
    loop {
        let f = c
            .next_frame(Duration::from_secs(10))
            .expect("the download goes on");
        assert_ne!(f.kind, h2raw::GOAWAY, "{f:?}");
        if f.kind != h2raw::DATA {
            continue;
        }
        got += f.payload.len();
        data_frames += 1;
        if f.flags & h2raw::END_STREAM != 0 {
            break;
        }
        // What some clients do: give back each DATA frame at once, on the
        // stream and on the connection.
        let n = (f.payload.len() as u32).to_be_bytes();
        let mut updates = frame(h2raw::WINDOW_UPDATE, 0, 1, &n);
        updates.extend(frame(h2raw::WINDOW_UPDATE, 0, 0, &n));
        if !f.payload.is_empty() {
            c.send(&updates);
        }
    }
    assert_eq!(got, big.len());
    assert!(
        data_frames > 100,
        "{data_frames} DATA frames, fewer than the budget"
    );
    // The connection is still good.
    assert_eq!(raw_get(&mut c, 3, "/fixed").unwrap().kind, h2raw::HEADERS);
}

#[test]
fn a_client_that_opens_its_window_a_byte_at_a_time_is_cut_off() {
    // CVE-2019-9511: once the first window is spent, the client grants one
    // byte at a time, on the stream and on the connection.
    let pier = Pier::with_config(&config("", ""), &[]);
    std::fs::write(pier.root().join("big.bin"), vec![1u8; 1 << 20]).unwrap();
    let mut c = RawH2::connect(pier.addr());
    c.send(&frame(
        h2raw::HEADERS,
        h2raw::END_HEADERS | h2raw::END_STREAM,
        1,
        &block(&get_fields("/big.bin")),
    ));
    let mut window = 65_535i64;
    let mut tiny = 0;
    let goaway = loop {
        let f = c
            .next_frame(Duration::from_secs(10))
            .expect("a DATA frame or GOAWAY");
        if f.kind == h2raw::GOAWAY {
            break f;
        }
        if f.kind != h2raw::DATA {
            continue;
        }
        assert_eq!(
            f.flags & h2raw::END_STREAM,
            0,
            "the dribble is not served whole"
        );
        window -= f.payload.len() as i64;
        tiny += usize::from(f.payload.len() < 1024);
        assert!(tiny <= 200, "{tiny} tiny DATA frames and counting");
        if window == 0 {
            let one = 1u32.to_be_bytes();
            let mut updates = frame(h2raw::WINDOW_UPDATE, 0, 1, &one);
            updates.extend(frame(h2raw::WINDOW_UPDATE, 0, 0, &one));
            c.send(&updates);
            window = 1;
        }
    };
    assert_eq!(goaway.error_code(), Some(11), "ENHANCE_YOUR_CALM");
    assert!(tiny >= 100, "the budget lets a few through: {tiny}");
    assert!(c.closed_within(Duration::from_secs(5)));

    // A client whose windows hold the whole body is served whole.
    let mut c = RawH2::connect(pier.addr());
    // INITIAL_WINDOW_SIZE of 2 MiB, and the connection's window raised.
    c.send(&frame(h2raw::SETTINGS, 0, 0, &[0, 4, 0, 0x20, 0, 0]));
    c.send(&frame(
        h2raw::WINDOW_UPDATE,
        0,
        0,
        &(1u32 << 20).to_be_bytes(),
    ));
    assert_eq!(raw_get_body(&mut c, 1, "/big.bin"), 1 << 20);
}

/// Sends one GET and reads its whole body; returns its length.
fn raw_get_body(c: &mut RawH2, stream: u32, path: &str) -> usize {
    c.send(&frame(
        h2raw::HEADERS,
        h2raw::END_HEADERS | h2raw::END_STREAM,
        stream,
        &block(&get_fields(path)),
    ));
    let mut got = 0;
    loop {
        let f = c.next_frame(Duration::from_secs(10)).expect("the body");
        assert_ne!(f.kind, h2raw::GOAWAY, "{f:?}");
        if f.kind == h2raw::DATA && f.stream == stream {
            got += f.payload.len();
            if f.flags & h2raw::END_STREAM != 0 {
                return got;
            }
        }
    }
}

#[test]
fn ping_and_settings_floods_whose_acks_are_never_read_hold_little_memory() {
    let pier = Pier::with_config(&config("", ""), &[]);
    let addr = pier.addr();
    let before = rss_kib(pier.pid());
    for kind in [h2raw::PING, h2raw::SETTINGS] {
        let p99 = p99_during(addr, move || {
            let c = RawH2::connect(addr);
            let mut s = c.stream;
            s.set_write_timeout(Some(Duration::from_millis(500)))
                .unwrap();
            let payload: &[u8] = if kind == h2raw::PING { &[7; 8] } else { &[] };
            let one = frame(kind, 0, 0, payload);
            let many: Vec<u8> = one.iter().copied().cycle().take(one.len() * 1000).collect();
            let start = Instant::now();
            let mut sent = 0usize;
            // The server stops reading once acks wait: writes stall and time out.
            while start.elapsed() < Duration::from_secs(3) {
                match s.write(&many) {
                    Ok(n) => sent += n,
                    Err(_) => break,
                }
            }
            assert!(sent < 64 << 20, "{sent} bytes of frames taken");
            // Closed for the flood rather than left waiting.
            s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            let mut sink = [0u8; 65536];
            let closed = loop {
                match std::io::Read::read(&mut s, &mut sink) {
                    Ok(0) => break true,
                    Ok(_) => {}
                    Err(e) => break e.kind() != std::io::ErrorKind::WouldBlock,
                }
            };
            assert!(closed, "the flooding connection is still open");
        });
        assert!(
            p99 < Duration::from_millis(50),
            "p99 {p99:?} during the flood"
        );
    }
    let grew = rss_kib(pier.pid()).saturating_sub(before);
    assert!(grew < 32 * 1024, "RSS grew by {grew} KiB");
}

#[test]
fn a_client_that_never_reads_holds_a_stream_for_the_write_timeout_only() {
    let pier = Pier::with_config(
        &config(
            "max_send_buffer = 16384",
            "[http]\nwrite_timeout = \"1s\"\n",
        ),
        &[],
    );
    let big: Vec<u8> = (0..4_000_000).map(|i| (i % 251) as u8).collect();
    std::fs::write(pier.root().join("big.bin"), &big).unwrap();
    let before = rss_kib(pier.pid());
    // The client's windows stay at zero: nothing can be sent.
    let mut c = RawH2::connect(pier.addr());
    c.send(&frame(h2raw::SETTINGS, 0, 0, &[0, 4, 0, 0, 0, 0]));
    let started = Instant::now();
    for i in 0..20u32 {
        c.send(&frame(
            h2raw::HEADERS,
            h2raw::END_HEADERS | h2raw::END_STREAM,
            1 + 2 * i,
            &block(&get_fields("/big.bin")),
        ));
    }
    let mut resets = 0;
    while resets < 20 {
        let Some(f) = c.next_frame(Duration::from_secs(5)) else {
            break;
        };
        if f.kind == h2raw::RST_STREAM {
            assert_eq!(f.error_code(), Some(8), "CANCEL");
            resets += 1;
        }
    }
    assert_eq!(resets, 20, "every stalled stream is reset");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(4),
        "{took:?}"
    );
    let grew = rss_kib(pier.pid()).saturating_sub(before);
    assert!(
        grew < 16 * 1024,
        "RSS grew by {grew} KiB for 20 stalled 4 MB downloads"
    );
    // The connection itself is still good.
    assert_eq!(raw_get(&mut c, 41, "/fixed").unwrap().kind, h2raw::HEADERS);
}

#[test]
fn idle_connections_and_spent_ones_get_goaway_and_close() {
    let pier = Pier::with_config(
        &config("idle_timeout = \"300ms\"\nmax_requests = 3", ""),
        &[],
    );
    // Idle after one request: GOAWAY (no error), then close.
    let mut c = RawH2::connect(pier.addr());
    assert_eq!(raw_get(&mut c, 1, "/fixed").unwrap().kind, h2raw::HEADERS);
    let t = Instant::now();
    let goaway = c
        .wait_for(Duration::from_secs(3), |f| f.kind == h2raw::GOAWAY)
        .expect("an idle GOAWAY");
    assert_eq!(goaway.error_code(), Some(0));
    assert!(
        t.elapsed() >= Duration::from_millis(200),
        "{:?}",
        t.elapsed()
    );
    assert!(c.closed_within(Duration::from_secs(3)));

    // Three requests, then GOAWAY naming the last one taken; the fourth is
    // not served.
    let mut c = RawH2::connect(pier.addr());
    for id in [1, 3, 5, 7] {
        c.send(&frame(
            h2raw::HEADERS,
            h2raw::END_HEADERS | h2raw::END_STREAM,
            id,
            &block(&get_fields("/fixed")),
        ));
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut answered = Vec::new();
    let mut refused = Vec::new();
    let mut goaway = false;
    while let Some(f) = c.next_frame(Duration::from_secs(3)) {
        match f.kind {
            h2raw::HEADERS => answered.push(f.stream),
            h2raw::RST_STREAM => refused.push((f.stream, f.error_code())),
            h2raw::GOAWAY => goaway = true,
            _ => {}
        }
    }
    assert_eq!(answered, [1, 3, 5]);
    assert_eq!(refused, [(7, Some(7))], "REFUSED_STREAM, safe to retry");
    assert!(goaway, "no GOAWAY after max_requests");
}

#[test]
fn stream_count_and_head_size_limits_are_announced_and_enforced() {
    let pier = Pier::with_config(
        &config(
            "max_concurrent_streams = 4",
            "[http]\nmax_head_bytes = 4096\n",
        ),
        &[],
    );
    let mut c = RawH2::connect(pier.addr());
    let settings = c
        .wait_for(Duration::from_secs(3), |f| {
            f.kind == h2raw::SETTINGS && f.flags & h2raw::ACK == 0
        })
        .unwrap();
    let pairs: Vec<(u16, u32)> = settings
        .payload
        .chunks(6)
        .map(|p| {
            (
                u16::from_be_bytes([p[0], p[1]]),
                u32::from_be_bytes([p[2], p[3], p[4], p[5]]),
            )
        })
        .collect();
    assert!(pairs.contains(&(3, 4)), "{pairs:?}");
    assert!(pairs.contains(&(6, 4096)), "{pairs:?}");
    // A head over max_head_bytes: 431 (or the stream refused), and the
    // connection lives on.
    let mut fields = get_fields("/fixed");
    let long = "b".repeat(8000);
    fields.push(("x-long", &long));
    c.send(&frame(
        h2raw::HEADERS,
        h2raw::END_HEADERS | h2raw::END_STREAM,
        1,
        &block(&fields),
    ));
    let f = c
        .wait_for(Duration::from_secs(5), |f| f.stream == 1)
        .unwrap();
    // ":status: 431", its value plain or Huffman-coded (RFC 7541 Appendix B).
    let status_431 = f.payload.windows(3).any(|w| w == b"431")
        || f.payload.windows(4).any(|w| w == [0x83, 0x69, 0x90, 0xff]);
    assert!(
        f.kind == h2raw::RST_STREAM || f.kind == h2raw::HEADERS && status_431,
        "{f:?}"
    );
    assert_eq!(raw_get(&mut c, 3, "/fixed").unwrap().kind, h2raw::HEADERS);
}

#[test]
fn a_drain_sends_goaway_and_finishes_the_streams_in_flight() {
    let slow = Upstream::start(|_| {
        std::thread::sleep(Duration::from_millis(800));
        common::upstream::ok("slow answer\n")
    });
    let mut pier = Pier::with_config(
        &config(
            "",
            &format!(
                "[[upstream]]\nname = \"slow\"\nservers = [{{ address = \"{}\" }}]\n\
                 [[route]]\npath = \"/slow\"\nhandler = \"proxy\"\nupstream = \"slow\"\n",
                slow.addr
            ),
        ),
        &[],
    );
    let mut c = RawH2::connect(pier.addr());
    c.send(&frame(
        h2raw::HEADERS,
        h2raw::END_HEADERS | h2raw::END_STREAM,
        1,
        &block(&get_fields("/slow")),
    ));
    std::thread::sleep(Duration::from_millis(200));
    pier.signal(rustix::process::Signal::TERM);
    let mut goaway = false;
    let mut answered = false;
    let mut ended = false;
    while let Some(f) = c.next_frame(Duration::from_secs(5)) {
        match f.kind {
            h2raw::GOAWAY => goaway = true,
            h2raw::HEADERS if f.stream == 1 => answered = true,
            h2raw::DATA if f.stream == 1 && f.flags & h2raw::END_STREAM != 0 => ended = true,
            _ => {}
        }
        if goaway && ended {
            break;
        }
    }
    assert!(goaway, "no GOAWAY on drain");
    assert!(answered && ended, "the stream in flight was cut");
    assert!(c.closed_within(Duration::from_secs(5)));
    assert_eq!(pier.wait_exit(Duration::from_secs(10)), Some(0));
}

/// A drain that begins between a client's connect and its first request
/// (a binary upgrade does this to every connection the old process accepted
/// last): the first GOAWAY names the highest stream id, so the request the
/// client sent before it read the GOAWAY is answered, and the final GOAWAY
/// follows the client's ack of the PING sent with the first.
#[test]
fn a_drain_answers_the_request_the_client_sent_before_it_saw_the_goaway() {
    let mut pier = Pier::with_config(&config("", ""), &[]);
    let mut c = RawH2::connect(pier.addr());
    c.wait_for(Duration::from_secs(5), |f| f.kind == h2raw::SETTINGS)
        .expect("the server's SETTINGS");
    pier.signal(rustix::process::Signal::TERM);
    let first = c
        .wait_for(Duration::from_secs(5), |f| f.kind == h2raw::GOAWAY)
        .expect("a GOAWAY on drain");
    assert_eq!(first.error_code(), Some(0));
    assert_eq!(
        u32::from_be_bytes(first.payload[..4].try_into().unwrap()),
        (1 << 31) - 1,
        "the first GOAWAY takes every stream already on its way"
    );
    let ping = c
        .wait_for(Duration::from_secs(5), |f| f.kind == h2raw::PING)
        .expect("a PING with the first GOAWAY");
    c.send(&frame(
        h2raw::HEADERS,
        h2raw::END_HEADERS | h2raw::END_STREAM,
        1,
        &block(&get_fields("/fixed")),
    ));
    let answer = c
        .wait_for(Duration::from_secs(5), |f| f.stream == 1)
        .expect("stream 1 answered");
    assert_eq!(answer.kind, h2raw::HEADERS, "{answer:?}");
    c.send(&frame(h2raw::PING, h2raw::ACK, 0, &ping.payload));
    let last = c
        .wait_for(Duration::from_secs(5), |f| f.kind == h2raw::GOAWAY)
        .expect("the final GOAWAY after the PING's ack");
    assert_eq!(u32::from_be_bytes(last.payload[..4].try_into().unwrap()), 1);
    assert!(c.closed_within(Duration::from_secs(5)));
    assert_eq!(pier.wait_exit(Duration::from_secs(10)), Some(0));
}

#[test]
fn a_reload_sends_goaway_to_the_old_configuration_s_connections() {
    let pier = Pier::with_config(&config("", "[http]\nkeepalive_timeout = \"300ms\"\n"), &[]);
    let mut old = RawH2::connect(pier.addr());
    assert_eq!(raw_get(&mut old, 1, "/fixed").unwrap().kind, h2raw::HEADERS);
    pier.signal(rustix::process::Signal::HUP);
    pier.wait_log("configuration reloaded", Duration::from_secs(10))
        .expect("reloaded");
    // One keepalive_timeout after the reload the old generation drains.
    let goaway = old
        .wait_for(Duration::from_secs(5), |f| f.kind == h2raw::GOAWAY)
        .expect("a GOAWAY after the reload");
    assert_eq!(goaway.error_code(), Some(0));
    assert!(old.closed_within(Duration::from_secs(5)));
    let mut new = RawH2::connect(pier.addr());
    assert_eq!(raw_get(&mut new, 1, "/fixed").unwrap().kind, h2raw::HEADERS);
}

#[test]
fn max_connections_counts_http2_connections() {
    let pier = Pier::with_config(
        &config("", "[server]\nworkers = 1\nmax_connections = 2\n"),
        &[],
    );
    let mut first = RawH2::connect(pier.addr());
    let mut second = RawH2::connect(pier.addr());
    assert_eq!(
        raw_get(&mut first, 1, "/fixed").unwrap().kind,
        h2raw::HEADERS
    );
    assert_eq!(
        raw_get(&mut second, 1, "/fixed").unwrap().kind,
        h2raw::HEADERS
    );
    // The third waits in the backlog while two h2 connections are open...
    let mut third = RawH2::connect(pier.addr());
    third.send(&frame(
        h2raw::HEADERS,
        h2raw::END_HEADERS | h2raw::END_STREAM,
        1,
        &block(&get_fields("/fixed")),
    ));
    assert!(third.next_frame(Duration::from_millis(700)).is_none());
    // ...and is served once one of them closes.
    drop(first);
    let answer = third.wait_for(Duration::from_secs(5), |f| f.stream == 1);
    assert_eq!(answer.map(|f| f.kind), Some(h2raw::HEADERS));
}
