//! `pier bench http --h3` end to end: the real binary, whose HTTP/3 client is
//! the `h3` crate over quinn, against a real `pier serve` with TLS (HTTP/3 is
//! on by default on TLS listeners), so the counts in its report can be
//! checked exactly; and against targets that cannot answer, for the error
//! sentences and exit codes `--h2` gives.

mod common;

use std::net::UdpSocket;

use common::bench_run::{bench, bench_json, errors_total};
use common::tls::Pki;
use common::Pier;

/// Pier with a certificate for `localhost` signed by `pki`'s CA, a 13-byte
/// `/hello`, files under `/files/` from its root and a 404 elsewhere, two
/// workers.
fn serve(pki: &Pki) -> Pier {
    serve_with(pki, "")
}

/// [`serve`] with `extra` tables first.
fn serve_with(pki: &Pki, extra: &str) -> Pier {
    let (cert, key) = pki.server("pier", "localhost", &["localhost"], None);
    Pier::with_config(
        &format!(
            r#"
[server]
workers = 2
{extra}
[[listener]]
listen = "127.0.0.1:0"
tls = {{ cert = "{}", key = "{}" }}
[[route]]
path = "/hello"
handler = "respond"
status = 200
body = "Hello, World!"
[[route]]
path = "/files/"
handler = "static"
root = "{{dir}}"
"#,
            cert.display(),
            key.display()
        ),
        &[],
    )
}

#[test]
fn a_run_against_pier_counts_every_answer_on_c_connections_of_m_streams() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "bench h3 ca");
    let pier = serve(&pki);
    let ca = pki.ca_path();
    let url = format!("https://localhost:{}/hello", pier.https[0].port());
    let v = bench_json(&[
        "http",
        "--h3",
        "-m",
        "4",
        "-c",
        "3",
        "-n",
        "120",
        "--cacert",
        ca.to_str().unwrap(),
        &url,
    ]);
    assert_eq!(v["protocol"], "h3", "{v}");
    assert_eq!(v["streams_per_connection"], 4, "{v}");
    assert_eq!(v["requests"], 120, "{v}");
    assert_eq!(v["status"]["200"], 120, "{v}");
    assert_eq!(errors_total(&v), 0, "{v}");
    assert_eq!(v["tls"]["handshakes"], 3, "{v}");
    assert_eq!(v["connect_us"]["count"], 3, "{v}");
    // UDP payload: at least every body, and every request's path.
    let read = v["bytes"]["read"].as_u64().unwrap();
    let written = v["bytes"]["written"].as_u64().unwrap();
    assert!(read > 120 * 13, "{v}");
    assert!(written > 120 * "/hello".len() as u64, "{v}");
}

#[test]
fn new_conn_makes_a_full_handshake_for_every_request() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "bench h3 ca");
    let pier = serve(&pki);
    let ca = pki.ca_path();
    let url = format!("https://localhost:{}/hello", pier.https[0].port());
    let v = bench_json(&[
        "http",
        "--h3",
        "--new-conn",
        "-c",
        "2",
        "-n",
        "30",
        "--cacert",
        ca.to_str().unwrap(),
        &url,
    ]);
    assert_eq!(v["status"]["200"], 30, "{v}");
    assert_eq!(errors_total(&v), 0, "{v}");
    assert_eq!(v["tls"]["handshakes"], 30, "{v}");
    assert_eq!(v["tls"]["resumed"], 0, "{v}");
    assert_eq!(v["connect_us"]["count"], 30, "{v}");
}

/// Regression: every Retry after the first went out glued behind the one
/// before it (the endpoint's packet buffer was not cleared), so clients
/// past the first discarded it and never got in. quinn's client also sends
/// its ClientHello in two Initial datagrams (a post-quantum key share),
/// each answered by a Retry of its own.
#[test]
fn with_a_retry_for_every_client_every_new_connection_gets_in() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "bench h3 ca");
    let pier = serve_with(&pki, "[http3]\nretry_above = 0");
    let ca = pki.ca_path();
    let url = format!("https://localhost:{}/hello", pier.https[0].port());
    let v = bench_json(&[
        "http",
        "--h3",
        "--new-conn",
        "-n",
        "12",
        "--cacert",
        ca.to_str().unwrap(),
        &url,
    ]);
    assert_eq!(v["status"]["200"], 12, "{v}");
    assert_eq!(errors_total(&v), 0, "{v}");
    assert_eq!(v["tls"]["handshakes"], 12, "{v}");
}

