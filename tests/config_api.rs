//! `GET /api/config` and `POST /api/config` on the admin listener: the
//! running text with runtime changes marked; a posted configuration that
//! changes what is served, one that is refused with `pier check`'s words
//! while the old one keeps serving, a dry run, the configuration file left
//! alone or replaced atomically (the old text kept), and a post from a page of
//! another origin refused.

mod common;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::upstream::{ok, Upstream};
use common::{check_config, get, Pier};
use rustix::process::Signal;
use serde_json::Value;

fn config(body: &str, admin_extra: &str) -> String {
    format!(
        "[admin]\nlisten = \"127.0.0.1:0\"\n{admin_extra}\
         [[listener]]\nlisten = \"127.0.0.1:0\"\n\
         [[route]]\npath = \"/\"\nhandler = \"respond\"\nbody = \"{body}\"\n"
    )
}

fn config_path(pier: &Pier) -> PathBuf {
    pier.root().join("pier.toml")
}

fn body_at(pier: &Pier) -> String {
    let r = get(pier.addr(), "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.status, 200);
    String::from_utf8(r.body).unwrap()
}

/// `POST path` with `text` as the body and `extra` fields; status and JSON.
fn post_config(admin: SocketAddr, path: &str, text: &str, extra: &str) -> (u16, Value) {
    let r = get(
        admin,
        &format!(
            "POST {path} HTTP/1.1\r\nHost: {admin}\r\nContent-Type: application/toml\r\nContent-Length: {}\r\n{extra}\r\n{text}",
            text.len()
        ),
    );
    let v = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
    (r.status, v)
}

fn running_text(admin: SocketAddr) -> String {
    let r = get(
        admin,
        &format!("GET /api/config HTTP/1.1\r\nHost: {admin}\r\n\r\n"),
    );
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-type"),
        Some("application/toml; charset=utf-8")
    );
    String::from_utf8(r.body).unwrap()
}

/// Takes the log line of the reload a post made, so that a later wait for a
/// reload sees the next one.
fn reloaded_by_post(pier: &Pier) {
    pier.wait_log("configuration reloaded", Duration::from_secs(5))
        .expect("the posted configuration's reload is logged");
}

/// The files of `dir`, sorted by name.
fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn the_running_configuration_is_shown_with_runtime_changes_marked() {
    let (a, b) = (Upstream::start(|_| ok("a")), Upstream::start(|_| ok("b")));
    let text = format!(
        "[admin]\nlisten = \"127.0.0.1:0\"\n[[listener]]\nlisten = \"127.0.0.1:0\"\n\
         [[upstream]]\nname = \"app\"\nservers = [\"{}\", \"{}\"]\n\
         [[route]]\npath = \"/\"\nhandler = \"proxy\"\nupstream = \"app\"\n",
        a.addr, b.addr
    );
    let pier = Pier::with_config(&text, &[]);
    let admin = pier.admin.expect("admin listener");
    let shown = running_text(admin);
    assert!(
        shown.contains("No changes through the runtime API"),
        "{shown}"
    );
    assert!(shown.ends_with(&text), "{shown}");

    let r = get(
        admin,
        &format!(
            "POST /api/upstreams/app/servers/{}/weight?value=3 HTTP/1.1\r\nHost: {admin}\r\nContent-Length: 0\r\n\r\n",
            a.addr
        ),
    );
    assert_eq!(r.status, 200);
    let shown = running_text(admin);
    let mark = format!("server {} weight 3 (configured 1)", a.addr);
    assert!(
        shown.contains(&format!("#   upstream \"app\": {mark}\n")),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("name = \"app\"\n# runtime change: {mark}\n")),
        "{shown}"
    );
    // Posted back, the marked text is the configuration as written: the
    // change is gone with the reload.
    let (status, answer) = post_config(admin, "/api/config", &shown, "");
    assert_eq!(status, 200, "{answer}");
    assert!(running_text(admin).contains("No changes through the runtime API"));
}

