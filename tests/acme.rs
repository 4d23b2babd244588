//! ACME against Pebble, Let's Encrypt's test CA, on loopback. Pebble really
//! validates: it connects to Pier's TLS listener (TLS-ALPN-01) or plain listener
//! (HTTP-01) on the ports its config names, which Pier listens on here.

mod common;

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use common::free_port;
use common::pebble::{self, Pebble};
use common::tls::{connect_tls, recording_client, tls_get, Recorder};
use common::Pier;

/// Generous bound for one issuance on a busy machine.
const ISSUE_WITHIN: Duration = Duration::from_secs(60);

/// A Pier config: a plain listener on `http`, an ACME TLS listener on `https`.
fn config(
    pebble: &Pebble,
    http: u16,
    https: u16,
    state: &Path,
    names: &[&str],
    challenges: &[&str],
    extra: &str,
) -> String {
    let list = |v: &[&str]| {
        v.iter()
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        r#"
[server]
workers = 1
[admin]
listen = "127.0.0.1:0"
[[listener]]
listen = "127.0.0.1:{http}"
[[listener]]
listen = "127.0.0.1:{https}"
[listener.tls.acme]
directory = "{dir}"
ca = "{ca}"
agree_terms = true
contact = ["ops@pier.test"]
names = [{names}]
state_dir = "{state}"
challenges = [{challenges}]
retry_backoff = "1s"
{extra}
[[route]]
handler = "respond"
body = "hello over ACME"
"#,
        dir = pebble.directory,
        ca = pebble.ca.display(),
        names = list(names),
        state = state.display(),
        challenges = list(challenges),
    )
}

/// The leaf certificate's SHA-256 served for `name`, or the handshake error.
fn served(addr: SocketAddr, name: &str) -> Result<(String, Vec<String>), String> {
    let (cfg, rec) = recording_client(true);
    let mut s = connect_tls(addr, name, &cfg).map_err(|e| e.to_string())?;
    let r = tls_get(&mut s, "/").map_err(|e| e.to_string())?;
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"hello over ACME");
    Ok(leaf_of(&rec))
}

fn leaf_of(rec: &Recorder) -> (String, Vec<String>) {
    let leaf = rec
        .seen
        .lock()
        .unwrap()
        .leaf
        .clone()
        .expect("a certificate");
    let (_, cert) = x509_parser::parse_x509_certificate(leaf.as_ref()).unwrap();
    let names = cert
        .subject_alternative_name()
        .unwrap()
        .map(|s| {
            s.value
                .general_names
                .iter()
                .map(|g| g.to_string())
                .collect()
        })
        .unwrap_or_default();
    (pier::tls::fingerprint(&leaf), names)
}

/// Seconds into the day of a log line's timestamp (`2026-01-02T10:11:12.345678Z ...`),
/// so gaps are measured where they happened, not when the test read the lines.
fn logged_at(line: &str) -> f64 {
    let time = line.split_once('T').unwrap().1;
    let hms: Vec<f64> = time[..time.find('Z').unwrap()]
        .split(':')
        .map(|x| x.parse().unwrap())
        .collect();
    hms[0] * 3600.0 + hms[1] * 60.0 + hms[2]
}

fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let at = line.find(&format!("{key}="))? + key.len() + 1;
    let rest = &line[at..];
    let end = rest.find(' ').unwrap_or(rest.len());
    Some(rest[..end].trim_matches('"'))
}

