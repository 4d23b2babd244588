//! Static route rules against a real `pier`: hidden dot-files (also in the
//! embedded default), `try_files` for single-page apps, custom error pages,
//! the JSON listing and the `[mime]` table, over plain HTTP and TLS, plus the
//! configuration errors of each key.

mod common;

use common::tls::{connect_tls, recording_client, tls_get, tls_request};
use common::{assert_config_error, get, Pier, Response};

/// A site: `index.html`, `app.js`, `404.html`, dot-files and a listing directory.
fn site() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("site");
    for d in [
        "",
        ".git",
        "sub",
        "sub/.private",
        ".well-known",
        "list/zdir",
        "list/adir",
    ] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let files: [(&str, &str); 10] = [
        ("index.html", "<p>app</p>"),
        ("app.js", "js()"),
        ("404.html", "<p>not here</p>"),
        (".env", "SECRET=1"),
        (".git/config", "[core]"),
        ("sub/.hidden", "h"),
        ("sub/.private/x.txt", "x"),
        (".well-known/security.txt", "Contact: x"),
        ("list/b.txt", "bb"),
        ("list/a.glb", "glTF"),
    ];
    for (name, body) in files {
        std::fs::write(root.join(name), body).unwrap();
    }
    dir
}

const CONFIG: &str = r#"
[[listener]]
listen = "127.0.0.1:0"

[[listener]]
listen = "127.0.0.1:0"
tls = { self_signed = true }

[mime]
glb = "model/gltf-binary"
".JS" = "application/x-custom-js"

[[route]]
path = "/"
handler = "static"
root = "{dir}/site"
error_pages = { 404 = "/404.html", 403 = "/missing-page.html" }

[[route]]
path = "/spa/"
handler = "static"
root = "{dir}/site"
try_files = ["{path}", "/index.html"]

[[route]]
host = "open.test"
path = "/"
handler = "static"
root = "{dir}/site"
allow_hidden = true

[[route]]
path = "/list/"
handler = "static"
root = "{dir}/site"
autoindex = true

[[route]]
host = "json.test"
path = "/list/"
handler = "static"
root = "{dir}/site"
autoindex = true
autoindex_format = "json"
"#;

fn pier() -> (Pier, tempfile::TempDir) {
    let dir = site();
    let text = CONFIG.replace("{dir}", dir.path().to_str().unwrap());
    (Pier::with_config(&text, &[]), dir)
}

fn get_host(pier: &Pier, host: &str, path: &str, extra: &str) -> Response {
    get(
        pier.addr(),
        &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n"),
    )
}

#[test]
fn dot_files_are_hidden_unless_allowed_and_well_known_is_served() {
    let (pier, _dir) = pier();
    for path in [
        "/.env",
        "/.git/config",
        "/%2egit/config",
        "/sub/.hidden",
        "/sub/.private/x.txt",
        "/sub/%2Ehidden",
        "/a/.well-known/x",
    ] {
        let r = get_host(&pier, "t", path, "");
        assert_eq!(r.status, 404, "{path}");
        assert!(
            !String::from_utf8_lossy(&r.body).contains("SECRET"),
            "{path}"
        );
    }
    let r = get_host(&pier, "t", "/.well-known/security.txt", "");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"Contact: x"[..]));
    let r = get_host(&pier, "open.test", "/.env", "");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"SECRET=1"[..]));

    let (client, _) = recording_client(true);
    let mut s = connect_tls(pier.https[0], "localhost", &client).unwrap();
    assert_eq!(tls_get(&mut s, "/.git/config").unwrap().status, 404);
}

#[test]
fn the_embedded_default_does_not_serve_dot_files() {
    let pier = Pier::embedded(&["--listen", "127.0.0.1:0", "--tls-listen", "127.0.0.1:0"]);
    std::fs::create_dir_all(pier.root().join(".git")).unwrap();
    std::fs::write(pier.root().join(".git/config"), "[remote]").unwrap();
    std::fs::write(pier.root().join("page.txt"), "public").unwrap();
    let r = get(pier.addr(), "GET /.git/config HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.status, 404);
    let r = get(pier.addr(), "GET /page.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"public"[..]));
    // The listing leaves it out too.
    let r = get(pier.addr(), "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    let page = String::from_utf8_lossy(&r.body);
    assert!(
        page.contains("page.txt") && !page.contains(".git"),
        "{page}"
    );
    let (client, _) = recording_client(true);
    let mut s = connect_tls(pier.https[0], "localhost", &client).unwrap();
    assert_eq!(tls_get(&mut s, "/.git/config").unwrap().status, 404);
}

#[test]
fn try_files_serves_the_app_for_unknown_paths_and_real_files_as_they_are() {
    let (pier, _dir) = pier();
    let r = get_host(&pier, "t", "/spa/settings/profile?tab=2", "");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"<p>app</p>");
    assert!(r.header("content-type").unwrap().starts_with("text/html"));
    // A file that exists is itself (under the [mime] table's type).
    let r = get_host(&pier, "t", "/app.js", "");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"js()"[..]));
    assert_eq!(r.header("content-type"), Some("application/x-custom-js"));
    // Hidden files stay hidden behind the fallback: the app, not the secret.
    let r = get_host(&pier, "t", "/spa/.env", "");
    assert_eq!(r.body, b"<p>app</p>");

    let (client, _) = recording_client(true);
    let mut s = connect_tls(pier.https[0], "localhost", &client).unwrap();
    let r = tls_get(&mut s, "/spa/deep/link").unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"<p>app</p>"[..]));
}

