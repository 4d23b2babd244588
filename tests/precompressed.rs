//! Precompressed static files (`precompressed = [...]` on a static route)
//! against a real `pier`: the sibling the client accepts is what goes out,
//! with its coding, its own ETag, ranges over its bytes and `Vary`, and curl
//! decodes it back to the file.

mod common;

use std::io::Write;
use std::process::Command;

use common::{get, which, Pier};

const CONFIG: &str = r#"
[[listener]]
listen = "127.0.0.1:0"

[[route]]
path = "/"
handler = "static"
root = "{dir}/site"
precompressed = ["br", "zstd", "gzip"]
"#;

/// The original text of `app.js`.
fn script() -> Vec<u8> {
    "function hello() { return 'precompressed'; }\n"
        .repeat(200)
        .into_bytes()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn brotli(data: &[u8]) -> Vec<u8> {
    let mut w = brotli::CompressorWriter::new(Vec::new(), 4096, 9, 22);
    w.write_all(data).unwrap();
    w.into_inner()
}

/// A server over a site with `app.js` and all three siblings, and
/// `only-gz.js` with a `.gz` only; the directory lives as long as the test.
fn started() -> (Pier, tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("site");
    std::fs::create_dir_all(&site).unwrap();
    std::fs::write(site.join("app.js"), script()).unwrap();
    std::fs::write(site.join("app.js.gz"), gzip(&script())).unwrap();
    std::fs::write(site.join("app.js.br"), brotli(&script())).unwrap();
    std::fs::write(
        site.join("app.js.zst"),
        zstd::encode_all(&script()[..], 19).unwrap(),
    )
    .unwrap();
    std::fs::write(site.join("only-gz.js"), script()).unwrap();
    std::fs::write(site.join("only-gz.js.gz"), gzip(&script())).unwrap();
    let config = CONFIG.replace("{dir}", dir.path().to_str().unwrap());
    (Pier::with_config(&config, &[]), dir, site)
}

#[test]
fn the_accepted_sibling_is_sent_with_its_coding_tag_and_vary() {
    let (pier, _dir, site) = started();
    let addr = pier.http[0];
    let br = std::fs::read(site.join("app.js.br")).unwrap();
    let r = get(
        addr,
        "GET /app.js HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip, br, zstd\r\n\r\n",
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-encoding"), Some("br"), "{:?}", r.headers);
    assert_eq!(r.header("vary"), Some("Accept-Encoding"));
    assert_eq!(
        r.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
    assert_eq!(r.body, br, "the .br file as it lies on disk");
    let etag_br = r.header("etag").unwrap().to_string();
    assert!(etag_br.ends_with("-br\""), "{etag_br}");

    let mut decoded = Vec::new();
    brotli::BrotliDecompress(&mut &r.body[..], &mut decoded).unwrap();
    assert_eq!(decoded, script());

    let z = get(
        addr,
        "GET /app.js HTTP/1.1\r\nHost: x\r\nAccept-Encoding: zstd, br;q=0.5\r\n\r\n",
    );
    assert_eq!(z.header("content-encoding"), Some("zstd"));
    assert_eq!(zstd::decode_all(&z.body[..]).unwrap(), script());

    let plain = get(addr, "GET /app.js HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(plain.header("content-encoding"), None);
    assert_eq!(plain.header("vary"), Some("Accept-Encoding"));
    assert_eq!(plain.body, script());
    assert_ne!(plain.header("etag").unwrap(), etag_br);

    // Revalidation: the br tag matches the br answer only.
    let revalidated = get(
        addr,
        &format!(
            "GET /app.js HTTP/1.1\r\nHost: x\r\nAccept-Encoding: br\r\nIf-None-Match: {etag_br}\r\n\r\n"
        ),
    );
    assert_eq!(revalidated.status, 304);
    assert_eq!(revalidated.header("vary"), Some("Accept-Encoding"));
    let other = get(
        addr,
        &format!("GET /app.js HTTP/1.1\r\nHost: x\r\nIf-None-Match: {etag_br}\r\n\r\n"),
    );
    assert_eq!(other.status, 200);

    let head = get(
        addr,
        "HEAD /app.js HTTP/1.1\r\nHost: x\r\nAccept-Encoding: br\r\n\r\n",
    );
    assert_eq!(head.header("content-encoding"), Some("br"));
    assert_eq!(
        head.header("content-length"),
        Some(br.len().to_string().as_str())
    );
}

#[test]
fn ranges_are_of_the_encoded_bytes() {
    let (pier, _dir, site) = started();
    let gz = std::fs::read(site.join("only-gz.js.gz")).unwrap();
    let r = get(
        pier.http[0],
        "GET /only-gz.js HTTP/1.1\r\nHost: x\r\nAccept-Encoding: br, gzip\r\nRange: bytes=0-9\r\n\r\n",
    );
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(
        r.header("content-range"),
        Some(format!("bytes 0-9/{}", gz.len()).as_str())
    );
    assert_eq!(r.body, gz[..10]);
}

#[test]
fn a_stale_sibling_is_not_sent() {
    let (pier, _dir, site) = started();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(site.join("only-gz.js.gz"))
        .unwrap()
        .set_modified(old)
        .unwrap();
    let r = get(
        pier.http[0],
        "GET /only-gz.js HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n",
    );
    assert_eq!(r.header("content-encoding"), None);
    assert_eq!(r.body, script());
}

#[test]
fn curl_decodes_each_sibling_back_to_the_file() {
    if which("curl").is_none() {
        eprintln!("curl not installed; skipped");
        return;
    }
    let (pier, _dir, _site) = started();
    let url = format!("http://{}/app.js", pier.http[0]);
    for accept in ["br", "zstd", "gzip"] {
        let out = Command::new("curl")
            .args(["-sS", "--compressed", "-H"])
            .arg(format!("Accept-Encoding: {accept}"))
            .args(["-D", "-", &url])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let text = out.stdout;
        let split = common::find(&text, b"\r\n\r\n").unwrap();
        let head = String::from_utf8_lossy(&text[..split]).to_ascii_lowercase();
        assert!(
            head.contains(&format!("content-encoding: {accept}")),
            "{head}"
        );
        assert_eq!(&text[split + 4..], &script()[..], "{accept}");
    }
}
