//! Unit tests of the configuration stages: locations, values, flags.

use super::build::{load, load_file, load_str};
use super::*;
use crate::observe::access_log::{LogFormat, LogTarget};

use super::check_text as check;

const LISTENER: &str = "[[listener]]\nlisten = \"127.0.0.1:1\"\n";

/// A listener and a `respond` route: the least a configuration needs.
const LISTENER_AND_ROUTE: &str =
    "[[listener]]\nlisten = \"127.0.0.1:1\"\n[[route]]\nhandler = \"respond\"\n";

/// Checks `text`, which must be refused at `line` on `key`, and returns the
/// error for its message.
fn refused_at(text: &str, line: usize, key: &str) -> ConfigError {
    let e = check(text).unwrap_err();
    e.assert_at(line, key);
    e
}

#[test]
fn files_named_by_the_config_are_read_bounded() {
    // Each of these once read /dev/zero until memory ran out.
    let listener = "[[listener]]\nlisten = \"127.0.0.1:1\"\n";
    let route = "[[route]]\nhandler = \"respond\"\n";
    for (tls, key) in [
        (
            "{ self_signed = true, ticket_key_file = \"/dev/zero\" }",
            "listener[1].tls.ticket_key_file",
        ),
        (
            "{ cert = \"/dev/zero\", key = \"/dev/zero\" }",
            "listener[1].tls.cert",
        ),
        (
            "{ self_signed = true, client_auth = \"required\", client_ca = \"/dev/zero\" }",
            "listener[1].tls.client_ca",
        ),
    ] {
        let text = format!("{listener}tls = {tls}\n{route}");
        let e = refused_at(&text, 3, key);
        assert!(e.message.contains("not a regular file"), "{e}");
    }
    let text = format!(
        "{listener}{route}[[upstream]]\nname = \"u\"\nservers = [{{ address = \"127.0.0.1:2\" }}]\ntls = {{ ca = \"/dev/zero\" }}\n"
    );
    refused_at(&text, 8, "upstream[1].tls.ca");

    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.key");
    std::fs::write(&big, vec![b'k'; 5000]).unwrap();
    let e = check(&format!(
        "{listener}tls = {{ self_signed = true, ticket_key_file = {:?} }}\n{route}",
        big.display().to_string()
    ))
    .unwrap_err();
    assert!(e.message.contains("larger than 4096 bytes"), "{e}");
    let e = read_named_file("/dev/null", 10).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert_eq!(
        read_named_file(big.to_str().unwrap(), 5000).unwrap().len(),
        5000
    );
}

#[test]
fn syntax_error_names_line_and_key() {
    let e = check("[server]\nworkers = 2\n\n[http]\nmax_headers = \"many\"\n").unwrap_err();
    assert_eq!(e.file, "t.toml");
    assert_eq!(e.line, 5);
    assert_eq!(e.key, "http.max_headers");
}

#[test]
fn unknown_key_is_rejected_with_its_line() {
    let e = check("[[listener]]\nlisten = \"127.0.0.1:1\"\nlisen = 3\n").unwrap_err();
    assert_eq!(e.line, 3);
    assert_eq!(e.key, "listener[1].lisen");
    assert!(e.message.contains("unknown field"), "{}", e.message);
}

#[test]
fn unknown_key_in_nested_tables_names_the_element() {
    let text = "[[listener]]\nlisten = \"127.0.0.1:1\"\n[[listener]]\nlisten = \"127.0.0.1:2\"\n\
                [listener.tls]\nself_signed = true\n[[listener.tls.certificate]]\ncert = \"a\"\nkey = \"k\"\n\
                [[listener.tls.certificate]]\ncert = \"b\"\nkey = \"k\"\nbogus = 1\n";
    let e = check(text).unwrap_err();
    assert_eq!(e.line, 13);
    assert_eq!(e.key, "listener[2].tls.certificate[2].bogus");
    let e =
        check("[[listener]]\nlisten = \"127.0.0.1:1\"\n[listener.tls]\nbogus = 1\n").unwrap_err();
    assert_eq!(e.key, "listener[1].tls.bogus");
}

