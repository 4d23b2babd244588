//! Sites against a real `pier`: README's website served as written and
//! checked with curl; hosts, wildcards and listeners; the routes' matchers in
//! their order; the automatic redirect to HTTPS; the defaults routes inherit;
//! and the configuration errors of each.

mod common;

use std::path::Path;
use std::process::Command;

use common::tls::Pki;
use common::{assert_config_error, free_port, get, which, Pier};

/// README's block between `<!-- site:pier -->` and `<!-- /site:pier -->`.
fn readme_site() -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let start = readme
        .find("<!-- site:pier -->")
        .expect("the site block's start");
    let end = readme
        .find("<!-- /site:pier -->")
        .expect("the site block's end");
    let block = &readme[start..end];
    let body = block
        .split_once("```toml\n")
        .and_then(|(_, rest)| rest.split_once("```"))
        .expect("a toml block")
        .0;
    body.to_string()
}

/// The files of README's site under `dir`: its certificate for site.test and
/// its document root.
fn site_files(dir: &Path) {
    let pki = Pki::new(dir, "Site CA");
    let (cert, key) = pki.server("leaf", "site.test", &["site.test"], None);
    std::fs::copy(cert, dir.join("site.crt")).unwrap();
    std::fs::copy(key, dir.join("site.key")).unwrap();
    std::fs::copy(pki.ca_path(), dir.join("ca.pem")).unwrap();
    let public = dir.join("public");
    std::fs::create_dir(&public).unwrap();
    let shell = format!(
        "<!doctype html><title>app</title>{}",
        "<p>shell</p>".repeat(200)
    );
    std::fs::write(public.join("index.html"), shell).unwrap();
    std::fs::write(public.join("404.html"), "custom not found page").unwrap();
    std::fs::write(
        public.join("app.css"),
        "body { color: black }\n".repeat(100),
    )
    .unwrap();
}

/// curl's answer: status, the named response fields, and the body.
struct Curl {
    status: u16,
    fields: String,
    body: String,
}

fn curl(curl: &Path, dir: &Path, args: &[&str]) -> Curl {
    let out = Command::new(curl)
        .current_dir(dir)
        .args([
            "-s", "-D", "head.txt", "-o", "body.txt", "--cacert", "ca.pem",
        ])
        .args(args)
        .output()
        .expect("run curl");
    assert!(out.status.success(), "curl {args:?}: {out:?}");
    let heads = std::fs::read_to_string(dir.join("head.txt")).unwrap();
    // After redirects curl followed, the last answer's head.
    let fields = heads
        .split("\r\n\r\n")
        .filter(|h| !h.trim().is_empty())
        .last()
        .unwrap_or_default()
        .to_string();
    let status = fields
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    Curl {
        status,
        fields: fields.to_ascii_lowercase(),
        body: String::from_utf8_lossy(&std::fs::read(dir.join("body.txt")).unwrap()).into(),
    }
}

