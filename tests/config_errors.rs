//! Configuration errors as an operator meets them: `pier check` exits 2 and
//! names the file, the line and the key, and says what was expected in words,
//! never in the names of Pier's Rust types.

mod common;

use common::{assert_config_error, check_config};

const BASE: &str = "[[listener]]\nlisten = \"127.0.0.1:1\"\n[[route]]\nhandler = \"respond\"\n";

/// Words a configuration error must never show: Rust type names.
fn assert_no_rust_names(err: &str) {
    for word in [
        "Raw", "i64", "u64", "struct", "enum", "untagged", "os error",
    ] {
        assert!(!err.contains(word), "{word:?} in: {err}");
    }
}

#[test]
fn values_of_the_wrong_type_say_what_is_expected_in_words() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.toml");
    for (extra, line, key, words) in [
        (
            "[server]\nworkers = \"two\"",
            6,
            "server.workers",
            "expected a whole number, not the string \"two\"",
        ),
        (
            "[[listener]]\nlisten = \"127.0.0.1:2\"\ntls = true",
            7,
            "listener[2].tls",
            "expected a table",
        ),
        (
            "[[route]]\nhandler = \"redirect\"\nto = \"/x\"\nstatus = \"301\"",
            8,
            "route[2].status",
            "expected a whole number",
        ),
        (
            "[http]\nkeepalive_timeout = true",
            6,
            "http.keepalive_timeout",
            "expected a duration such as \"10s\"",
        ),
        (
            "[http]\nmax_body_bytes = true",
            6,
            "http.max_body_bytes",
            "expected a size such as \"10M\"",
        ),
        (
            "[[route]]\nhandler = \"respond\"\nrate_limit = { rate = true }",
            7,
            "route[2].rate_limit.rate",
            "expected a rate such as \"10/s\"",
        ),
        (
            "[[route]]\nhandler = \"respond\"\nallow = \"10.0.0.0/8\"",
            7,
            "route[2].allow",
            "expected a list",
        ),
        (
            "[[upstream]]\nname = \"u\"\nservers = [3]",
            7,
            "upstream[1].servers[1]",
            "expected a server address such as",
        ),
    ] {
        std::fs::write(&path, format!("{BASE}{extra}\n")).unwrap();
        let err = assert_config_error(&path, line, key);
        assert!(err.contains(words), "want {words:?}: {err}");
        assert_no_rust_names(&err);
    }
}

#[test]
fn sizes_take_units_wherever_a_size_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.toml");
    std::fs::write(
        &path,
        format!(
            "[http]\nmax_body_bytes = \"10M\"\nmax_head_bytes = \"16KiB\"\nmax_uri_bytes = \"4k\"\n\
             [http2]\nmax_send_buffer = \"1MiB\"\ninitial_stream_window = \"512KiB\"\n{BASE}"
        ),
    )
    .unwrap();
    let (code, err) = check_config(&path);
    assert_eq!(code, Some(0), "{err}");
    std::fs::write(
        &path,
        format!("[http]\nmax_body_bytes = \"10 parsecs\"\n{BASE}"),
    )
    .unwrap();
    let err = assert_config_error(&path, 2, "http.max_body_bytes");
    assert!(err.contains("invalid size \"10 parsecs\""), "{err}");
}

#[test]
fn a_toml_syntax_error_names_its_line_and_blames_no_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("junk.toml");
    std::fs::write(
        &path,
        "[[listener]]\nlisten = \"127.0.0.1:1\"\n[[route]]\nhandler = \"static\"\nroot = \"/srv\"\nthis is not toml\n",
    )
    .unwrap();
    let (code, err) = check_config(&path);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!("{}:6: TOML syntax error: ", path.display())),
        "{err}"
    );
    assert!(
        !err.contains("route[1]"),
        "a syntax error blames no key: {err}"
    );
}

#[test]
fn check_names_a_missing_error_page_file_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("site")).unwrap();
    let path = dir.path().join("t.toml");
    std::fs::write(
        &path,
        "[[listener]]\nlisten = \"127.0.0.1:1\"\n[[route]]\nhandler = \"static\"\nroot = \"site\"\n\
         error_pages = { 404 = \"/404.html\" }\n",
    )
    .unwrap();
    let err = assert_config_error(&path, 6, "route[1].error_pages.404");
    let missing = dir.path().join("site").join("404.html");
    assert!(
        err.contains(&format!(
            "the error page {} does not exist",
            missing.display()
        )),
        "{err}"
    );
    // Once the file is there, the check passes.
    std::fs::write(&missing, "<p>not here</p>").unwrap();
    let (code, err) = check_config(&path);
    assert_eq!(code, Some(0), "{err}");
}