fn metrics(p: &Pier) -> String {
    let r = common::get(
        p.admin.unwrap(),
        "GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    );
    String::from_utf8(r.body).unwrap()
}

fn issue_with(challenge: &str) {
    let (http, https) = (free_port(), free_port());
    if !pebble::installed() {
        return;
    }
    let pebble = Pebble::start(http, https, 3600);
    let state = tempfile::tempdir().unwrap();
    let p = Pier::with_config(
        &config(
            &pebble,
            http,
            https,
            state.path(),
            &["a.pier.test"],
            &[challenge],
            "",
        ),
        &[],
    );
    let line = p
        .wait_log("ACME certificate issued", ISSUE_WITHIN)
        .unwrap_or_else(|| panic!("no certificate; pebble log:\n{}", pebble.log()));
    assert_eq!(field(&line, "challenge"), Some(challenge), "{line}");
    let (fp, names) = served(p.https[0], "a.pier.test").unwrap();
    assert_eq!(field(&line, "sha256"), Some(fp.as_str()));
    assert_eq!(names, ["DNSName(a.pier.test)"]);
    // Pebble really validated (no PEBBLE_VA_ALWAYS_VALID): against Pier's responder.
    assert!(
        pebble.log().contains("set VALID by completed challenge"),
        "{}",
        pebble.log()
    );

    for f in ["a.pier.test.ecdsa-p256.key", "a.pier.test.ecdsa-p256.crt"] {
        let mode = std::fs::metadata(state.path().join(f))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{f}");
    }
    let account = std::fs::read_dir(state.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("account-")
        })
        .expect("account file");
    assert_eq!(
        std::fs::metadata(&account).unwrap().permissions().mode() & 0o777,
        0o600
    );

    let status = common::get(
        p.admin.unwrap(),
        "GET /status.json HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    );
    let status = String::from_utf8(status.body).unwrap();
    assert!(
        status.contains("a.pier.test") && status.contains(&fp),
        "{status}"
    );
    let m = metrics(&p);
    assert!(
        m.contains("pier_acme_orders_total{result=\"issued\"} 1"),
        "{m}"
    );
    assert!(
        m.contains("pier_acme_certificate_expiry_seconds{name=\"a.pier.test\"}"),
        "{m}"
    );
}

#[test]
fn issues_by_tls_alpn_01_on_the_tls_listener() {
    issue_with("tls-alpn-01");
}

#[test]
fn issues_by_http_01_on_the_plain_listener() {
    issue_with("http-01");
}

#[test]
fn http_01_is_answered_ahead_of_a_site_s_redirect_to_https() {
    let (http, https) = (free_port(), free_port());
    if !pebble::installed() {
        return;
    }
    let pebble = Pebble::start(http, https, 3600);
    let state = tempfile::tempdir().unwrap();
    let text = config(
        &pebble,
        http,
        https,
        state.path(),
        &["a.pier.test"],
        &["http-01"],
        "",
    );
    let route = "[[route]]\nhandler = \"respond\"\nbody = \"hello over ACME\"\n";
    assert!(text.contains(route));
    let site = "[[site]]\nhosts = [\"a.pier.test\"]\nbody = \"hello over ACME\"\n";
    let p = Pier::with_config(&text.replace(route, site), &[]);
    p.wait_log("ACME certificate issued", ISSUE_WITHIN)
        .unwrap_or_else(|| panic!("no certificate; pebble log:\n{}", pebble.log()));
    assert!(pebble.log().contains("set VALID by completed challenge"));
    // Every other plain request of the site goes to HTTPS.
    let r = common::get(
        p.http[0],
        "GET /page?x=1 HTTP/1.1\r\nHost: a.pier.test\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 308);
    assert_eq!(
        r.header("location"),
        Some(format!("https://a.pier.test:{https}/page?x=1").as_str())
    );
}

#[test]
fn short_lived_certificate_is_renewed_without_dropping_open_connections() {
    let (http, https) = (free_port(), free_port());
    // 15 s of validity: renewal is due after at most 10 s.
    if !pebble::installed() {
        return;
    }
    let pebble = Pebble::start(http, https, 15);
    let state = tempfile::tempdir().unwrap();
    let p = Pier::with_config(
        &config(
            &pebble,
            http,
            https,
            state.path(),
            &["r.pier.test"],
            &["tls-alpn-01"],
            "[http]\nkeepalive_timeout = \"120s\"\n",
        ),
        &[],
    );
    p.wait_log("ACME certificate issued", ISSUE_WITHIN)
        .unwrap_or_else(|| panic!("no certificate; pebble log:\n{}", pebble.log()));
    let (cfg, rec) = recording_client(true);
    let mut held = connect_tls(p.https[0], "r.pier.test", &cfg).unwrap();
    assert_eq!(tls_get(&mut held, "/").unwrap().status, 200);
    let (first, _) = leaf_of(&rec);

    let line = p
        .wait_log("ACME certificate renewed", Duration::from_secs(45))
        .unwrap_or_else(|| panic!("not renewed; pebble log:\n{}", pebble.log()));
    let (second, _) = served(p.https[0], "r.pier.test").unwrap();
    assert_ne!(first, second, "new handshakes get the renewed certificate");
    assert_eq!(field(&line, "sha256"), Some(second.as_str()));
    // The connection opened before the swap still answers.
    let r = tls_get(&mut held, "/").unwrap();
    assert_eq!((r.status, &r.body[..]), (200, &b"hello over ACME"[..]));
}

#[test]
fn refused_orders_back_off_exponentially_and_the_name_gets_an_alert() {
    // Pebble validates HTTP-01 on a port nobody listens on: every order fails.
    let (http, https, nobody) = (free_port(), free_port(), free_port());
    if !pebble::installed() {
        return;
    }
    let pebble = Pebble::start(nobody, https, 3600);
    let state = tempfile::tempdir().unwrap();
    let p = Pier::with_config(
        &config(
            &pebble,
            http,
            https,
            state.path(),
            &["f.pier.test"],
            &["http-01"],
            "",
        ),
        &[],
    );
    let mut waits = Vec::new();
    let mut at = Vec::new();
    for _ in 0..3 {
        let line = p
            .wait_log("ACME order failed", ISSUE_WITHIN)
            .unwrap_or_else(|| panic!("no failure logged; pebble log:\n{}", pebble.log()));
        at.push(logged_at(&line));
        assert_eq!(field(&line, "cause"), Some("validation"), "{line}");
        waits.push(field(&line, "retry_in_ms").unwrap().parse::<u64>().unwrap());
    }
    // 1 s, 2 s, 4 s, each within the ±20 % jitter.
    for (i, w) in waits.iter().enumerate() {
        let base = 1000u64 << i;
        assert!(
            (base * 8 / 10..=base * 12 / 10).contains(w),
            "attempt {}: {w} ms ({waits:?})",
            i + 1
        );
    }
    for i in 1..3 {
        assert!(
            at[i] - at[i - 1] >= waits[i - 1] as f64 / 1000.0,
            "retried before its back-off"
        );
    }
    // No certificate: the handshake ends in an alert, not a self-signed certificate.
    let e = served(p.https[0], "f.pier.test").unwrap_err();
    assert!(
        e.to_lowercase().contains("alert") || e.contains("HandshakeFailure"),
        "{e}"
    );
    let m = metrics(&p);
    let failures: u64 = m
        .lines()
        .find(|l| l.starts_with("pier_acme_failures_total{cause=\"validation\"}"))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0);
    assert!(failures >= 3, "{m}");
}

#[test]
fn restart_serves_the_stored_certificate_without_ordering() {
    let (http, https) = (free_port(), free_port());
    if !pebble::installed() {
        return;
    }
    let pebble = Pebble::start(http, https, 3600);
    let state = tempfile::tempdir().unwrap();
    let text = config(
        &pebble,
        http,
        https,
        state.path(),
        &["s.pier.test"],
        &["tls-alpn-01"],
        "",
    );
    let first = {
        let p = Pier::with_config(&text, &[]);
        p.wait_log("ACME certificate issued", ISSUE_WITHIN)
            .unwrap_or_else(|| panic!("no certificate; pebble log:\n{}", pebble.log()));
        served(p.https[0], "s.pier.test").unwrap().0
    };
    let orders_before = pebble.log().matches("POST /order-plz").count();
    assert_eq!(orders_before, 1);
    let p = Pier::with_config(&text, &[]);
    // Served from the first handshake on, before the ACME thread looked at it.
    assert_eq!(served(p.https[0], "s.pier.test").unwrap().0, first);
    let line = p
        .wait_log(
            "ACME certificate loaded from the state directory",
            Duration::from_secs(20),
        )
        .expect("stored certificate picked up");
    assert_eq!(field(&line, "sha256"), Some(first.as_str()));
    std::thread::sleep(Duration::from_secs(1));
    let later = p.log_lines();
    assert!(
        !later
            .iter()
            .any(|l| l.contains("ordering an ACME certificate")),
        "{later:?}"
    );
    assert_eq!(
        pebble.log().matches("POST /order-plz").count(),
        orders_before,
        "no new order"
    );
}

#[test]
fn two_instances_sharing_a_state_directory_order_once() {
    let (http, https, b_http, b_https) = (free_port(), free_port(), free_port(), free_port());
    if !pebble::installed() {
        return;
    }
    let pebble = Pebble::start(http, https, 3600);
    let state = tempfile::tempdir().unwrap();
    // A listens where Pebble validates; B does not, so B's own orders are
    // validated through A, which reads B's token from the shared directory.
    let a = Pier::with_config(
        &config(
            &pebble,
            http,
            https,
            state.path(),
            &["one.pier.test"],
            &["http-01"],
            "",
        ),
        &[],
    );
    let b = Pier::with_config(
        &config(
            &pebble,
            b_http,
            b_https,
            state.path(),
            &["one.pier.test", "two.pier.test"],
            &["http-01"],
            "",
        ),
        &[],
    );
    let mut a_lines = Vec::new();
    let mut b_lines = Vec::new();
    let deadline = Instant::now() + ISSUE_WITHIN * 2;
    let done = |a: &[String], b: &[String]| {
        let one_ok = |l: &[String]| {
            l.iter().any(|x| {
                x.contains("one.pier.test")
                    && (x.contains("ACME certificate issued")
                        || x.contains("loaded from the state directory"))
            })
        };
        one_ok(a)
            && one_ok(b)
            && b.iter()
                .any(|x| x.contains("two.pier.test") && x.contains("ACME certificate issued"))
    };
    while !done(&a_lines, &b_lines) {
        assert!(
            Instant::now() < deadline,
            "A: {a_lines:#?}\nB: {b_lines:#?}\npebble:\n{}",
            pebble.log()
        );
        a_lines.extend(a.log_lines());
        b_lines.extend(b.log_lines());
        std::thread::sleep(Duration::from_millis(100));
    }
    let issued_one = a_lines
        .iter()
        .chain(&b_lines)
        .filter(|l| l.contains("ACME certificate issued") && l.contains("one.pier.test"))
        .count();
    assert_eq!(issued_one, 1, "A: {a_lines:#?}\nB: {b_lines:#?}");
    let pebble_log = pebble.log();
    assert_eq!(
        pebble_log.matches("POST /order-plz").count(),
        2,
        "one order per name\nA: {a_lines:#?}\nB: {b_lines:#?}\npebble:\n{pebble_log}"
    );
    let fa = served(a.https[0], "one.pier.test").unwrap().0;
    let fb = served(b.https[0], "one.pier.test").unwrap().0;
    assert_eq!(fa, fb, "both serve the one certificate ordered");
    assert!(served(b.https[0], "two.pier.test").is_ok());
    assert!(!state.path().join("one.pier.test.ecdsa-p256.lock").exists());
}

#[test]
fn sighup_rereads_the_acme_settings_and_keeps_served_certificates() {
    let (http, https) = (free_port(), free_port());
    if !pebble::installed() {
        return;
    }
    let pebble = Pebble::start(http, https, 3600);
    let state = tempfile::tempdir().unwrap();
    let p = Pier::with_config(
        &config(
            &pebble,
            http,
            https,
            state.path(),
            &["h1.pier.test"],
            &["tls-alpn-01"],
            "",
        ),
        &[],
    );
    p.wait_log("ACME certificate issued", ISSUE_WITHIN)
        .unwrap_or_else(|| panic!("no certificate; pebble log:\n{}", pebble.log()));
    let first = served(p.https[0], "h1.pier.test").unwrap().0;
    let text = config(
        &pebble,
        http,
        https,
        state.path(),
        &["h1.pier.test", "h2.pier.test"],
        &["tls-alpn-01"],
        "",
    );
    std::fs::write(p.root().join("pier.toml"), text).unwrap();
    p.signal(rustix::process::Signal::HUP);
    let line = p
        .wait_log("ACME certificate issued", ISSUE_WITHIN)
        .unwrap_or_else(|| panic!("added name not ordered; pebble log:\n{}", pebble.log()));
    assert!(line.contains("h2.pier.test"), "{line}");
    assert!(served(p.https[0], "h2.pier.test").is_ok());
    assert_eq!(
        served(p.https[0], "h1.pier.test").unwrap().0,
        first,
        "kept across the reload"
    );
    assert_eq!(
        pebble.log().matches("POST /order-plz").count(),
        2,
        "h1 not ordered again"
    );
}

#[test]
fn pier_check_validates_acme_settings_without_contacting_the_ca() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("acme.toml");
    let good = format!(
        "[[listener]]\nlisten = \"127.0.0.1:8443\"\n[listener.tls.acme]\nagree_terms = true\nnames = [\"example.com\"]\nstate_dir = \"{}\"\n[[route]]\nhandler = \"respond\"\n",
        dir.path().join("state").display()
    );
    std::fs::write(&path, &good).unwrap();
    let check = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_pier"))
            .args(["check", "--config"])
            .arg(&path)
            .output()
            .unwrap()
    };
    let out = check();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!dir.path().join("state").exists(), "check creates nothing");
    std::fs::write(
        &path,
        good.replace(
            "agree_terms = true\n",
            "agree_terms = true\nkey_type = \"dsa\"\n",
        ),
    )
    .unwrap();
    let out = check();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "{}:5: listener[1].tls.acme.key_type",
            path.display()
        )),
        "{err}"
    );
}