#[test]
fn a_timed_run_reports_the_protocol_and_streams_and_counts_404s_apart() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "bench h3 ca");
    let pier = serve(&pki);
    let port = pier.https[0].port();
    let out = bench(&[
        "http",
        "--h3",
        "-k",
        "--streams",
        "2",
        "-c",
        "2",
        "-d",
        "500ms",
        &format!("https://127.0.0.1:{port}/hello"),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("2 connection(s), HTTP/3, 2 stream(s) per connection"),
        "{text}"
    );
    let status = text
        .lines()
        .find(|l| l.trim_start().starts_with("status"))
        .unwrap_or_else(|| panic!("no status line: {text}"));
    assert!(status.contains("200: "), "{text}");
    assert!(!status.contains("404"), "{text}");

    // Only errors: the figures measure the error path, and the run says so.
    let out = bench(&[
        "http",
        "--h3",
        "-k",
        "-n",
        "6",
        &format!("https://127.0.0.1:{port}/missing"),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("404: 6"), "{text}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("every answer"), "{err}");
}

#[test]
fn a_large_body_that_keeps_arriving_is_not_a_timeout() {
    // 40 MB over one connection takes several times the 300 ms --timeout;
    // the watchdog must see the body arriving, not only whole responses.
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "bench h3 ca");
    let pier = serve(&pki);
    let files = pier.root().join("files");
    std::fs::create_dir_all(&files).unwrap();
    let size = 40_000_000u64;
    std::fs::write(files.join("big.bin"), vec![7u8; size as usize]).unwrap();
    let url = format!("https://127.0.0.1:{}/files/big.bin", pier.https[0].port());
    let v = bench_json(&[
        "http",
        "--h3",
        "-k",
        "-c",
        "1",
        "-n",
        "2",
        "--timeout",
        "300ms",
        &url,
    ]);
    assert_eq!(v["status"]["200"], 2, "{v}");
    assert_eq!(errors_total(&v), 0, "{v}");
    assert!(v["bytes"]["read"].as_u64().unwrap() > 2 * size, "{v}");
}

#[test]
fn a_port_where_nothing_answers_quic_is_one_clear_error() {
    // Bound and never read: datagrams to it are taken and never answered.
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let out = bench(&[
        "http",
        "--h3",
        "-k",
        "-n",
        "5",
        "--timeout",
        "500ms",
        &format!("https://127.0.0.1:{port}/"),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "cannot connect to https://127.0.0.1:{port}/ (127.0.0.1:{port}) over QUIC: no answer within"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("is HTTP/3 served on UDP port {port}?")),
        "{err}"
    );
    assert!(!err.contains("Error {") && !err.contains("Some("), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn an_untrusted_certificate_fails_the_handshake_with_advice() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "bench h3 ca");
    let pier = serve(&pki);
    let other = Pki::new(dir.path(), "another ca");
    let url = format!("https://localhost:{}/hello", pier.https[0].port());
    let out = bench(&[
        "http",
        "--h3",
        "-n",
        "3",
        "--cacert",
        other.ca_path().to_str().unwrap(),
        &url,
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("TLS handshake with"), "{err}");
    assert!(err.contains("over QUIC failed"), "{err}");
    assert!(err.contains("--cacert FILE"), "{err}");
}

#[test]
fn a_sweep_over_h3_writes_one_row_per_run() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "bench h3 ca");
    let pier = serve(&pki);
    let prefix = dir.path().join("sweep");
    let out = bench(&[
        "sweep",
        "http",
        "--h3",
        "-k",
        "-c",
        "1,2",
        "--depth",
        "1,3",
        "-d",
        "300ms",
        "-o",
        prefix.to_str().unwrap(),
        &format!("pier=https://127.0.0.1:{}/hello", pier.https[0].port()),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = std::fs::read_to_string(prefix.with_extension("csv")).unwrap();
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    assert_eq!(rows.len(), 4, "{csv}");
    for row in rows {
        let cols: Vec<&str> = row.split(',').collect();
        // requests > 0 and errors == 0 in every run.
        assert!(cols[5].parse::<u64>().unwrap() > 0, "{row}");
        assert_eq!(cols[13], "0", "{row}");
    }
    let svg = std::fs::read_to_string(prefix.with_extension("svg")).unwrap();
    assert!(
        svg.contains("pier 3 streams"),
        "the legend names the streams"
    );
}

#[test]
fn h3_flag_combinations_that_make_no_sense_are_usage_errors() {
    for args in [
        &["http", "--h3", "-n", "1", "http://127.0.0.1:1/"][..],
        &["http", "--h3", "--h2", "-n", "1", "https://127.0.0.1:1/"],
        &[
            "http",
            "--h3",
            "--new-conn",
            "--streams",
            "2",
            "-n",
            "1",
            "https://127.0.0.1:1/",
        ],
        &[
            "http",
            "--h3",
            "--depth",
            "2",
            "-n",
            "1",
            "https://127.0.0.1:1/",
        ],
        &[
            "http",
            "--h3",
            "--streams",
            "0",
            "-n",
            "1",
            "https://127.0.0.1:1/",
        ],
        &[
            "http",
            "--h3",
            "-H",
            "Connection: close",
            "-n",
            "1",
            "https://127.0.0.1:1/",
        ],
    ] {
        let out = bench(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.trim().is_empty(), "{args:?}");
    }
    let out = bench(&["http", "--h3", "-n", "1", "http://127.0.0.1:1/"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--h3 needs an https:// URL"), "{err}");
}
