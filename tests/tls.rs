//! TLS termination against a real `pier`: SNI, resumption across workers and
//! instances, mTLS, OCSP stapling, SIGHUP reload, hostile handshakes. Clients are
//! rustls (always), `openssl s_client` and curl (skipped when not installed).

mod common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::tls::{
    connect_tls, recording_client, recording_client_for, s_client, seen_subject, tls_get,
    verifying_client, Pki,
};
use common::{connect, which, Pier};
use rustls::client::Resumption;
use rustls::HandshakeKind;

const ROUTES: &str = r#"
[[route]]
path = "/"
handler = "static"
root = "{root}"
[[route]]
path = "/fixed"
handler = "respond"
body = "Hello, TLS!"
"#;

fn p(path: &Path) -> String {
    path.display().to_string()
}

/// A config with one TLS listener whose `tls` table is `tls`, two workers.
fn config(tls: &str, root: &Path) -> String {
    format!(
        "[server]\nworkers = 2\n[[listener]]\nlisten = \"127.0.0.1:0\"\n[listener.tls]\n{tls}\n{}",
        ROUTES.replace("{root}", &p(root))
    )
}

struct Setup {
    dir: tempfile::TempDir,
    pki: Pki,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "Pier Test CA");
    Setup { dir, pki }
}

fn sni_config(s: &Setup, extra: &str) -> String {
    let (a_cert, a_key) = s.pki.server("a", "a.test", &["a.test"], None);
    let (w_cert, w_key) = s
        .pki
        .server("w", "wild", &["*.w.test"], Some(&rcgen::PKCS_RSA_SHA256));
    let (d_cert, d_key) = s
        .pki
        .server("d", "fallback", &["d.test"], Some(&rcgen::PKCS_ED25519));
    config(
        &format!(
            "{extra}\n\
             [[listener.tls.certificate]]\ncert = \"{}\"\nkey = \"{}\"\n\
             [[listener.tls.certificate]]\ncert = \"{}\"\nkey = \"{}\"\n\
             [[listener.tls.certificate]]\ncert = \"{}\"\nkey = \"{}\"\ndefault = true\n",
            p(&a_cert),
            p(&a_key),
            p(&w_cert),
            p(&w_key),
            p(&d_cert),
            p(&d_key)
        ),
        s.dir.path(),
    )
}

#[test]
fn sni_picks_exact_then_wildcard_then_default() {
    let s = setup();
    let pier = Pier::with_config(&sni_config(&s, ""), &[]);
    let addr = pier.https[0];
    let (client, seen) = recording_client(true);
    for (name, want) in [
        ("a.test", "CN=a.test"),
        ("x.w.test", "CN=wild"),
        ("deeper.x.w.test", "CN=fallback"),
        ("unknown.test", "CN=fallback"),
    ] {
        let mut c = connect_tls(addr, name, &client).unwrap();
        assert_eq!(tls_get(&mut c, "/fixed").unwrap().body, b"Hello, TLS!");
        assert_eq!(seen_subject(&seen), want, "SNI {name}");
    }
    let (no_sni, seen) = recording_client(false);
    connect_tls(addr, "a.test", &no_sni).unwrap();
    assert_eq!(
        seen_subject(&seen),
        "CN=fallback",
        "no SNI gets the default"
    );

    let Some((ok, out)) = s_client(addr, &["-servername", "x.w.test"], "") else {
        eprintln!("openssl not installed; .ci/run installs it");
        return;
    };
    assert!(ok, "{out}");
    assert!(out.contains("subject=CN = wild"), "{out}");
    let (_, out) = s_client(addr, &["-servername", "a.test"], "").unwrap();
    assert!(out.contains("subject=CN = a.test"), "{out}");
}