#[test]
fn a_posted_configuration_is_applied_and_lasts_until_the_next_reload() {
    let pier = Pier::with_config(&config("one", ""), &[]);
    let admin = pier.admin.expect("admin listener");
    let file = config_path(&pier);
    let written = std::fs::read_to_string(&file).unwrap();
    assert_eq!(body_at(&pier), "one");

    // A dry run validates and changes nothing.
    let (status, answer) = post_config(admin, "/api/config?dry_run=1", &config("two", ""), "");
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["valid"], true);
    assert_eq!(answer["dry_run"], true);
    assert_eq!(answer["applied"], false);
    assert_eq!(body_at(&pier), "one");

    let (status, answer) = post_config(admin, "/api/config", &config("two", ""), "");
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["applied"], true);
    assert!(answer["written"].is_null(), "{answer}");
    let outcome = answer["outcome"].as_str().unwrap();
    assert!(outcome.contains("allow_config_write is off"), "{outcome}");
    assert!(
        outcome.contains("until the next reload or restart"),
        "{outcome}"
    );
    assert_eq!(body_at(&pier), "two");
    assert!(running_text(admin).ends_with(&config("two", "")));
    // The file is untouched and nothing was added beside it.
    assert_eq!(std::fs::read_to_string(&file).unwrap(), written);
    assert_eq!(files_in(pier.root()), ["pier.toml"]);
    let logged = pier
        .wait_log(
            "admin API: applying a posted configuration",
            Duration::from_secs(5),
        )
        .expect("the post is logged");
    assert!(logged.contains("peer=127.0.0.1"), "{logged}");
    assert!(logged.contains("loopback, no token"), "{logged}");

    // A reload reads the file again.
    reloaded_by_post(&pier);
    pier.signal(Signal::HUP);
    pier.wait_log("configuration reloaded", Duration::from_secs(10))
        .expect("reloaded");
    assert_eq!(body_at(&pier), "one");
}

#[test]
fn a_bad_configuration_is_refused_with_pier_checks_words_and_the_old_one_serves() {
    let pier = Pier::with_config(&config("one", ""), &[]);
    let admin = pier.admin.expect("admin listener");
    let bad = config("two", "").replace(
        "handler = \"respond\"",
        "handler = \"respond\"\nstatus = 999",
    );
    for path in ["/api/config", "/api/config?dry_run=1"] {
        let (status, answer) = post_config(admin, path, &bad, "");
        assert_eq!(status, 400, "{answer}");
        assert_eq!(answer["valid"], false);
        assert_eq!(answer["applied"], false);
        let e = &answer["errors"][0];
        assert_eq!(e["file"], config_path(&pier).display().to_string().as_str());
        assert_eq!(e["line"], 8, "{answer}");
        assert_eq!(e["key"], "route[1].status", "{answer}");
        // `pier check` on the same text at the same path says the same.
        let dir = tempfile::tempdir().unwrap();
        let checked = dir.path().join("pier.toml");
        std::fs::write(&checked, &bad).unwrap();
        let (code, err) = check_config(&checked);
        assert_eq!(code, Some(2));
        let words = e["text"].as_str().unwrap().replace(
            &config_path(&pier).display().to_string(),
            &checked.display().to_string(),
        );
        assert_eq!(err.trim(), format!("pier: configuration error: {words}"));
    }
    // Not TOML at all: located as a syntax error.
    let (status, answer) = post_config(admin, "/api/config", "[[route]\n", "");
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["errors"][0]["line"], 1);
    assert_eq!(body_at(&pier), "one");
    assert!(running_text(admin).ends_with(&config("one", "")));
}

#[test]
fn with_allow_config_write_the_file_is_replaced_and_the_old_one_kept() {
    let allow = "allow_config_write = true\n";
    let pier = Pier::with_config(&config("one", allow), &[]);
    let admin = pier.admin.expect("admin listener");
    let file = config_path(&pier);
    let old = std::fs::read_to_string(&file).unwrap();

    // A dry run writes nothing.
    let (status, _) = post_config(admin, "/api/config?dry_run=1", &config("two", allow), "");
    assert_eq!(status, 200);
    assert_eq!(files_in(pier.root()), ["pier.toml"]);

    let (status, answer) = post_config(admin, "/api/config", &config("two", allow), "");
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["written"]["file"],
        file.display().to_string().as_str()
    );
    let previous = format!("{}.prev", file.display());
    assert_eq!(answer["written"]["previous"], previous.as_str());
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        config("two", allow)
    );
    assert_eq!(std::fs::read_to_string(&previous).unwrap(), old);
    // No temporary file left behind.
    assert_eq!(files_in(pier.root()), ["pier.toml", "pier.toml.prev"]);
    assert_eq!(body_at(&pier), "two");
    // A reload reads the written file: the posted configuration stays.
    reloaded_by_post(&pier);
    pier.signal(Signal::HUP);
    pier.wait_log("configuration reloaded", Duration::from_secs(10))
        .expect("reloaded");
    assert_eq!(body_at(&pier), "two");
    // A bad configuration is not written.
    let (status, _) = post_config(admin, "/api/config", "[server]\nworkers = -1\n", "");
    assert_eq!(status, 400);
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        config("two", allow)
    );
}