#[test]
fn error_pages_are_files_sent_with_the_error_status() {
    let (pier, _dir) = pier();
    let r = get_host(&pier, "t", "/no/such/page", "");
    assert_eq!(r.status, 404);
    assert_eq!(r.body, b"<p>not here</p>");
    assert!(r.header("content-type").unwrap().starts_with("text/html"));
    // A hidden file answers the same page: nothing tells it exists.
    let r = get_host(&pier, "t", "/.env", "");
    assert_eq!(
        (r.status, r.body.as_slice()),
        (404, &b"<p>not here</p>"[..])
    );
    // HEAD: the page's head, no body.
    let r = get(pier.addr(), "HEAD /nope HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.status, 404);
    assert_eq!(r.header("content-length"), Some("15"));
    // Conditionals do not turn an error page into a 304.
    let r = get_host(&pier, "t", "/nope", "If-None-Match: *\r\n");
    assert_eq!(r.status, 404);
    // A page that does not exist leaves the plain status text.
    let r = get(
        pier.addr(),
        "DELETE /x HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n",
    );
    assert_eq!(r.status, 405);
    let (client, _) = recording_client(true);
    let mut s = connect_tls(pier.https[0], "localhost", &client).unwrap();
    let r = tls_request(&mut s, "GET /gone HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    assert_eq!(
        (r.status, r.body.as_slice()),
        (404, &b"<p>not here</p>"[..])
    );
}

#[test]
fn listings_come_as_json_on_request_or_by_configuration() {
    let (pier, _dir) = pier();
    let html = get_host(&pier, "t", "/list/", "");
    assert_eq!(html.status, 200);
    assert!(html
        .header("content-type")
        .unwrap()
        .starts_with("text/html"));
    assert_eq!(html.header("vary"), Some("Accept"));

    let json = get_host(&pier, "t", "/list/", "Accept: application/json\r\n");
    assert_eq!(json.header("content-type"), Some("application/json"));
    let forced = get_host(&pier, "json.test", "/list/", "");
    assert_eq!(forced.header("content-type"), Some("application/json"));
    assert_eq!(forced.body, json.body);

    let v: serde_json::Value = serde_json::from_slice(&json.body).unwrap();
    let entries = v.as_array().unwrap();
    let names: Vec<&str> = entries
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["adir", "zdir", "a.glb", "b.txt"],
        "directories first, by name"
    );
    assert_eq!(entries[0]["type"], "directory");
    assert!(entries[0].get("size").is_none());
    assert_eq!(entries[3]["type"], "file");
    assert_eq!(entries[3]["size"], 2);
    assert!(entries[3]["mtime"].as_str().unwrap().ends_with(" GMT"));

    let r = get_host(&pier, "t", "/list/a.glb", "");
    assert_eq!(r.header("content-type"), Some("model/gltf-binary"));

    let (client, _) = recording_client(true);
    let mut s = connect_tls(pier.https[0], "localhost", &client).unwrap();
    let req = "GET /list/ HTTP/1.1\r\nHost: t\r\nAccept: application/json, */*\r\n\r\n";
    let r = tls_request(&mut s, req).unwrap();
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.body, json.body);
    let r = tls_get(&mut s, "/list/a.glb").unwrap();
    assert_eq!(r.header("content-type"), Some("model/gltf-binary"));
}

fn check_error(route_keys: &str, top: &str, want_line: usize, want_key: &str, want_text: &str) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("site")).unwrap();
    let path = dir.path().join("pier.toml");
    let text = format!(
        "[[listener]]\nlisten = \"127.0.0.1:0\"\n{top}\n[[route]]\nhandler = \"static\"\nroot = \"site\"\n{route_keys}"
    );
    std::fs::write(&path, text).unwrap();
    let err = assert_config_error(&path, want_line, want_key);
    assert!(err.contains(want_text), "{err}");
}

#[test]
fn bad_static_rules_are_config_errors_naming_file_line_and_key() {
    check_error(
        "error_pages = { 200 = \"/ok.html\" }\n",
        "",
        7,
        "route[1].error_pages.200",
        "not an error status",
    );
    check_error(
        "error_pages = { 404 = \"404.html\" }\n",
        "",
        7,
        "route[1].error_pages.404",
        "not a path under the root",
    );
    check_error(
        "try_files = [\"{path}\", \"index.html\"]\n",
        "",
        7,
        "route[1].try_files",
        "not a path under the root",
    );
    check_error(
        "try_files = [\"{uri}\"]\n",
        "",
        7,
        "route[1].try_files",
        "only placeholder",
    );
    check_error(
        "autoindex_format = \"xml\"\n",
        "",
        7,
        "route[1].autoindex_format",
        "use \"html\" or \"json\"",
    );
    check_error(
        "",
        "[mime]\nglb = \"gltf\"\n",
        4,
        "mime.glb",
        "not a media type",
    );
    check_error(
        "allow_hidden = \"yes\"\n",
        "",
        7,
        "route[1].allow_hidden",
        "",
    );
}
