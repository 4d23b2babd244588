//! HTTP/3 limits under abuse, with aioquic driven as an abusive client
//! (tests/http3/h3_abuse.py): a client is held to `[http3]
//! max_concurrent_streams`, one that resets streams before their answers
//! (the QUIC form of rapid reset) is closed past `max_client_resets`, and
//! one that opens streams and never reads costs bounded memory, streams and
//! frames of unknown types are set aside, and floods of tiny STREAM or DATA
//! frames, unknown frames or unknown streams are closed past `[http3]
//! frame_allowance`. Each time another client is still served.

mod common;

use std::io::{BufRead, BufReader};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::aioquic::{abuse, present as aioquic_present, run as aioquic};
use common::upstream::{Reply, Upstream};
use common::Pier;
use serde_json::Value;

/// One worker, a TLS listener, a `respond` route at /, files under /files/
/// and, when given, a proxy route under /up/ to `origin`; `extra` at the
/// end.
fn config(origin: Option<std::net::SocketAddr>, extra: &str) -> String {
    let proxy = origin.map_or(String::new(), |o| {
        format!(
            "[[upstream]]\nname = \"origin\"\nservers = [{{ address = \"{o}\" }}]\n\
             [[route]]\npath = \"/up/\"\nhandler = \"proxy\"\nupstream = \"origin\"\n"
        )
    });
    format!(
        r#"
[server]
workers = 1
[[listener]]
listen = "127.0.0.1:0"
tls = {{ self_signed = true }}
{proxy}
[[route]]
path = "/files/"
handler = "static"
root = "{{dir}}"
[[route]]
path = "/"
handler = "respond"
status = 200
body = "root\n"
{extra}
"#
    )
}

/// Another client's request still answered, and quickly.
fn another_client_is_served(pier: &Pier) {
    let started = std::time::Instant::now();
    let v = aioquic(pier.https[0], &["GET", "/"]);
    assert_eq!(v["answers"][0]["status"], 200, "{v}");
    // A fresh process, connection and handshake in well under this.
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_client_asking_for_more_streams_than_allowed_is_held_to_the_limit_the_settings_announce() {
    if !aioquic_present() {
        return;
    }
    let now = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (n, m) = (now.clone(), most.clone());
    let origin = Upstream::start(move |_| {
        let at = n.fetch_add(1, Ordering::SeqCst) + 1;
        m.fetch_max(at, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(150));
        n.fetch_sub(1, Ordering::SeqCst);
        Reply::Http(200, Vec::new(), b"slow".to_vec())
    });
    let pier = Pier::with_config(
        &config(
            Some(origin.addr),
            "[http]\nmax_head_bytes = 20000\n[http3]\nmax_concurrent_streams = 4\n\
             qpack_table_capacity = 1024\nqpack_blocked_streams = 3",
        ),
        &[],
    );
    let v = abuse(pier.https[0], &["streams", "16", "/up/slow"]);
    assert_eq!(v["announced"], 4, "{v}");
    // SETTINGS_QPACK_MAX_TABLE_CAPACITY, SETTINGS_MAX_FIELD_SECTION_SIZE,
    // SETTINGS_QPACK_BLOCKED_STREAMS.
    assert_eq!(v["settings"]["1"], 1024, "{v}");
    assert_eq!(v["settings"]["6"], 20000, "{v}");
    assert_eq!(v["settings"]["7"], 3, "{v}");
    let statuses = v["statuses"].as_array().unwrap();
    assert_eq!(statuses.len(), 16);
    assert!(statuses.iter().all(|s| s == 200), "{v}");
    let most = most.load(Ordering::SeqCst);
    assert!((2..=4).contains(&most), "{most} requests at once upstream");
}

#[test]
fn a_client_resetting_streams_before_their_answers_is_closed_past_its_budget() {
    if !aioquic_present() {
        return;
    }
    let pier = Pier::with_config(
        &config(
            None,
            "[admin]\nlisten = \"127.0.0.1:0\"\n[http3]\nmax_client_resets = 50",
        ),
        &[],
    );
    // Under the budget the connection stays.
    let v = abuse(pier.https[0], &["reset", "40", "/"]);
    assert_eq!(v["sent"], 40, "{v}");
    assert_eq!(v["closed_with"], Value::Null, "{v}");
    // Past it: H3_EXCESSIVE_LOAD, long before the client is done.
    let v = abuse(pier.https[0], &["reset", "2000", "/"]);
    assert_eq!(v["closed_with"], 0x107, "{v}");
    let sent = v["sent"].as_u64().unwrap();
    assert!((50..2000).contains(&sent), "{v}");
    another_client_is_served(&pier);
    let admin = pier.admin.expect("admin listener");
    let r = common::get(admin, "GET /metrics HTTP/1.1\r\nHost: admin\r\n\r\n");
    let text = String::from_utf8(r.body).unwrap();
    assert!(
        text.contains("\npier_http3_reset_floods_total 1\n"),
        "{text}"
    );
}

#[test]
fn a_client_that_opens_streams_and_never_reads_costs_bounded_memory() {
    if !aioquic_present() {
        return;
    }
    let pier = Pier::with_config(&config(None, "[admin]\nlisten = \"127.0.0.1:0\""), &[]);
    let files = pier.root().join("files");
    std::fs::create_dir_all(&files).unwrap();
    let big: Vec<u8> = (0..8u32 << 20).map(|i| (i % 251) as u8).collect();
    std::fs::write(files.join("big.bin"), &big).unwrap();
    drop(big);
    another_client_is_served(&pier);
    let before = common::rss_kib(pier.pid());
    // 100 streams of 8 MiB each: 800 MiB asked for, none of it read.
    let mut child = common::aioquic::spawn(
        "http3/h3_abuse.py",
        pier.https[0],
        &["noread", "100", "/files/big.bin", "3"],
    );
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "holding");
    std::thread::sleep(Duration::from_secs(1));
    let during = common::rss_kib(pier.pid());
    // Every stream is being answered, none can go on.
    let admin = pier.admin.expect("admin listener");
    let r = common::get(admin, "GET /metrics HTTP/1.1\r\nHost: admin\r\n\r\n");
    let text = String::from_utf8(r.body).unwrap();
    assert!(text.contains("\npier_http3_streams_open 100\n"), "{text}");
    another_client_is_served(&pier);
    assert!(child.wait().unwrap().success());
    let grown = during.saturating_sub(before);
    eprintln!("resident memory {before} KiB before, {during} KiB while 100 streams are held");
    // The connection's queue ([http3] max_send_buffer, 4 MiB) and what the
    // client's windows let QUIC hold; 100 streams of 256 KiB each would be
    // 25 MiB.
    assert!(
        grown < 12 * 1024,
        "{grown} KiB more while held ({before} KiB before)"
    );
}