#[test]
fn sni_required_rejects_missing_and_unknown_names() {
    let s = setup();
    let pier = Pier::with_config(&sni_config(&s, "sni_required = true"), &[]);
    let addr = pier.https[0];
    let (client, seen) = recording_client(true);
    let mut c = connect_tls(addr, "a.test", &client).unwrap();
    assert_eq!(tls_get(&mut c, "/fixed").unwrap().status, 200);
    assert_eq!(seen_subject(&seen), "CN=a.test");
    assert!(connect_tls(addr, "unknown.test", &client).is_err());
    let (no_sni, _) = recording_client(false);
    assert!(connect_tls(addr, "a.test", &no_sni).is_err());
}

#[test]
fn tls10_and_tls11_are_refused_and_12_13_accepted() {
    let s = setup();
    let pier = Pier::with_config(&sni_config(&s, ""), &[]);
    let addr = pier.https[0];
    for old in ["-tls1", "-tls1_1"] {
        // Security level 0 lets this OpenSSL offer the old versions at all, so the
        // refusal seen is the server's.
        let Some((ok, out)) = s_client(addr, &[old, "-cipher", "DEFAULT@SECLEVEL=0"], "") else {
            eprintln!("openssl not installed; .ci/run installs it");
            return;
        };
        assert!(!ok, "{old} accepted:\n{out}");
        assert!(out.contains("Cipher is (NONE)"), "{old}:\n{out}");
        assert!(
            out.contains("alert"),
            "the server refused with an alert:\n{out}"
        );
    }
    for (flag, version) in [("-tls1_2", "TLSv1.2"), ("-tls1_3", "TLSv1.3")] {
        let args = [flag, "-servername", "a.test", "-alpn", "http/1.1"];
        let (ok, out) = s_client(addr, &args, "").unwrap();
        assert!(ok, "{flag}:\n{out}");
        assert!(out.contains(&format!("New, {version}")), "{out}");
        assert!(out.contains("ALPN protocol: http/1.1"), "{out}");
    }
}

#[test]
fn openssl_resumes_with_sess_in_over_tls12_and_tls13() {
    let s = setup();
    let pier = Pier::with_config(&sni_config(&s, ""), &[]);
    let addr = pier.https[0];
    let request = "GET /fixed HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n";
    for version in ["-tls1_2", "-tls1_3"] {
        let sess = s.dir.path().join(format!("sess{version}.pem"));
        let first = [
            version,
            "-servername",
            "a.test",
            "-ign_eof",
            "-sess_out",
            sess.to_str().unwrap(),
        ];
        let Some((ok, out)) = s_client(addr, &first, request) else {
            eprintln!("openssl not installed; .ci/run installs it");
            return;
        };
        assert!(ok && out.contains("Hello, TLS!"), "{out}");
        assert!(out.contains("New,"), "{out}");
        // Several connections: with two workers, some land on the other worker,
        // which must resume too (tickets are shared, caches are not needed).
        for _ in 0..4 {
            let again = [
                version,
                "-servername",
                "a.test",
                "-ign_eof",
                "-sess_in",
                sess.to_str().unwrap(),
            ];
            let (ok, out) = s_client(addr, &again, request).unwrap();
            assert!(ok && out.contains("Hello, TLS!"), "{out}");
            assert!(out.contains("Reused,"), "{version}:\n{out}");
        }
    }
}

/// A client with its own session store, to resume against whichever server.
fn resuming_client() -> std::sync::Arc<rustls::ClientConfig> {
    with_session_store(recording_client(true).0)
}