#[test]
fn bad_listen_address_names_the_listener() {
    let text = "[[listener]]\nlisten = \"127.0.0.1:1\"\n\n[[listener]]\nlisten = \"nowhere\"\n\n[[route]]\nhandler = \"respond\"\n";
    refused_at(text, 5, "listener[2].listen");
}

#[test]
fn bad_duration_and_range() {
    let base = LISTENER_AND_ROUTE;
    let keepalive = format!("[http]\nkeepalive_timeout = \"5 fortnights\"\n{base}");
    refused_at(&keepalive, 2, "http.keepalive_timeout");
    let workers = format!("[server]\nworkers = -1\n{base}");
    refused_at(&workers, 2, "server.workers");
    let ok = check(&format!(
        "[http]\nheader_read_timeout = \"250ms\"\nkeepalive_timeout = 5\n{base}"
    ))
    .unwrap();
    assert_eq!(ok.http.header_read_timeout, Duration::from_millis(250));
    assert_eq!(ok.http.keepalive_timeout, Duration::from_secs(5));
}

#[test]
fn max_connections_is_split_across_workers() {
    let base = LISTENER_AND_ROUTE;
    let cfg = check(&format!(
        "[server]\nworkers = 3\nmax_connections = 10\n{base}"
    ))
    .unwrap();
    assert_eq!(cfg.max_connections_per_worker(), 4);
    let unlimited = check(&format!("[server]\nworkers = 3\n{base}")).unwrap();
    assert_eq!(unlimited.max_connections_per_worker(), 0);
    let negative = format!("[server]\nworkers = 2\nmax_connections = -5\n{base}");
    refused_at(&negative, 3, "server.max_connections");
}

#[test]
fn max_in_flight_is_split_across_workers_and_retry_after_rounds_up() {
    let group = |extra: &str| {
        format!(
            "[server]\nworkers = 3\n[[listener]]\nlisten = \"127.0.0.1:1\"\n[[upstream]]\nname = \"app\"\nservers = [{{ address = \"127.0.0.1:9\" }}]\n{extra}\n[[route]]\nhandler = \"proxy\"\nupstream = \"app\"\n"
        )
    };
    let cfg = check(&group("max_in_flight = 10\nretry_after = \"1500ms\"")).unwrap();
    let app = &cfg.upstreams[0];
    assert_eq!(app.max_in_flight_per_worker(cfg.workers), 4);
    assert_eq!(&*app.retry_after, "2");
    let cfg = check(&group("")).unwrap();
    assert_eq!(cfg.upstreams[0].max_in_flight_per_worker(cfg.workers), 0);
    assert_eq!(&*cfg.upstreams[0].retry_after, "1");
    refused_at(&group("max_in_flight = -1"), 8, "upstream[1].max_in_flight");
    refused_at(&group("retry_after = \"2h\""), 8, "upstream[1].retry_after");
}

#[test]
fn the_idle_pool_follows_load_up_to_max_idle_peak() {
    let group = |extra: &str| {
        format!(
            "[[listener]]\nlisten = \"127.0.0.1:1\"\n[[upstream]]\nname = \"app\"\nservers = [{{ address = \"127.0.0.1:9\" }}]\n{extra}\n[[route]]\nhandler = \"proxy\"\nupstream = \"app\"\n"
        )
    };
    let cfg = check(&group("")).unwrap();
    let app = &cfg.upstreams[0];
    assert_eq!(
        (app.max_idle, app.max_idle_peak, app.idle_peak_window),
        (64, 1024, Duration::from_secs(5))
    );
    let cfg = check(&group(
        "max_idle = 8\nmax_idle_peak = 0\nidle_peak_window = \"500ms\"",
    ))
    .unwrap();
    let app = &cfg.upstreams[0];
    assert_eq!(
        (app.max_idle, app.max_idle_peak, app.idle_peak_window),
        (8, 0, Duration::from_millis(500))
    );
    refused_at(&group("max_idle_peak = -1"), 6, "upstream[1].max_idle_peak");
    refused_at(
        &group("max_idle_peak = 10001"),
        6,
        "upstream[1].max_idle_peak",
    );
    let e = refused_at(
        &group("idle_peak_window = \"0s\""),
        6,
        "upstream[1].idle_peak_window",
    );
    assert!(e.message.contains("above zero"), "{e}");
    refused_at(
        &group("idle_peak_window = \"soon\""),
        6,
        "upstream[1].idle_peak_window",
    );
}