#[test]
fn readme_s_website_in_one_file_does_all_it_says() {
    let text = readme_site();
    let lines = text.lines().filter(|l| !l.trim().is_empty()).count();
    assert!(lines <= 11, "README's site takes {lines} lines:\n{text}");
    let Some(curl_bin) = which("curl") else {
        eprintln!("curl not installed; .ci/run installs it");
        return;
    };
    let (http, https) = (free_port(), free_port());
    let config = text
        .replace("0.0.0.0:80\"", &format!("127.0.0.1:{http}\""))
        .replace("0.0.0.0:443\"", &format!("127.0.0.1:{https}\""));
    let site = tempfile::tempdir().unwrap();
    let dir = site.path();
    site_files(dir);
    let path = dir.join("pier.toml");
    std::fs::write(&path, &config).unwrap();
    let _pier = Pier::with_args(&["serve", "--config", path.to_str().unwrap()]);
    let resolve = [
        format!("site.test:{http}:127.0.0.1"),
        format!("site.test:{https}:127.0.0.1"),
    ];
    let get = |url: String, extra: &[&str]| {
        let mut args = vec!["--resolve", &resolve[0], "--resolve", &resolve[1]];
        args.extend_from_slice(extra);
        args.push(&url);
        curl(&curl_bin, dir, &args)
    };

    // Plain HTTP goes to HTTPS, host, path and query kept, on the TLS port.
    let r = get(format!("http://site.test:{http}/shop/item?id=7&x=y"), &[]);
    assert_eq!(r.status, 308, "{}", r.fields);
    assert!(
        r.fields.contains(&format!(
            "location: https://site.test:{https}/shop/item?id=7&x=y\r\n"
        )),
        "{}",
        r.fields
    );
    // curl follows it to the page.
    let r = get(format!("http://site.test:{http}/"), &["-L"]);
    assert_eq!(r.status, 200, "{}", r.fields);
    assert!(r.body.contains("shell"), "{}", r.body);

    // The page: HSTS, compressed as the client prefers, over HTTP/2.
    for (coding, accept) in [("zstd", "zstd"), ("br", "br"), ("gzip", "gzip")] {
        let r = get(
            format!("https://site.test:{https}/"),
            &["--http2", "-H", &format!("Accept-Encoding: {accept}")],
        );
        assert_eq!(r.status, 200, "{}", r.fields);
        assert!(r.fields.starts_with("http/2 200"), "{}", r.fields);
        assert!(
            r.fields
                .contains("strict-transport-security: max-age=31536000"),
            "{}",
            r.fields
        );
        assert!(
            r.fields.contains(&format!("content-encoding: {coding}")),
            "{}",
            r.fields
        );
    }
    // A deep link of the single-page application gets the shell.
    let r = get(
        format!("https://site.test:{https}/account/settings"),
        &["--compressed"],
    );
    assert_eq!(r.status, 200, "{}", r.fields);
    assert!(r.body.contains("shell"), "{}", r.body);
    assert!(!r.fields.contains("immutable"), "{}", r.fields);

    // Assets by file type: a year of caching; a missing one is the custom 404.
    let r = get(
        format!("https://site.test:{https}/app.css"),
        &["--compressed"],
    );
    assert_eq!(r.status, 200, "{}", r.fields);
    assert!(
        r.fields
            .contains("cache-control: public, max-age=31536000, immutable"),
        "{}",
        r.fields
    );
    assert!(
        r.fields.contains("strict-transport-security"),
        "{}",
        r.fields
    );
    assert!(r.body.starts_with("body { color"), "{}", r.body);
    let r = get(format!("https://site.test:{https}/missing.js"), &[]);
    assert_eq!(r.status, 404, "{}", r.fields);
    assert_eq!(r.body, "custom not found page");
}

/// A site config's listeners: a plain one named "web" and a TLS one named
/// "secure", on ports the redirect can name.
fn two_listeners(dir_cert: &str) -> (u16, u16, String) {
    let (http, https) = (free_port(), free_port());
    let text = format!(
        "[[listener]]\nname = \"web\"\nlisten = \"127.0.0.1:{http}\"\n\
         [[listener]]\nname = \"secure\"\nlisten = \"127.0.0.1:{https}\"\n{dir_cert}\n"
    );
    (http, https, text)
}

fn req(host: &str, path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
}