/// The same, limited to `versions`.
fn resuming_client_for(
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> std::sync::Arc<rustls::ClientConfig> {
    with_session_store(recording_client_for(true, versions).0)
}

fn with_session_store(
    cfg: std::sync::Arc<rustls::ClientConfig>,
) -> std::sync::Arc<rustls::ClientConfig> {
    let mut cfg = rustls::ClientConfig::clone(&cfg);
    cfg.resumption = Resumption::in_memory_sessions(64);
    std::sync::Arc::new(cfg)
}

fn handshake_kind(
    addr: std::net::SocketAddr,
    cfg: &std::sync::Arc<rustls::ClientConfig>,
) -> HandshakeKind {
    let mut c = connect_tls(addr, "a.test", cfg).unwrap();
    // The request lets the client read the tickets sent after the handshake.
    assert_eq!(tls_get(&mut c, "/fixed").unwrap().status, 200);
    c.conn.handshake_kind().unwrap()
}

#[test]
fn instances_sharing_ticket_key_file_resume_each_others_sessions() {
    let s = setup();
    let shared = s.dir.path().join("ticket.key");
    std::fs::write(&shared, [7u8; 80]).unwrap();
    let other = s.dir.path().join("other.key");
    std::fs::write(&other, [9u8; 48]).unwrap();
    let with_key = |k: &PathBuf| {
        Pier::with_config(
            &sni_config(&s, &format!("ticket_key_file = \"{}\"", p(k))),
            &[],
        )
    };
    let a = with_key(&shared);
    let b = with_key(&shared);
    let c = with_key(&other);

    let client = resuming_client();
    assert_eq!(handshake_kind(a.https[0], &client), HandshakeKind::Full);
    assert_eq!(handshake_kind(b.https[0], &client), HandshakeKind::Resumed);
    assert_eq!(handshake_kind(c.https[0], &client), HandshakeKind::Full);

    // TLS 1.2 resumes across instances too (tickets there as well).
    let tls12 = resuming_client_for(&[&rustls::version::TLS12]);
    assert_eq!(handshake_kind(a.https[0], &tls12), HandshakeKind::Full);
    assert_eq!(handshake_kind(b.https[0], &tls12), HandshakeKind::Resumed);
    assert_eq!(handshake_kind(c.https[0], &tls12), HandshakeKind::Full);
}

#[test]
fn curl_verifies_the_chain_with_cacert() {
    let s = setup();
    let pier = Pier::with_config(&sni_config(&s, ""), &[]);
    std::fs::write(s.dir.path().join("hello.txt"), "over TLS").unwrap();
    let Some(curl) = which("curl") else {
        eprintln!("curl not installed; .ci/run installs it");
        return;
    };
    let port = pier.https[0].port();
    let out = Command::new(curl)
        .args(["-sS", "--http1.1", "--cacert"])
        .arg(s.pki.ca_path())
        .args(["--resolve", &format!("a.test:{port}:127.0.0.1")])
        .arg(format!("https://a.test:{port}/hello.txt"))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "over TLS",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn mtls_config(s: &Setup, auth: &str) -> String {
    let (cert, key) = s.pki.server("srv", "a.test", &["a.test"], None);
    config(
        &format!(
            "cert = \"{}\"\nkey = \"{}\"\nclient_ca = \"{}\"\nclient_auth = \"{auth}\"\n",
            p(&cert),
            p(&key),
            p(&s.pki.ca_path())
        ),
        s.dir.path(),
    )
}

/// Handshake, then one request; a rejected client certificate shows in TLS 1.3
/// only after the handshake, at the first read.
fn request_ok(addr: std::net::SocketAddr, cfg: &std::sync::Arc<rustls::ClientConfig>) -> bool {
    match connect_tls(addr, "a.test", cfg) {
        Ok(mut c) => tls_get(&mut c, "/fixed").is_ok_and(|r| r.status == 200),
        Err(_) => false,
    }
}

#[test]
fn mtls_required_needs_a_certificate_from_the_ca_and_logs_its_subject() {
    let s = setup();
    let pier = Pier::with_config_log(&mtls_config(&s, "required"), &[], "debug");
    let addr = pier.https[0];
    let ca = s.pki.ca_path();
    let good = s.pki.client("alice", "alice");
    let stranger_dir = tempfile::tempdir().unwrap();
    let stranger = Pki::new(stranger_dir.path(), "Other CA").client("mallory", "mallory");

    assert!(
        !request_ok(addr, &verifying_client(&ca, None)),
        "no certificate"
    );
    assert!(
        !request_ok(addr, &verifying_client(&ca, Some(&stranger))),
        "certificate from another CA"
    );
    assert!(request_ok(addr, &verifying_client(&ca, Some(&good))));
    let line = pier
        .wait_log("TLS client certificate verified", Duration::from_secs(5))
        .expect("subject logged");
    assert!(line.contains("O=Pier Tests,CN=alice"), "{line}");
}

#[test]
fn mtls_optional_accepts_anonymous_clients_but_not_bad_certificates() {
    let s = setup();
    let pier = Pier::with_config_log(&mtls_config(&s, "optional"), &[], "debug");
    let addr = pier.https[0];
    let ca = s.pki.ca_path();
    let good = s.pki.client("bob", "bob");
    let stranger_dir = tempfile::tempdir().unwrap();
    let stranger = Pki::new(stranger_dir.path(), "Other CA").client("mallory", "mallory");
    assert!(request_ok(addr, &verifying_client(&ca, None)));
    assert!(!request_ok(addr, &verifying_client(&ca, Some(&stranger))));
    assert!(request_ok(addr, &verifying_client(&ca, Some(&good))));
    let line = pier
        .wait_log("TLS client certificate verified", Duration::from_secs(5))
        .expect("subject logged");
    assert!(line.contains("O=Pier Tests,CN=bob"), "{line}");
}

#[test]
fn sessions_resume_across_a_reload_without_a_ticket_key_file() {
    let s = setup();
    let pier = Pier::with_config(&sni_config(&s, ""), &[]);
    let client = resuming_client();
    assert_eq!(handshake_kind(pier.https[0], &client), HandshakeKind::Full);
    pier.signal(rustix::process::Signal::HUP);
    pier.wait_log("configuration reloaded", Duration::from_secs(5))
        .expect("reload logged");
    // The random ticket keys carry over, so the session from before resumes.
    assert_eq!(
        handshake_kind(pier.https[0], &client),
        HandshakeKind::Resumed
    );

    // Turning tickets off by reload is honoured: no resumption from tickets.
    let off = sni_config(&s, "session_tickets = false\nsession_cache = 0");
    std::fs::write(pier.dir.path().join("pier.toml"), off).unwrap();
    pier.signal(rustix::process::Signal::HUP);
    pier.wait_log("configuration reloaded", Duration::from_secs(5))
        .expect("second reload logged");
    assert_eq!(handshake_kind(pier.https[0], &client), HandshakeKind::Full);
}

#[test]
fn sighup_swaps_certificates_keeps_connections_and_survives_a_bad_file() {
    let s = setup();
    let (cert, key) = s.pki.server("live", "first", &["a.test"], None);
    let ocsp = s.dir.path().join("live.ocsp");
    std::fs::write(&ocsp, [0x30, 0x03, 1, 1, 1]).unwrap();
    let cfg = config(
        &format!(
            "cert = \"{}\"\nkey = \"{}\"\nocsp_response = \"{}\"\n",
            p(&cert),
            p(&key),
            p(&ocsp)
        ),
        s.dir.path(),
    );
    let pier = Pier::with_config(&cfg, &[]);
    let addr = pier.https[0];
    let (client, seen) = recording_client(true);
    let mut held = connect_tls(addr, "a.test", &client).unwrap();
    assert_eq!(tls_get(&mut held, "/fixed").unwrap().status, 200);
    assert_eq!(seen_subject(&seen), "CN=first");
    assert_eq!(seen.lock_ocsp(), vec![0x30, 0x03, 1, 1, 1], "OCSP stapled");

    // New files in place (same paths), then SIGHUP.
    let (new_cert, new_key) = s.pki.server("next", "second", &["a.test"], None);
    std::fs::copy(&new_cert, &cert).unwrap();
    std::fs::copy(&new_key, &key).unwrap();
    std::fs::write(&ocsp, [0x30, 0x03, 2, 2, 2]).unwrap();
    pier.signal(rustix::process::Signal::HUP);
    pier.wait_log("TLS certificates reloaded", Duration::from_secs(5))
        .expect("reload logged");
    for _ in 0..4 {
        let mut c = connect_tls(addr, "a.test", &client).unwrap();
        assert_eq!(tls_get(&mut c, "/fixed").unwrap().status, 200);
        assert_eq!(
            seen_subject(&seen),
            "CN=second",
            "new handshakes, every worker"
        );
        assert_eq!(seen.lock_ocsp(), vec![0x30, 0x03, 2, 2, 2], "OCSP reloaded");
    }
    assert_eq!(
        tls_get(&mut held, "/fixed").unwrap().body,
        b"Hello, TLS!",
        "the connection opened before the reload still works"
    );

    // A broken certificate file: the reload fails, names the file, and the
    // previous certificate stays.
    std::fs::write(&cert, "-----BEGIN CERTIFICATE-----\nnot base64\n").unwrap();
    pier.signal(rustix::process::Signal::HUP);
    let line = pier
        .wait_log("reload failed", Duration::from_secs(5))
        .expect("failure logged");
    assert!(line.contains(&p(&cert)), "{line}");
    let mut c = connect_tls(addr, "a.test", &client).unwrap();
    assert_eq!(tls_get(&mut c, "/fixed").unwrap().status, 200);
    assert_eq!(seen_subject(&seen), "CN=second");
    assert_eq!(tls_get(&mut held, "/fixed").unwrap().status, 200);
}

fn simple_config(s: &Setup, extra: &str) -> String {
    let (cert, key) = s.pki.server("simple", "a.test", &["a.test"], None);
    config(
        &format!("cert = \"{}\"\nkey = \"{}\"\n{extra}\n", p(&cert), p(&key)),
        s.dir.path(),
    )
}

fn closes_within(stream: &mut std::net::TcpStream, limit: Duration) -> Duration {
    let start = Instant::now();
    stream.set_read_timeout(Some(limit)).unwrap();
    let mut buf = [0u8; 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return start.elapsed(),
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return start.elapsed(),
            Err(e) => panic!("not closed within {limit:?}: {e}"),
        }
    }
}

#[test]
fn garbage_instead_of_a_client_hello_closes_that_connection_only() {
    let s = setup();
    let pier = Pier::with_config(&simple_config(&s, ""), &[]);
    let addr = pier.https[0];
    let (client, _) = recording_client(true);
    let mut bystander = connect_tls(addr, "a.test", &client).unwrap();
    for garbage in [
        &b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"[..],
        &[0x16, 0x03, 0x01, 0xff, 0xff, 0x01, 0, 0, 0, 0xde, 0xad][..],
        &[0u8; 64][..],
    ] {
        let mut raw = connect(addr);
        raw.write_all(garbage).unwrap();
        closes_within(&mut raw, Duration::from_secs(5));
    }
    assert_eq!(tls_get(&mut bystander, "/fixed").unwrap().status, 200);
    let mut fresh = connect_tls(addr, "a.test", &client).unwrap();
    assert_eq!(tls_get(&mut fresh, "/fixed").unwrap().status, 200);
}

#[test]
fn plain_http_on_the_tls_port_gets_a_400_that_says_so() {
    let s = setup();
    let pier = Pier::with_config(&simple_config(&s, ""), &[]);
    let addr = pier.https[0];
    let mut raw = connect(addr);
    raw.write_all(b"GET /fixed HTTP/1.1\r\nHost: a.test\r\nUser-Agent: t\r\n\r\n")
        .unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut answer = Vec::new();
    // Read to the end: the answer, then a clean close (no reset).
    raw.read_to_end(&mut answer).unwrap();
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{text}");
    assert!(text.contains("Connection: close\r\n"), "{text}");
    assert!(
        text.contains("plain HTTP request was sent to an HTTPS port"),
        "{text}"
    );
    // A TLS client on the same port is unaffected.
    let (client, _) = recording_client(true);
    let mut fresh = connect_tls(addr, "a.test", &client).unwrap();
    assert_eq!(tls_get(&mut fresh, "/fixed").unwrap().status, 200);
    if let Some(curl) = which("curl") {
        let out = Command::new(curl)
            .args(["-sS", "-o", "/dev/null", "-w", "%{http_code}"])
            .arg(format!("http://127.0.0.1:{}/fixed", addr.port()))
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "400");
    }
}