#[test]
fn embedded_default_is_valid() {
    let args = Overrides {
        no_tls: true,
        ..Default::default()
    };
    let cfg = load(None, &args).unwrap();
    assert_eq!(cfg.listeners.len(), 1);
    assert_eq!(cfg.listeners[0].addr, "127.0.0.1:8080".parse().unwrap());
    let with_tls = load(None, &Overrides::default()).unwrap();
    assert_eq!(with_tls.listeners.len(), 2);
    assert!(with_tls.listeners[1].tls.is_some());
}

#[test]
fn flags_override_the_file() {
    let args = Overrides {
        listen: vec!["127.0.0.1:9999".parse().unwrap()],
        workers: Some(3),
        no_tls: true,
        ..Default::default()
    };
    let cfg = load(None, &args).unwrap();
    assert_eq!(cfg.workers, 3);
    assert_eq!(cfg.listeners[0].addr.port(), 9999);
}

#[test]
fn missing_root_is_a_command_line_error() {
    let args = Overrides {
        root: Some("/definitely/not/here".into()),
        no_tls: true,
        ..Default::default()
    };
    let e = load(None, &args).unwrap_err();
    assert_eq!(e.file, "command line");
    assert!(e.key.ends_with(".root"), "{}", e.key);
}

#[test]
fn admin_is_off_unless_configured_and_loopback_by_default() {
    let base =
        "[[listener]]\nlisten = \"127.0.0.1:1\"\n[[route]]\npath = \"/\"\nhandler = \"respond\"\n";
    assert_eq!(check(base).unwrap().admin, None);
    let on = check(&format!("{base}[admin]\nlisten = \"127.0.0.1:9090\"\n")).unwrap();
    assert_eq!(on.admin, Some("127.0.0.1:9090".parse().unwrap()));
    let e = check(&format!("{base}\n[admin]\nlisten = \"0.0.0.0:9090\"\n")).unwrap_err();
    assert_eq!(
        (e.file.as_str(), e.line, e.key.as_str()),
        ("t.toml", 8, "admin.listen")
    );
    assert!(e.message.contains("allow_remote"), "{}", e.message);
    let remote = check(&format!(
        "{base}[admin]\nlisten = \"0.0.0.0:9090\"\nallow_remote = true\n"
    ))
    .unwrap();
    assert_eq!(remote.admin, Some("0.0.0.0:9090".parse().unwrap()));
}

#[test]
fn admin_config_write_is_off_unless_set_and_the_text_is_kept() {
    let base =
        "[[listener]]\nlisten = \"127.0.0.1:1\"\n[[route]]\npath = \"/\"\nhandler = \"respond\"\n";
    let off = check(&format!("{base}[admin]\nlisten = \"127.0.0.1:9090\"\n")).unwrap();
    assert!(!off.allow_config_write);
    assert_eq!(
        &*off.text,
        format!("{base}[admin]\nlisten = \"127.0.0.1:9090\"\n")
    );
    let on = check(&format!(
        "{base}[admin]\nlisten = \"127.0.0.1:9090\"\nallow_config_write = true\n"
    ))
    .unwrap();
    assert!(on.allow_config_write);
    let e = check(&format!(
        "{base}[admin]\nlisten = \"127.0.0.1:9090\"\nallow_config_write = \"yes\"\n"
    ))
    .unwrap_err();
    assert_eq!(
        (e.line, e.key.as_str()),
        (8, "admin.allow_config_write"),
        "{e}"
    );
}