#[test]
fn http3_limits_out_of_range_name_the_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h3.toml");
    std::fs::write(
        &path,
        "[http3]\nmax_concurrent_streams = 100\nmax_uni_streams = 2\n\
         [[listener]]\nlisten = \"127.0.0.1:1\"\n[[route]]\nhandler = \"respond\"\n",
    )
    .unwrap();
    common::assert_config_error(&path, 3, "http3.max_uni_streams");
}

#[test]
fn an_idle_connection_is_closed_at_the_http3_idle_timeout() {
    if !aioquic_present() {
        return;
    }
    let pier = Pier::with_config(&config(None, "[http3]\nidle_timeout = \"1s\""), &[]);
    let started = std::time::Instant::now();
    let out = common::aioquic::output(pier.https[0], 30, &["GET", "/", "--wait-close", "10"]);
    let text = String::from_utf8_lossy(&out.stdout);
    // "answered", then the report.
    let v: Value = serde_json::from_str(text.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(v["answers"][0]["status"], 200, "{v}");
    assert_ne!(v["closed"], Value::Null, "{v}");
    assert!(started.elapsed() < Duration::from_secs(8));
}

#[test]
fn answers_larger_than_the_connection_queue_all_complete_in_parallel() {
    if !aioquic_present() {
        return;
    }
    let pier = Pier::with_config(&config(None, "[http3]\nmax_send_buffer = \"64K\""), &[]);
    let files = pier.root().join("files");
    std::fs::create_dir_all(&files).unwrap();
    let big: Vec<u8> = (0..1u32 << 20).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(files.join("big.bin"), &big).unwrap();
    let path = "/files/big.bin";
    let mut args = vec!["--parallel"];
    for _ in 0..6 {
        args.extend(["GET", path]);
    }
    let v = aioquic(pier.https[0], &args);
    let answers = v["answers"].as_array().unwrap();
    assert_eq!(answers.len(), 6);
    for a in answers {
        assert_eq!(a["status"], 200);
        assert!(common::aioquic::body(a) == big, "a whole, intact body");
    }
}

#[test]
fn unknown_stream_types_are_stopped_and_unknown_frames_skipped() {
    if !aioquic_present() {
        return;
    }
    let pier = Pier::with_config(&config(None, ""), &[]);
    let v = abuse(pier.https[0], &["unknown", "500", "/"]);
    // H3_STREAM_CREATION_ERROR: the stream is not read (RFC 9114 §6.2).
    assert_eq!(v["stopped_uni"], 0x103, "{v}");
    assert_eq!(v["status"], 200, "{v}");
    another_client_is_served(&pier);
}

/// The abusive client runs `args` over and over, each time on a fresh
/// connection, while a well-behaved client asks for / on connections of
/// its own: each of the latter's requests is answered, each abusive
/// connection is closed with H3_EXCESSIVE_LOAD, and each closing is
/// counted in `pier_http3_frame_floods_total`.
fn flood_is_closed_while_another_client_is_served(pier: &Pier, args: [&str; 3]) {
    let addr = pier.https[0];
    let args = args.map(String::from);
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    let abuser = std::thread::spawn(move || {
        let mut reports = Vec::new();
        while reports.len() < 2 || (!stopped.load(Ordering::SeqCst) && reports.len() < 20) {
            reports.push(abuse(addr, &args.each_ref().map(String::as_str)));
        }
        reports
    });
    let mut gets = Vec::new();
    for _ in 0..20 {
        gets.extend(["GET", "/"]);
    }
    for _ in 0..3 {
        let v = aioquic(addr, &gets);
        let answers = v["answers"].as_array().unwrap();
        assert_eq!(answers.len(), 20, "{v}");
        assert!(answers.iter().all(|a| a["status"] == 200), "{v}");
    }
    stop.store(true, Ordering::SeqCst);
    let reports = abuser.join().unwrap();
    for v in &reports {
        assert_eq!(v["closed_with"], 0x107, "{v}");
    }
    let admin = pier.admin.expect("admin listener");
    let r = common::get(admin, "GET /metrics HTTP/1.1\r\nHost: admin\r\n\r\n");
    let text = String::from_utf8(r.body).unwrap();
    let floods = common::metric(&text, "pier_http3_frame_floods_total");
    assert_eq!(floods, Some(reports.len() as f64), "{text}");
}

/// Pier with the default `[http3] frame_allowance` (and, with `origin`, a
/// proxy route under /up/ to an origin that reads request bodies whole):
/// the abusive client's `within` is answered 200 on a connection left
/// open, its `flood` closed while another client is served.
fn the_frame_allowance_holds(origin: bool, within: [&str; 3], flood: [&str; 3]) {
    if !aioquic_present() {
        return;
    }
    let origin =
        origin.then(|| Upstream::start(|_| Reply::Http(200, Vec::new(), b"read".to_vec())));
    let pier = Pier::with_config(
        &config(
            origin.as_ref().map(|o| o.addr),
            "[admin]\nlisten = \"127.0.0.1:0\"",
        ),
        &[],
    );
    let v = abuse(pier.https[0], &within);
    assert_eq!(v["status"], 200, "{v}");
    assert_eq!(v["closed_with"], Value::Null, "{v}");
    flood_is_closed_while_another_client_is_served(&pier, flood);
}

#[test]
fn a_request_body_in_one_byte_stream_frames_is_closed_past_the_frame_allowance() {
    // A few hundred tiny STREAM frames are within; 200,000 of them, about
    // 200 to a packet, are closed long before the end.
    the_frame_allowance_holds(
        true,
        ["tiny", "300", "/up/small"],
        ["tiny", "200000", "/up/big"],
    );
}

#[test]
fn empty_and_one_byte_data_frames_are_closed_past_the_frame_allowance() {
    the_frame_allowance_holds(
        true,
        ["tinydata", "200", "/up/small"],
        ["tinydata", "100000", "/up/big"],
    );
}

#[test]
fn floods_of_unknown_frames_on_the_control_stream_are_closed_and_grease_is_not() {
    the_frame_allowance_holds(
        false,
        ["greasecontrol", "50", "/"],
        ["greasecontrol", "50000", "/"],
    );
}

#[test]
fn unknown_stream_types_opened_over_and_over_are_closed_and_grease_is_not() {
    the_frame_allowance_holds(false, ["greaseuni", "3", "/"], ["greaseuni", "2000", "/"]);
}

#[test]
fn http3_frame_allowance_out_of_range_names_the_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h3.toml");
    std::fs::write(
        &path,
        "[http3]\nframe_allowance = 10\n\
         [[listener]]\nlisten = \"127.0.0.1:1\"\n[[route]]\nhandler = \"respond\"\n",
    )
    .unwrap();
    common::assert_config_error(&path, 2, "http3.frame_allowance");
}