#[test]
fn a_stalled_handshake_is_dropped_at_the_timeout() {
    let s = setup();
    let pier = Pier::with_config(&simple_config(&s, "handshake_timeout = \"500ms\""), &[]);
    let addr = pier.https[0];
    // Half a record header: the server waits for the rest, until the deadline.
    let mut raw = connect(addr);
    raw.write_all(&[0x16, 0x03]).unwrap();
    let took = closes_within(&mut raw, Duration::from_secs(5));
    assert!(
        took >= Duration::from_millis(300),
        "closed too early: {took:?}"
    );
    assert!(took < Duration::from_secs(3), "took {took:?}");
    let mut silent = connect(addr);
    let took = closes_within(&mut silent, Duration::from_secs(5));
    assert!(took < Duration::from_secs(3), "silent client took {took:?}");
}

#[test]
fn large_static_file_over_tls_arrives_intact() {
    let s = setup();
    let pier = Pier::with_config(&simple_config(&s, ""), &[]);
    let data: Vec<u8> = (0..3 * 1024 * 1024 + 4321u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(s.dir.path().join("big.bin"), &data).unwrap();
    let (client, _) = recording_client(true);
    let mut c = connect_tls(pier.https[0], "a.test", &client).unwrap();
    for _ in 0..2 {
        let r = tls_get(&mut c, "/big.bin").unwrap();
        assert_eq!(r.status, 200);
        assert!(r.body == data, "body differs ({} bytes)", r.body.len());
    }
}

/// With `tls` settings, one worker: each TLS version's second handshake from a
/// client with a session store is `second`.
fn second_handshake_is(tls: &str, second: HandshakeKind) {
    let s = setup();
    let pier = Pier::with_config(&simple_config(&s, tls), &["--workers", "1"]);
    for versions in [
        &[&rustls::version::TLS12][..],
        &[&rustls::version::TLS13][..],
    ] {
        let cfg = resuming_client_for(versions);
        assert_eq!(handshake_kind(pier.https[0], &cfg), HandshakeKind::Full);
        assert_eq!(handshake_kind(pier.https[0], &cfg), second);
    }
}

#[test]
fn without_tickets_sessions_resume_from_the_worker_cache() {
    second_handshake_is("session_tickets = false", HandshakeKind::Resumed);
}

#[test]
fn without_tickets_or_cache_every_handshake_is_full() {
    second_handshake_is(
        "session_tickets = false\nsession_cache = 0",
        HandshakeKind::Full,
    );
}

#[test]
fn embedded_default_serves_given_files_and_reloads_them() {
    let s = setup();
    let (cert, key) = s.pki.server("flag", "from-flags", &["localhost"], None);
    let pier = Pier::embedded(&[
        "--listen",
        "127.0.0.1:0",
        "--tls-listen",
        "127.0.0.1:0",
        "--tls-cert",
        &p(&cert),
        "--tls-key",
        &p(&key),
        "--workers",
        "1",
    ]);
    std::fs::write(pier.root().join("x.txt"), "x").unwrap();
    let (client, seen) = recording_client(true);
    let mut c = connect_tls(pier.https[0], "localhost", &client).unwrap();
    assert_eq!(tls_get(&mut c, "/x.txt").unwrap().body, b"x");
    assert_eq!(seen_subject(&seen), "CN=from-flags");
    let (next_cert, next_key) = s.pki.server("flag2", "reloaded", &["localhost"], None);
    std::fs::copy(next_cert, &cert).unwrap();
    std::fs::copy(next_key, &key).unwrap();
    pier.signal(rustix::process::Signal::HUP);
    pier.wait_log("TLS certificates reloaded", Duration::from_secs(5))
        .expect("reload logged");
    connect_tls(pier.https[0], "localhost", &client).unwrap();
    assert_eq!(seen_subject(&seen), "CN=reloaded");
}