#[test]
fn sites_answer_their_hosts_and_wildcards_and_routes_meet_requests_in_order() {
    let (_, _, listeners) = two_listeners("tls = { self_signed = true }");
    let config = format!(
        r#"{listeners}
[[site]]
hosts = ["a.test", "*.a.test"]
redirect_https = false
handler = "respond"
body = "a site"
route = [
  {{ path = "/api/", body = "api" }},
  {{ exact_path = "/api/health", body = "health" }},
  {{ path = "*.json", body = "json pattern" }},
  {{ path = "/api/", methods = ["POST"], body = "api post" }},
  {{ path = "/", match_header = {{ X-Debug = "*" }}, body = "debug" }},
  {{ path = "/", match_header = {{ X-Debug = "2" }}, scheme = "http", body = "debug two" }},
  {{ path = "/only-secure", listeners = ["secure"], body = "secure only" }},
]

[[site]]
hosts = ["b.test"]
listeners = ["web"]
handler = "respond"
body = "b site"

[[route]]
path = "/"
handler = "respond"
body = "default"
"#
    );
    let pier = Pier::with_config(&config, &[]);
    let web = pier.http[0];
    let body = |raw: &str| {
        let r = get(web, raw);
        format!("{} {}", r.status, String::from_utf8_lossy(&r.body))
    };
    assert_eq!(body(&req("a.test", "/")), "200 a site");
    assert_eq!(body(&req("www.a.test:80", "/page")), "200 a site");
    assert_eq!(body(&req("a.test", "/api/users")), "200 api");
    assert_eq!(body(&req("a.test", "/api/health")), "200 health");
    // `/api/` is a longer literal than the pattern's `/`.
    assert_eq!(body(&req("a.test", "/api/x.json")), "200 api");
    assert_eq!(body(&req("a.test", "/data/x.json")), "200 json pattern");
    let post = "POST /api/users HTTP/1.1\r\nHost: a.test\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    assert_eq!(body(post), "200 api post");
    let debug = |v: &str| {
        format!("GET /x HTTP/1.1\r\nHost: a.test\r\nX-Debug: {v}\r\nConnection: close\r\n\r\n")
    };
    assert_eq!(body(&debug("1")), "200 debug");
    assert_eq!(body(&debug("2")), "200 debug two");
    // On the plain listener the TLS-only route is not there: the site's own answers.
    assert_eq!(body(&req("a.test", "/only-secure")), "200 a site");
    assert_eq!(body(&req("b.test", "/")), "200 b site");
    assert_eq!(body(&req("other.test", "/")), "200 default");
    assert_eq!(body(&req("a.test.evil", "/")), "200 default");
}

#[test]
fn a_site_on_tls_and_plain_listeners_redirects_plain_requests_but_where_turned_off() {
    let (http, https, listeners) = two_listeners("tls = { self_signed = true }");
    let config = format!(
        r#"{listeners}
[[site]]
hosts = ["a.test"]
handler = "respond"
body = "secure a"
route = [{{ path = "/plain/", redirect_https = false, body = "plain ok" }}]

[[site]]
hosts = ["b.test"]
redirect_https = false
handler = "respond"
body = "b on both"

[[site]]
hosts = ["c.test"]
listeners = ["web"]
handler = "respond"
body = "c plain only"
"#
    );
    let pier = Pier::with_config(&config, &[]);
    assert_eq!(pier.http[0].port(), http);
    let web = pier.http[0];
    let r = get(web, &req("a.test", "/x/y?z=1"));
    assert_eq!(r.status, 308);
    assert_eq!(
        r.header("location"),
        Some(format!("https://a.test:{https}/x/y?z=1").as_str())
    );
    let r = get(web, &req("a.test", "/plain/1"));
    assert_eq!((r.status, r.body.as_slice()), (200, &b"plain ok"[..]));
    let r = get(web, &req("b.test", "/"));
    assert_eq!((r.status, r.body.as_slice()), (200, &b"b on both"[..]));
    let r = get(web, &req("c.test", "/"));
    assert_eq!((r.status, r.body.as_slice()), (200, &b"c plain only"[..]));
    // A request without a host meets no site of named hosts.
    let r = get(web, "GET /old HTTP/1.0\r\n\r\n");
    assert_eq!(r.status, 404);
}

