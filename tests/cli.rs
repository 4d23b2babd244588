//! The binary's contract: config errors exit 2 naming file, line and key; the
//! embedded default serves HTTP and HTTPS with a generated certificate.

mod common;

use std::process::Command;

use common::{get, which, Pier};

fn pier() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pier"))
}

#[test]
fn check_reports_file_line_and_key_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(
        &path,
        "[[listener]]\nlisten = \"127.0.0.1:8080\"\n\n[[route]]\npath = \"/\"\nhandler = \"static\"\nroot = \"/no/such/dir\"\n",
    )
    .unwrap();
    let out = pier()
        .args(["check", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{}:7: route[1].root", path.display())),
        "{err}"
    );

    std::fs::write(&path, "[server]\nworkers = \"two\"\n").unwrap();
    let out = pier()
        .args(["serve", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(":2: server.workers"), "{err}");

    let out = pier()
        .args(["check", "--config", "/no/such/file.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn check_accepts_a_good_config() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("good.toml");
    std::fs::write(
        &path,
        "[[listener]]\nlisten = \"127.0.0.1:8080\"\n[[route]]\nhandler = \"respond\"\nbody = \"ok\"\n",
    )
    .unwrap();
    let out = pier()
        .args(["check", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn embedded_default_serves_http_and_https() {
    let pier = Pier::embedded(&[
        "--listen",
        "127.0.0.1:0",
        "--tls-listen",
        "127.0.0.1:0",
        "--workers",
        "1",
    ]);
    std::fs::write(pier.root().join("hello.txt"), "Hello, World!").unwrap();
    let resp = get(
        pier.addr(),
        "GET /hello.txt HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
    assert_eq!(resp.body, b"Hello, World!");
    assert_eq!(pier.https.len(), 1, "an HTTPS listener by default");
    let Some(curl) = which("curl") else {
        eprintln!("curl not installed; .ci/run installs it");
        return;
    };
    let out = Command::new(curl)
        .args(["-sS", "--insecure", "--http1.1"])
        .arg(format!(
            "https://localhost:{}/hello.txt",
            pier.https[0].port()
        ))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Hello, World!",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn no_tls_turns_https_off_and_json_logs_work() {
    let pier = Pier::embedded(&[
        "--listen",
        "127.0.0.1:0",
        "--no-tls",
        "--log-format",
        "json",
    ]);
    assert!(pier.https.is_empty());
    assert_eq!(
        get(pier.addr(), "GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n").status,
        404
    );
}

#[test]
fn a_key_that_does_not_fit_its_certificate_names_both_files_in_a_sentence() {
    let dir = tempfile::tempdir().unwrap();
    let a = rcgen::generate_simple_self_signed(vec!["a.test".to_string()]).unwrap();
    let b = rcgen::generate_simple_self_signed(vec!["b.test".to_string()]).unwrap();
    let cert = dir.path().join("a.pem");
    let key = dir.path().join("b.key");
    std::fs::write(&cert, a.cert.pem()).unwrap();
    std::fs::write(&key, b.signing_key.serialize_pem()).unwrap();
    let path = dir.path().join("pier.toml");
    std::fs::write(
        &path,
        format!(
            "[[listener]]\nlisten = \"127.0.0.1:8443\"\n[listener.tls]\ncert = \"{}\"\nkey = \"{}\"\n\
             [[route]]\nhandler = \"respond\"\nbody = \"ok\"\n",
            cert.display(),
            key.display()
        ),
    )
    .unwrap();
    let out = pier()
        .args(["check", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&cert.display().to_string()) && err.contains(&key.display().to_string()),
        "{err}"
    );
    assert!(err.contains("does not belong to the certificate"), "{err}");
    assert!(!err.contains("KeyMismatch"), "{err}");
}

#[test]
fn check_resolves_relative_paths_against_the_config_file_from_another_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("site")).unwrap();
    let path = dir.path().join("pier.toml");
    std::fs::write(
        &path,
        "[[listener]]\nlisten = \"127.0.0.1:8080\"\n[[route]]\nhandler = \"static\"\nroot = \"site\"\n",
    )
    .unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let out = pier()
        .current_dir(elsewhere.path())
        .args(["check", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A relative --config names its directory relative to where Pier runs.
    let out = pier()
        .current_dir(dir.path().parent().unwrap())
        .args(["check", "--config"])
        .arg(dir.path().file_name().unwrap())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "a directory is not a file");
    let out = pier()
        .current_dir(dir.path().parent().unwrap())
        .args(["check", "--config"])
        .arg(std::path::Path::new(dir.path().file_name().unwrap()).join("pier.toml"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The same file with the directory missing names the resolved path.
    std::fs::remove_dir(dir.path().join("site")).unwrap();
    let out = pier()
        .current_dir(elsewhere.path())
        .args(["check", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(":5: route[1].root"), "{err}");
    assert!(
        err.contains(&dir.path().join("site").display().to_string()),
        "{err}"
    );
}

#[test]
fn config_errors_point_at_the_key_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(
        &path,
        "[[listener]]\nlisten = \"127.0.0.1:8080\"\n[[route]]\nhandler = \"respond\"\nbody = \"\"\"\n[[route]]\n\"\"\"\n\nroot = \"/srv\"\n",
    )
    .unwrap();
    let out = pier()
        .args(["check", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "{}:9: route[1].root: `root` is a key of the `static` handler",
            path.display()
        )),
        "{err}"
    );
}

#[test]
fn embedded_default_lists_a_directory_without_index_and_configured_routes_do_not() {
    let pier = Pier::embedded(&["--listen", "127.0.0.1:0", "--no-tls", "--workers", "1"]);
    std::fs::write(pier.root().join("notes <1>.txt"), "twelve bytes").unwrap();
    std::fs::create_dir(pier.root().join("docs")).unwrap();
    let resp = get(pier.addr(), "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert_eq!(resp.status, 200);
    let html = String::from_utf8_lossy(&resp.body);
    assert!(html.contains("<a href=\"docs/\">docs/</a>"), "{html}");
    let file = html
        .lines()
        .find(|l| l.contains("notes &lt;1&gt;.txt</a>"))
        .unwrap_or_else(|| panic!("{html}"));
    assert!(file.ends_with(" 12") && file.contains(" GMT "), "{file}");
    assert!(html.find("docs/").unwrap() < html.find("notes").unwrap());

    // The same directory from a configuration file: autoindex stays off.
    let root = pier.root().display().to_string();
    let configured = Pier::with_config(
        &format!(
            "[[listener]]\nlisten = \"127.0.0.1:0\"\n[[route]]\nhandler = \"static\"\nroot = \"{root}\"\n"
        ),
        &[],
    );
    assert_eq!(
        get(
            configured.addr(),
            "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"
        )
        .status,
        404
    );
}

#[test]
fn help_and_readme_say_what_is_served_http2_included() {
    let out = pier().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("HTTP/2"), "{help}");
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let tls = readme.split("### TLS").nth(1).unwrap();
    let first = &tls[..tls.find("\n\n- ").unwrap_or(tls.len())];
    assert!(first.contains("ALPN `h2`"), "{first}");
}
