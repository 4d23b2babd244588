//! A browser over HTTP/3: headless Chromium, forced to QUIC for Pier's
//! origin (`--origin-to-force-quic-on`), loads a page whose stylesheet,
//! script, image and a fetched answer all come over the same QUIC
//! connection. The page's script writes what it got into the DOM, and the
//! access log says each request came as HTTP/3.0 on its own stream.
//!
//! Chromium checks a QUIC server's certificate even under
//! `--ignore-certificate-errors`, so the listener's certificate is pinned by
//! its public key (`--ignore-certificate-errors-spki-list`).

mod common;

use std::path::Path;
use std::process::Command;

use common::chromium::{chromium, headless, wait_for_log};
use common::tls::Pki;
use common::Pier;

const PAGE: &str = r#"<!doctype html>
<html><head><link rel="stylesheet" href="/a.css"><script src="/b.js"></script></head>
<body><p id="out">waiting</p><img id="img" src="/c.svg">
<script>
window.addEventListener("load", async () => {
  const color = getComputedStyle(document.getElementById("out")).color;
  const width = document.getElementById("img").naturalWidth;
  const answer = await (await fetch("/api/answer")).text();
  document.getElementById("out").textContent =
    "js=" + window.fromScript + " css=" + color + " img=" + width + " fetch=" + answer.trim();
});
</script></body></html>
"#;

#[test]
fn headless_chromium_loads_a_page_and_its_resources_over_http3() {
    let Some(chromium) = chromium() else { return };
    let pki_dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(pki_dir.path(), "Pier QUIC test CA");
    let (cert, key) = pki.server("site", "localhost", &["localhost"], None);
    let config = format!(
        r#"
[server]
workers = 1
[[listener]]
listen = "127.0.0.1:0"
tls = {{ cert = "{}", key = "{}" }}
[[route]]
path = "/api/answer"
handler = "respond"
status = 200
body = "forty-two"
[[route]]
path = "/"
handler = "static"
root = "{{dir}}"
[access_log]
path = "{{dir}}/access.log"
flush_interval = "10ms"
"#,
        cert.display(),
        key.display()
    );
    let pier = Pier::with_config(&config, &[]);
    let root = pier.root();
    std::fs::write(root.join("page.html"), PAGE).unwrap();
    std::fs::write(root.join("a.css"), "#out { color: rgb(1, 2, 3); }\n").unwrap();
    std::fs::write(root.join("b.js"), "window.fromScript = 42;\n").unwrap();
    std::fs::write(
        root.join("c.svg"),
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="17" height="5"><rect width="17" height="5"/></svg>"#,
    )
    .unwrap();

    let port = pier.https[0].port();
    let origin = format!("localhost:{port}");
    let url = format!("https://{origin}/page.html");
    let resolve = format!("--host-resolver-rules=MAP localhost {}", pier.https[0].ip());
    let force = format!("--origin-to-force-quic-on={origin}");
    let pin = format!("--ignore-certificate-errors-spki-list={}", spki_hash(&cert));
    let profile = pier.dir.path().join("chromium");
    let args = ["--dump-dom", "--enable-quic", &force, &pin, &resolve];
    let want = "<p id=\"out\">js=42 css=rgb(1, 2, 3) img=17 fetch=forty-two</p>";
    // Chromium dumps the page once its virtual time runs out, which a busy
    // machine can reach before the fetch's round trip ends: such a load is
    // tried again, a few times.
    let mut dom = String::new();
    for _ in 0..3 {
        dom = headless(&chromium, &profile, &args, &url);
        if dom.contains(want) {
            break;
        }
    }
    assert!(dom.contains(want), "{dom}");

    let log = wait_for_log(&pier.dir.path().join("access.log"), "/api/answer");
    for path in ["/page.html", "/a.css", "/b.js", "/c.svg", "/api/answer"] {
        let line = log
            .lines()
            .find(|l| l.contains(&format!("\"GET {path} ")))
            .unwrap_or_else(|| panic!("no line for {path}: {log}"));
        assert!(line.contains(" HTTP/3.0\" 200 "), "{line}");
        assert!(line.contains(" stream="), "{line}");
    }
    assert!(!log.contains(" HTTP/1.1\" "), "{log}");
    assert!(!log.contains(" HTTP/2.0\" "), "{log}");
}

/// The base64 SHA-256 of the certificate's SubjectPublicKeyInfo, the form
/// Chromium's `--ignore-certificate-errors-spki-list` takes.
fn spki_hash(cert: &Path) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(
            "openssl x509 -in \"$1\" -pubkey -noout | openssl pkey -pubin -outform der \
             | openssl dgst -sha256 -binary | base64",
        )
        .arg("sh")
        .arg(cert)
        .output()
        .expect("run openssl");
    assert!(out.status.success(), "openssl failed");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}