#[test]
fn routes_inherit_the_site_s_keys_their_handler_takes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("page.html"), "page").unwrap();
    std::fs::write(dir.path().join("404.html"), "site 404").unwrap();
    let config = format!(
        r#"
[[listener]]
listen = "127.0.0.1:0"

[[site]]
root = "{root}"
error_pages = {{ 404 = "/404.html" }}
response_headers = {{ set = {{ X-Site = "yes" }} }}
route = [
  {{ path = "/static/", cache_control = "max-age=60" }},
  {{ path = "/hello", body = "hi" }},
]
"#,
        root = dir.path().display()
    );
    let pier = Pier::with_config(&config, &[]);
    let addr = pier.addr();
    // The site's own route: root, error page and fields.
    let r = get(addr, &req("any.test", "/page.html"));
    assert_eq!((r.status, r.header("x-site")), (200, Some("yes")));
    let r = get(addr, &req("any.test", "/nope"));
    assert_eq!((r.status, r.body.as_slice()), (404, &b"site 404"[..]));
    // A static route under it: the same root and error page, its own caching.
    let r = get(addr, &req("any.test", "/static/none"));
    assert_eq!((r.status, r.body.as_slice()), (404, &b"site 404"[..]));
    // A respond route (inferred from `body`): the fields, no root.
    let r = get(addr, &req("any.test", "/hello"));
    assert_eq!((r.status, r.body.as_slice()), (200, &b"hi"[..]));
    assert_eq!(r.header("x-site"), Some("yes"));
}

#[test]
fn pier_check_routes_lists_each_listener_s_routes_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pier.toml");
    std::fs::write(
        &path,
        r#"
[[listener]]
name = "web"
listen = "127.0.0.1:8080"
[[site]]
hosts = ["a.test"]
body = "a"
route = [{ path = "*.css", body = "css" }, { exact_path = "/", body = "home" }]
"#,
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_pier"))
        .args(["check", "--routes", "--config", path.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let home = text.find("/ (exact)").expect("the exact route");
    let css = text.find("*.css (pattern)").expect("the pattern");
    let site = text
        .find("/ (prefix) -> respond")
        .expect("the site's own route");
    assert!(home < css && css < site, "{text}");
    assert!(
        text.contains("listener web (127.0.0.1:8080) (http)"),
        "{text}"
    );
}

#[test]
fn site_mistakes_are_configuration_errors_with_their_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, usize, &str, &str)] = &[
        (
            "[[site]]\nhosts = [\"a.test\"]\nlisteners = [\"nope\"]\nbody = \"x\"\n",
            5,
            "site[1].listeners",
            "no listener is called",
        ),
        (
            "[[site]]\nhosts = [\"a.test\"]\nbody = \"x\"\n[[site]]\nhosts = [\"A.test\"]\nbody = \"y\"\n",
            7,
            "site[2].hosts",
            "two sites",
        ),
        (
            "[[site]]\nhosts = [\"a b\"]\nbody = \"x\"\n",
            4,
            "site[1].hosts",
            "not a host name",
        ),
        (
            "[[site]]\nbody = \"x\"\n[[site.route]]\nhost = \"b.test\"\nbody = \"y\"\n",
            6,
            "site[1].route[1].host",
            "site's `hosts`",
        ),
        (
            "[[route]]\nbody = \"x\"\nredirect_https = false\n",
            5,
            "route[1].redirect_https",
            "only a site",
        ),
        (
            "[[route]]\nbody = \"x\"\nmethods = [\"get\"]\n",
            5,
            "route[1].methods",
            "capitals",
        ),
        (
            "[[route]]\nbody = \"x\"\nscheme = \"ftp\"\n",
            5,
            "route[1].scheme",
            "not a scheme",
        ),
        (
            "[[route]]\nerror_pages = { 404 = \"/x.html\" }\n",
            3,
            "route[1].handler",
            "needs `handler`",
        ),
    ];
    for (i, (body, line, key, words)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("case{i}.toml"));
        let text = format!("[[listener]]\nlisten = \"127.0.0.1:0\"\n{body}");
        std::fs::write(&path, &text).unwrap();
        let message = assert_config_error(&path, *line, key);
        assert!(message.contains(words), "case {i}: {message}\n{text}");
    }
}