#[test]
fn a_configuration_posted_from_a_page_of_another_origin_is_refused() {
    let pier = Pier::with_config(&config("one", ""), &[]);
    let admin = pier.admin.expect("admin listener");
    for extra in [
        "Origin: http://evil.example\r\n".to_string(),
        "Sec-Fetch-Site: cross-site\r\n".to_string(),
    ] {
        let (status, answer) = post_config(admin, "/api/config", &config("two", ""), &extra);
        assert_eq!(status, 403, "{extra}: {answer}");
    }
    // DNS rebinding: the page's own name as Host, with its own origin.
    let text = config("two", "");
    let r = get(
        admin,
        &format!(
            "POST /api/config HTTP/1.1\r\nHost: evil.example:{port}\r\nOrigin: http://evil.example:{port}\r\nContent-Length: {}\r\n\r\n{text}",
            text.len(),
            port = admin.port()
        ),
    );
    assert_eq!(r.status, 403);
    // A read under that name is refused too: the page cannot read the configuration.
    let r = get(
        admin,
        &format!(
            "GET /api/config HTTP/1.1\r\nHost: evil.example:{}\r\n\r\n",
            admin.port()
        ),
    );
    assert_eq!(r.status, 403);
    assert_eq!(body_at(&pier), "one");
    // From the listener's own origin it is taken.
    let (status, answer) = post_config(
        admin,
        "/api/config",
        &config("two", ""),
        &format!("Origin: http://{admin}\r\n"),
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(body_at(&pier), "two");
}

#[test]
fn an_oversized_configuration_is_refused_unread() {
    let pier = Pier::with_config(&config("one", ""), &[]);
    let admin = pier.admin.expect("admin listener");
    let r = get(
        admin,
        &format!(
            "POST /api/config HTTP/1.1\r\nHost: {admin}\r\nContent-Length: {}\r\n\r\n",
            2 * 1024 * 1024
        ),
    );
    assert_eq!(r.status, 413);
    // Not UTF-8: not a configuration.
    let mut stream = std::net::TcpStream::connect(admin).unwrap();
    let head = format!(
        "POST /api/config HTTP/1.1\r\nHost: {admin}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(&[0xff, 0xfe]).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    assert!(answer.contains("UTF-8"), "{answer}");
    assert_eq!(body_at(&pier), "one");
}

#[test]
fn a_valid_configuration_whose_reload_fails_answers_500_and_the_old_one_serves() {
    let allow = "allow_config_write = true\n";
    let pier = Pier::with_config(&config("one", allow), &[]);
    let admin = pier.admin.expect("admin listener");
    let file = config_path(&pier);
    // A port another socket holds (without SO_REUSEPORT): valid, not bindable.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let text = format!(
        "{}[[listener]]\nlisten = \"{}\"\n",
        config("two", allow),
        taken.local_addr().unwrap()
    );
    let (status, answer) = post_config(admin, "/api/config", &text, "");
    assert_eq!(status, 500, "{answer}");
    assert_eq!(answer["valid"], true);
    assert_eq!(answer["applied"], false);
    let outcome = answer["outcome"].as_str().unwrap();
    assert!(outcome.contains("the reload failed"), "{outcome}");
    assert!(!outcome.contains("os error"), "{outcome}");
    assert_eq!(body_at(&pier), "one");
    // Not written either.
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        config("one", allow)
    );
    assert_eq!(files_in(pier.root()), ["pier.toml"]);
}

#[test]
fn a_server_without_a_configuration_file_runs_a_posted_one_unwritten() {
    let pier = Pier::embedded(&[
        "--listen",
        "127.0.0.1:0",
        "--no-tls",
        "--admin",
        "127.0.0.1:0",
        "--workers",
        "1",
    ]);
    let admin = pier.admin.expect("admin listener");
    let allow = "allow_config_write = true\n";
    for _ in 0..2 {
        let (status, answer) = post_config(admin, "/api/config", &config("two", allow), "");
        assert_eq!(status, 200, "{answer}");
        let outcome = answer["outcome"].as_str().unwrap();
        assert!(
            outcome.contains("without a configuration file"),
            "{outcome}"
        );
        assert!(answer["written"].is_null(), "{answer}");
    }
    assert_eq!(body_at(&pier), "two");
    assert_eq!(files_in(pier.root()), Vec::<String>::new());
    let bad = config("three", "").replace(
        "handler = \"respond\"",
        "handler = \"respond\"\nstatus = 999",
    );
    let (status, answer) = post_config(admin, "/api/config", &bad, "");
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["errors"][0]["file"], "posted configuration");
    assert_eq!(answer["errors"][0]["line"], 8);
    assert_eq!(answer["errors"][0]["key"], "route[1].status");
    assert_eq!(body_at(&pier), "two");
}