#[test]
fn admin_flag_is_refused_off_loopback_from_the_command_line() {
    let args = Overrides {
        no_tls: true,
        admin: Some("192.0.2.1:9090".parse().unwrap()),
        ..Default::default()
    };
    let e = load(None, &args).unwrap_err();
    assert_eq!(
        (e.file.as_str(), e.key.as_str()),
        ("command line", "admin.listen")
    );
}

#[test]
fn access_log_is_off_by_default_and_errors_name_line_and_key() {
    let base =
        "[[listener]]\nlisten = \"127.0.0.1:1\"\n[[route]]\npath = \"/\"\nhandler = \"respond\"\n";
    assert_eq!(check(base).unwrap().access_log, None);
    let on = check(&format!(
        "{base}[access_log]\npath = \"-\"\nformat = \"json\"\nbuffer = \"16KiB\"\nflush_interval = \"250ms\"\n"
    ))
    .unwrap()
    .access_log
    .unwrap();
    assert_eq!(on.target, LogTarget::Stdout);
    assert_eq!(on.format, LogFormat::Json);
    assert_eq!(on.buffer, 16 * 1024);
    assert_eq!(on.flush_interval, Duration::from_millis(250));
    let defaults = check(&format!("{base}[access_log]\npath = \"/tmp/a.log\"\n"))
        .unwrap()
        .access_log
        .unwrap();
    assert_eq!(defaults.format, LogFormat::Combined);
    assert_eq!(defaults.buffer, 64 * 1024);
    assert_eq!(defaults.flush_interval, Duration::from_secs(1));
    for (extra, line, key) in [
        ("format = \"xml\"", 8, "access_log.format"),
        ("buffer = \"64 parsecs\"", 8, "access_log.buffer"),
        ("buffer = 0", 8, "access_log.buffer"),
        ("flush_interval = \"0s\"", 8, "access_log.flush_interval"),
    ] {
        let e = check(&format!("{base}[access_log]\npath = \"-\"\n{extra}\n")).unwrap_err();
        assert_eq!(
            (e.file.as_str(), e.line, e.key.as_str()),
            ("t.toml", line, key),
            "{extra}: {e}"
        );
    }
    let empty_path = format!("{base}[access_log]\npath = \"\"\n");
    refused_at(&empty_path, 7, "access_log.path");
}

#[test]
fn a_route_header_inside_a_multi_line_string_does_not_shift_the_route_index() {
    // The line scanner counted the `[[route]]` inside the body and blamed route 3.
    let text = format!(
        "{LISTENER}[[route]]\npath = \"/a\"\nhandler = \"respond\"\nbody = \"\"\"\n[[route]]\nnot a key\n\"\"\"\n\
         [[route]]\npath = \"/b\"\nhandler = \"respond\"\nstatuss = 200\n"
    );
    let e = refused_at(&text, 13, "route[2].statuss");
    assert!(e.message.contains("did you mean `status`?"), "{e}");
}

#[test]
fn a_key_of_another_handler_is_reported_at_its_own_line() {
    // It was reported at the route's `[[route]]` header line.
    let text = format!(
        "{LISTENER}\n[[route]]\npath = \"/\"\nhandler = \"respond\"\nbody = \"ok\"\n\nroot = \"/srv\"\n"
    );
    let e = refused_at(&text, 9, "route[1].root");
    assert_eq!(
        e.message,
        "`root` is a key of the `static` handler; this route's handler is `respond`"
    );
    let text =
        format!("{LISTENER}[[route]]\nhandler = \"static\"\nroot = \"/\"\n\nupstream = \"x\"\n");
    let e = refused_at(&text, 7, "route[1].upstream");
    assert!(e.message.contains("`proxy` handler"), "{e}");
}

#[test]
fn route_level_errors_name_the_route_and_key() {
    let route = |keys: &str| format!("{LISTENER}[[route]]\n{keys}");
    refused_at(&route("path = \"/\"\n"), 3, "route[1].handler");
    let e = refused_at(&route("handler = \"fastcgi\"\n"), 4, "route[1].handler");
    assert!(e.message.contains("unknown handler \"fastcgi\""), "{e}");
    let e = check(&format!("route = 3\n{LISTENER}")).unwrap_err();
    assert_eq!(e.key, "route", "{e}");
    let respond_with_body = route("handler = \"respond\"\nstatus = 204\nbody = \"x\"\n");
    refused_at(&respond_with_body, 6, "route[1].body");
}

#[test]
fn unknown_keys_in_inline_tables_and_arrays_name_their_element() {
    let text = format!(
        "{LISTENER}[[route]]\nhandler = \"respond\"\n[[upstream]]\nname = \"u\"\nservers = [\n  {{ address = \"127.0.0.1:2\" }},\n  {{ address = \"127.0.0.1:3\", wieght = 2 }},\n]\n"
    );
    let e = refused_at(&text, 9, "upstream[1].servers[2].wieght");
    assert!(e.message.contains("did you mean `weight`?"), "{e}");
}

#[test]
fn syntax_errors_name_the_line_and_no_key() {
    let e = check("[server]\nworkers = 2\n[http]\nmax_headers = \n").unwrap_err();
    assert_eq!(e.line, 4, "{e}");
    assert_eq!(e.key, "", "{e}");
    assert!(e.message.starts_with("TOML syntax error: "), "{e}");
}

#[test]
fn durations_and_sizes_in_the_usual_forms() {
    let base = format!("{LISTENER}[[route]]\nhandler = \"respond\"\n");
    let cfg = check(&format!(
        "[http]\nkeepalive_timeout = \"1m30s\"\n{base}[access_log]\npath = \"-\"\nbuffer = \"512KB\"\nflush_interval = \"1.5s\"\n"
    ))
    .unwrap();
    assert_eq!(cfg.http.keepalive_timeout, Duration::from_secs(90));
    let log = cfg.access_log.unwrap();
    assert_eq!(log.buffer, 512 * 1024);
    assert_eq!(log.flush_interval, Duration::from_millis(1500));
    for size in ["64k", "1 MiB"] {
        let cfg = check(&format!(
            "{base}[access_log]\npath = \"-\"\nbuffer = \"{size}\"\n"
        ))
        .unwrap();
        assert!(cfg.access_log.unwrap().buffer >= 64 * 1024, "{size}");
    }
}

#[test]
fn relative_paths_resolve_against_the_config_files_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("site")).unwrap();
    let path = dir.path().join("pier.toml");
    std::fs::write(
        &path,
        format!("{LISTENER}[[route]]\nhandler = \"static\"\nroot = \"site\"\n[access_log]\npath = \"logs/access.log\"\n"),
    )
    .unwrap();
    let cfg = load_file(&path).unwrap();
    let Some(AccessLogConfig {
        target: LogTarget::File(log),
        ..
    }) = &cfg.access_log
    else {
        panic!("a file target");
    };
    assert_eq!(log, &dir.path().join("logs/access.log"));
    // The same text from elsewhere (load_str) reads paths from the current directory.
    let e = load_str("t.toml", &std::fs::read_to_string(&path).unwrap()).unwrap_err();
    assert_eq!(e.key, "route[1].root", "{e}");
}

#[test]
fn a_misspelt_handler_key_is_named() {
    let e = refused_at(
        &format!("{LISTENER}[[route]]\nhandlr = \"respond\"\n"),
        4,
        "route[1].handlr",
    );
    assert!(e.message.contains("did you mean `handler`?"), "{e}");
}

#[test]
fn a_relative_htpasswd_is_read_beside_the_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let hash = bcrypt::hash_with_salt("pw", 4, [5u8; 16])
        .unwrap()
        .to_string();
    std::fs::write(dir.path().join("users"), format!("alice:{hash}\n")).unwrap();
    let path = dir.path().join("pier.toml");
    std::fs::write(
        &path,
        format!(
            "{LISTENER}[[route]]\nhandler = \"respond\"\nbasic_auth = {{ htpasswd = \"users\" }}\n"
        ),
    )
    .unwrap();
    load_file(&path).unwrap();
    let e = load_str("t.toml", &std::fs::read_to_string(&path).unwrap()).unwrap_err();
    assert_eq!(e.key, "route[1].basic_auth.htpasswd", "{e}");
    assert!(e.message.starts_with("cannot read users"), "{e}");
}

#[test]
fn unknown_choices_name_the_value_and_every_choice_on_their_key() {
    let upstream = "[[upstream]]\nname = \"u\"\nservers = [{ address = \"127.0.0.1:2\" }]\n";
    let route = "[[route]]\nhandler = \"proxy\"\nupstream = \"u\"\n";
    let cases = [
        (
            format!("[[listener]]\nlisten = \"127.0.0.1:1\"\nkind = \"udp\"\n{upstream}{route}"),
            (3, "listener[1].kind"),
            "unknown listener kind \"udp\"; expected \"http\" or \"tcp\"",
        ),
        (
            format!(
                "[[listener]]\nlisten = \"127.0.0.1:1\"\n{upstream}balance = \"random\"\n{route}"
            ),
            (6, "upstream[1].balance"),
            "unknown balance \"random\"; expected \"round_robin\", \"least_conn\" or \"hash\"",
        ),
        (
            format!(
                "[[listener]]\nlisten = \"127.0.0.1:1\"\n{upstream}{route}forwarded = \"all\"\n"
            ),
            (9, "route[1].forwarded"),
            "unknown value \"all\"; expected \"x-forwarded\", \"forwarded\", \"both\" or \"none\"",
        ),
    ];
    for (text, (line, key), message) in cases {
        let e = refused_at(&text, line, key);
        assert_eq!(e.message, message);
    }
}

#[test]
fn a_missing_or_unknown_upstream_is_named_for_routes_and_tcp_listeners() {
    let upstream = "[[upstream]]\nname = \"u\"\nservers = [{ address = \"127.0.0.1:2\" }]\n";
    let route = "[[route]]\nhandler = \"respond\"\n";
    let e = check(&format!(
        "[[listener]]\nlisten = \"127.0.0.1:1\"\nkind = \"tcp\"\n{upstream}{route}"
    ))
    .unwrap_err();
    assert_eq!(e.key, "listener[1].upstream", "{e}");
    assert_eq!(e.message, "a tcp listener needs `upstream`");
    let e = refused_at(&format!(
        "[[listener]]\nlisten = \"127.0.0.1:1\"\n{upstream}[[route]]\nhandler = \"proxy\"\nupstream = \"v\"\n"
    ), 8, "route[1].upstream");
    assert_eq!(e.message, "no [[upstream]] named \"v\"");
}

#[test]
fn precompressed_names_only_codings_pier_serves_once_each() {
    let route = |list: &str| {
        format!("{LISTENER}[[route]]\nhandler = \"static\"\nroot = \"/\"\nprecompressed = {list}\n")
    };
    assert!(check(&route("[\"br\", \"zstd\", \"gzip\"]")).is_ok());
    let e = refused_at(&route("[\"br\", \"deflate\"]"), 6, "route[1].precompressed");
    assert!(e.message.contains("\"deflate\" is not a coding"), "{e}");
    let e = check(&route("[\"gzip\", \"gzip\"]")).unwrap_err();
    assert!(e.message.contains("listed twice"), "{e}");
}

#[test]
fn http2_settings_alpn_and_prior_knowledge_are_validated_with_their_line() {
    let route = "[[route]]\nhandler = \"respond\"\n";
    let ok = check(&format!(
        "[http2]\nmax_concurrent_streams = 16\nidle_timeout = \"2s\"\n\
         [[listener]]\nlisten = \"127.0.0.1:1\"\nhttp2 = true\n\
         [[listener]]\nlisten = \"127.0.0.1:2\"\ntls = {{ self_signed = true }}\n\
         [[listener]]\nlisten = \"127.0.0.1:3\"\nalpn = [\"http/1.1\"]\ntls = {{ self_signed = true }}\n{route}"
    ))
    .unwrap();
    assert_eq!(ok.http2.max_concurrent_streams, 16);
    assert_eq!(ok.http2.idle_timeout, Duration::from_secs(2));
    assert_eq!(ok.http2.max_inert_frames, 2000, "the default");
    assert_eq!(
        ok.http2.max_client_resets,
        Http2Config::default().max_client_resets
    );
    let h2: Vec<bool> = ok.listeners.iter().map(|l| l.http2).collect();
    assert_eq!(h2, [true, true, false]);

    let e = check(&format!(
        "[http2]\nmax_concurrent_streams = 0\n[[listener]]\nlisten = \"127.0.0.1:1\"\n{route}"
    ))
    .unwrap_err();
    assert_eq!(
        (e.line, e.key.as_str()),
        (2, "http2.max_concurrent_streams")
    );
    let e = check(&format!(
        "[http2]\nmax_requests = 5\nmax_inert_frames = 3\n[[listener]]\nlisten = \"127.0.0.1:1\"\n{route}"
    ))
    .unwrap_err();
    assert_eq!((e.line, e.key.as_str()), (3, "http2.max_inert_frames"));
    let e = check(&format!(
        "[[listener]]\nlisten = \"127.0.0.1:1\"\nalpn = [\"h2\"]\n{route}"
    ))
    .unwrap_err();
    assert_eq!((e.line, e.key.as_str()), (3, "listener[1].alpn"));
    let e = check(&format!(
        "[[listener]]\nlisten = \"127.0.0.1:1\"\ntls = {{ self_signed = true }}\nalpn = [\"h2\", \"spdy/3\"]\n{route}"
    ))
    .unwrap_err();
    assert_eq!((e.line, e.key.as_str()), (4, "listener[1].alpn"));
    assert!(e.to_string().contains("spdy/3"), "{e}");
}

#[test]
fn compress_takes_a_switch_or_a_checked_table() {
    let route =
        |value: &str| format!("{LISTENER}[[route]]\nhandler = \"respond\"\ncompress = {value}\n");
    for ok in [
        "true",
        "false",
        "{ types = [\"text/*\", \"application/*+json\"], min_length = \"1k\" }",
        "{ codings = [\"gzip\"], levels = { gzip = 9, br = 11, zstd = 19 } }",
        "{ enabled = false }",
    ] {
        assert!(check(&route(ok)).is_ok(), "{ok}");
    }
    for (bad, says) in [
        ("\"yes\"", "write `compress = true`"),
        ("{ codings = [\"deflate\"] }", "\"deflate\" is not a coding"),
        ("{ codings = [] }", "codings is empty"),
        ("{ types = [\"html\"] }", "is not a media type"),
        (
            "{ levels = { gzip = 10 } }",
            "gzip takes a level from 1 to 9, not 10",
        ),
        ("{ levels = { lz4 = 1 } }", "\"lz4\" is not a coding"),
        ("{ level = 3 }", "unknown field `level`"),
    ] {
        let e = check(&route(bad)).unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (5, "route[1].compress"), "{e}");
        assert!(e.message.contains(says), "{bad}: {e}");
    }
}
