//! Access control of a route over real connections: `allow` / `deny` by
//! client address (source addresses on 127.0.0.0/8, IPv6 loopback, the PROXY
//! protocol, `X-Forwarded-For` from a trusted proxy), `basic_auth` from an htpasswd file (bcrypt and argon2, off the
//! event loop, re-read on reload), and `rate_limit` (429 with `Retry-After`,
//! one count across workers, a bounded table).

mod common;

use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::{check_config, connect, connect_from, Pier, Reader, Response};

/// A connection to `to` from the source address `from` (any of 127.0.0.0/8
/// on Linux loopback), so a test can be many clients.
fn get_on(stream: TcpStream, path: &str, extra: &str) -> Response {
    let mut r = Reader::new(stream);
    r.send(
        format!("GET {path} HTTP/1.1\r\nHost: t\r\n{extra}Connection: close\r\n\r\n").as_bytes(),
    );
    r.response(false).expect("a response")
}

fn status_from(from: &str, to: SocketAddr, path: &str) -> u16 {
    get_on(connect_from(from.parse().unwrap(), to), path, "").status
}

fn basic(user: &str, password: &str) -> String {
    let token = data_encoding::BASE64.encode(format!("{user}:{password}").as_bytes());
    format!("Authorization: Basic {token}\r\n")
}

#[test]
fn allow_and_deny_match_addresses_and_networks_in_order() {
    let pier = Pier::with_config(
        r#"
[[listener]]
listen = "127.0.0.1:0"
[[listener]]
listen = "[::1]:0"
[[listener]]
listen = "127.0.0.1:0"
accept_proxy_protocol = true

[[route]]
path = "/net"
handler = "respond"
body = "net"
allow = ["127.0.0.0/24"]
response_headers = { set = { "X-Frame-Options" = "DENY" }, always = true }

[[route]]
path = "/one-out"
handler = "respond"
body = "one-out"
deny = ["127.0.0.2"]
allow = ["127.0.0.0/8"]

[[route]]
path = "/v6"
handler = "respond"
body = "v6"
allow = ["::1"]

[[route]]
path = "/no-v6"
handler = "respond"
body = "no-v6"
deny = ["::/0"]

[[route]]
path = "/open"
handler = "respond"
body = "open"
"#,
        &[],
    );
    let v4 = pier.http[0];
    let v6 = pier.http[1];
    let proxied = pier.http[2];
    assert!(v6.is_ipv6(), "{:?}", pier.http);

    // A CIDR: inside it answers, outside it is refused with 403.
    let inside = get_on(connect_from("127.0.0.1".parse().unwrap(), v4), "/net", "");
    assert_eq!((inside.status, &inside.body[..]), (200, &b"net"[..]));
    let outside = get_on(connect_from("127.0.1.1".parse().unwrap(), v4), "/net", "");
    assert_eq!(outside.status, 403);
    assert_eq!(outside.body, b"403 Forbidden\n");
    // The refusal goes through the route's header rules like any answer.
    assert_eq!(outside.header("x-frame-options"), Some("DENY"));
    // First match wins: the deny written first takes one address out of the network.
    assert_eq!(status_from("127.0.0.2", v4, "/one-out"), 403);
    assert_eq!(status_from("127.0.0.3", v4, "/one-out"), 200);
    // IPv6: an allow list of ::1, a deny of every IPv6 address.
    assert_eq!(status_from("::1", v6, "/v6"), 200);
    assert_eq!(status_from("127.0.0.1", v4, "/v6"), 403);
    assert_eq!(status_from("::1", v6, "/no-v6"), 403);
    assert_eq!(status_from("127.0.0.1", v4, "/no-v6"), 200);
    // Routes without rules are untouched.
    assert_eq!(status_from("127.0.1.1", v4, "/open"), 200);

    // Behind a balancer the PROXY header's source is the client address.
    let via = |client: &str| {
        let mut r = Reader::new(connect(proxied));
        r.send(
            format!("PROXY TCP4 {client} 127.0.0.1 40000 80\r\nGET /net HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        );
        r.response(false).expect("a response").status
    };
    assert_eq!(via("203.0.113.7"), 403);
    assert_eq!(via("127.0.0.9"), 200);
}

#[test]
fn a_trusted_proxy_names_the_client_in_x_forwarded_for() {
    let pier = Pier::with_config(
        r#"
[http]
trusted_proxies = ["127.0.0.0/8"]

[[listener]]
listen = "127.0.0.1:0"
[[listener]]
listen = "[::1]:0"

[[route]]
path = "/partners"
handler = "respond"
body = "hello partner"
allow = ["203.0.113.0/24"]

[[route]]
path = "/limited"
handler = "respond"
body = "ok"
rate_limit = { rate = "1/m", burst = 1 }
"#,
        &[],
    );
    let (v4, v6) = (pier.http[0], pier.http[1]);
    let via = |to: SocketAddr, path: &str, xff: &str| {
        let stream = if to.is_ipv6() {
            connect_from("::1".parse().unwrap(), to)
        } else {
            connect(to)
        };
        get_on(stream, path, &format!("X-Forwarded-For: {xff}\r\n")).status
    };
    // From a trusted proxy: the rightmost address that is not a trusted proxy.
    assert_eq!(via(v4, "/partners", "198.51.100.1, 203.0.113.9"), 200);
    assert_eq!(via(v4, "/partners", "203.0.113.9, 127.0.0.5"), 200);
    assert_eq!(via(v4, "/partners", "203.0.113.9, 198.51.100.1"), 403);
    assert_eq!(get_on(connect(v4), "/partners", "").status, 403);
    // ::1 is not a trusted proxy: its header is ignored.
    assert_eq!(via(v6, "/partners", "203.0.113.9"), 403);
    // The rate limit counts the forwarded clients apart.
    assert_eq!(via(v4, "/limited", "198.51.100.1"), 200);
    assert_eq!(via(v4, "/limited", "198.51.100.1"), 429);
    assert_eq!(via(v4, "/limited", "198.51.100.2"), 200);
}

/// An htpasswd file with `alice` (bcrypt, `htpasswd -B` form) and `bob` (argon2id).
fn htpasswd(alice_password: &str) -> String {
    let alice = bcrypt::hash_with_salt(alice_password, 5, [3u8; 16])
        .unwrap()
        .format_for_version(bcrypt::Version::TwoY);
    let bob = {
        use argon2::PasswordHasher;
        argon2::Argon2::default()
            .hash_password_with_salt(b"bobs secret", b"pier-test-salt")
            .unwrap()
            .to_string()
    };
    format!("# staff\nalice:{alice}\nbob:{bob}\n")
}

#[test]
fn basic_auth_answers_401_until_the_right_password_and_reloads_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("htpasswd");
    std::fs::write(&file, htpasswd("wonderland")).unwrap();
    let pier = Pier::with_config(
        &format!(
            r#"
[[listener]]
listen = "127.0.0.1:0"

[[route]]
path = "/private"
handler = "respond"
body = "secret"
basic_auth = {{ htpasswd = "{}", realm = "staff only" }}
"#,
            file.display()
        ),
        &[],
    );
    let ask = |extra: &str| get_on(connect(pier.addr()), "/private", extra);

    let missing = ask("");
    assert_eq!(missing.status, 401);
    assert_eq!(
        missing.header("www-authenticate"),
        Some("Basic realm=\"staff only\", charset=\"UTF-8\"")
    );
    assert_eq!(missing.body, b"401 Unauthorized\n");
    let wrong = ask(&basic("alice", "looking-glass"));
    assert_eq!(wrong.status, 401);
    assert!(wrong.header("www-authenticate").is_some());
    assert_eq!(ask(&basic("mallory", "wonderland")).status, 401);
    assert_eq!(ask("Authorization: Bearer abc\r\n").status, 401);
    let right = ask(&basic("alice", "wonderland"));
    assert_eq!((right.status, &right.body[..]), (200, &b"secret"[..]));
    // Remembered after one check, and still right.
    assert_eq!(ask(&basic("alice", "wonderland")).status, 200);
    assert_eq!(ask(&basic("alice", "wonderlanD")).status, 401);
    assert_eq!(ask(&basic("bob", "bobs secret")).status, 200);
    assert_eq!(ask(&basic("bob", "bobs secreT")).status, 401);

    // SIGHUP reads the file again: the old password (remembered a moment
    // ago) stops working, the new one works.
    std::fs::write(&file, htpasswd("through the mirror")).unwrap();
    pier.signal(rustix::process::Signal::HUP);
    pier.wait_log("configuration reloaded", Duration::from_secs(20))
        .expect("reloaded");
    assert_eq!(ask(&basic("alice", "wonderland")).status, 401);
    assert_eq!(ask(&basic("alice", "through the mirror")).status, 200);
}

/// Whether a response has started arriving on `s`, without waiting for it.
fn has_answered(s: &TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut b = [0u8; 1];
    let answered = match s.peek(&mut b) {
        Ok(n) => n > 0,
        Err(e) if e.kind() == ErrorKind::WouldBlock => false,
        Err(e) => panic!("{e}"),
    };
    s.set_nonblocking(false).unwrap();
    answered
}

fn send_get(to: SocketAddr, path: &str, extra: &str) -> TcpStream {
    use std::io::Write;
    let mut s = connect(to);
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: t\r\n{extra}Connection: close\r\n\r\n").as_bytes(),
    )
    .unwrap();
    s
}

fn status_of(mut s: TcpStream) -> u16 {
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let head = String::from_utf8_lossy(&all);
    head.split(' ').nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_slow_hash_leaves_the_single_worker_serving_and_a_known_client_skips_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("htpasswd");
    // Cost 14: around a second a check, on purpose.
    let slow = bcrypt::hash_with_salt("patience", 14, [9u8; 16])
        .unwrap()
        .format_for_version(bcrypt::Version::TwoY);
    std::fs::write(&file, format!("slow:{slow}\n")).unwrap();
    let pier = Pier::with_config(
        &format!(
            r#"
[server]
workers = 1

[[listener]]
listen = "127.0.0.1:0"

[[route]]
path = "/private"
handler = "respond"
body = "secret"
basic_auth = {{ htpasswd = "{}" }}

[[route]]
path = "/open"
handler = "respond"
body = "open"
"#,
            file.display()
        ),
        &[],
    );
    let to = pier.addr();
    // Sign in once (one slow check).
    assert_eq!(
        status_of(send_get(to, "/private", &basic("slow", "patience"))),
        200
    );

    // Wrong guesses keep every hash thread busy for seconds...
    let guesses: Vec<TcpStream> = (0..4)
        .map(|i| send_get(to, "/private", &basic("slow", &format!("guess {i}"))))
        .collect();
    std::thread::sleep(Duration::from_millis(50));
    // ...while the one worker answers another client at once,
    assert_eq!(status_of(send_get(to, "/open", "")), 200);
    // and the signed-in client, whose check is remembered, without queueing
    // behind the guesses.
    assert_eq!(
        status_of(send_get(to, "/private", &basic("slow", "patience"))),
        200
    );
    assert!(
        guesses.iter().all(|g| !has_answered(g)),
        "a guess was answered first: the other clients waited behind its hash check"
    );
    for g in guesses {
        assert_eq!(status_of(g), 401);
    }
}

#[test]
fn rate_limit_answers_429_with_retry_after_per_key() {
    let pier = Pier::with_config(
        r#"
[[listener]]
listen = "127.0.0.1:0"

[[route]]
path = "/by-addr"
handler = "respond"
body = "ok"
rate_limit = { rate = "1/m", burst = 2 }

[[route]]
path = "/by-key"
handler = "respond"
body = "ok"
rate_limit = { rate = "1/m", burst = 1, key = "header:X-Api-Key" }
"#,
        &[],
    );
    let to = pier.addr();
    let mut r = Reader::new(connect(to));
    let mut next = |path: &str, extra: &str| {
        r.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\n{extra}\r\n").as_bytes());
        r.response(false).expect("a response")
    };
    assert_eq!(next("/by-addr", "").status, 200);
    assert_eq!(next("/by-addr", "").status, 200);
    let limited = next("/by-addr", "");
    assert_eq!(limited.status, 429);
    assert_eq!(limited.body, b"429 Too Many Requests\n");
    let retry: u64 = limited.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    // Another client address has its own count.
    assert_eq!(status_from("127.0.0.5", to, "/by-addr"), 200);

    assert_eq!(next("/by-key", "X-Api-Key: a\r\n").status, 200);
    assert_eq!(next("/by-key", "X-Api-Key: a\r\n").status, 429);
    assert_eq!(next("/by-key", "X-Api-Key: b\r\n").status, 200);
    // Without the header the client address is the key.
    assert_eq!(next("/by-key", "").status, 200);
    assert_eq!(next("/by-key", "").status, 429);
}

#[test]
fn one_client_over_eight_connections_gets_the_limit_across_workers() {
    let pier = Pier::with_config(
        r#"
[server]
workers = 4

[[listener]]
listen = "127.0.0.1:0"

[[route]]
handler = "respond"
body = "ok"
rate_limit = { rate = 40, burst = 5 }
"#,
        &[],
    );
    // Twice the limit, 80 requests a second, round robin over 8 keep-alive
    // connections that SO_REUSEPORT spreads over the 4 workers.
    let mut conns: Vec<Reader> = (0..8).map(|_| Reader::new(connect(pier.addr()))).collect();
    let sends = 240;
    let start = Instant::now();
    let mut passed = 0;
    let mut last = start;
    for i in 0..sends {
        let due = start + Duration::from_millis(i as u64 * 1000 / 80);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let c = &mut conns[i % 8];
        c.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        last = Instant::now();
        match c.response(false).expect("a response").status {
            200 => passed += 1,
            429 => {}
            s => panic!("status {s}"),
        }
    }
    let span = last.duration_since(start).as_secs_f64();
    let offered = f64::from(sends as u32) / span;
    assert!(
        offered > 60.0,
        "the client offered {offered:.0}/s, not over the limit enough to measure it"
    );
    let expected = 5.0 + 40.0 * span;
    let error = (f64::from(passed) - expected).abs() / expected;
    assert!(
        error <= 0.10,
        "{passed} passed in {span:.2}s where the limit allows {expected:.0}"
    );
}

#[test]
fn a_flood_of_addresses_keeps_the_table_bounded() {
    let pier = Pier::with_config(
        r#"
[[listener]]
listen = "127.0.0.1:0"

[[route]]
handler = "respond"
body = "ok"
rate_limit = { rate = "1/m", burst = 2, max_keys = 64 }
"#,
        &[],
    );
    let to = pier.addr();
    let held = "127.0.0.1";
    assert_eq!(status_from(held, to, "/"), 200);
    assert_eq!(status_from(held, to, "/"), 200);
    assert_eq!(status_from(held, to, "/"), 429);

    let client = |i: u32| format!("127.1.{}.{}", i / 250, 1 + i % 250);
    // 1000 new addresses, one request each: each is served, and each owes
    // less than the held client, so the table forgets them first.
    for i in 0..1000 {
        assert_eq!(status_from(&client(i), to, "/"), 200, "{}", client(i));
    }
    assert_eq!(
        status_from(held, to, "/"),
        429,
        "the held client stays held"
    );

    // 1000 more that each use their whole burst: they owe more than the held
    // client, so its entry is the one to go; a table that grew with the
    // flood would still hold it.
    for i in 1000..2000 {
        assert_eq!(status_from(&client(i), to, "/"), 200);
        assert_eq!(status_from(&client(i), to, "/"), 200);
    }
    assert_eq!(
        status_from(held, to, "/"),
        200,
        "64 slots cannot hold 2000 clients: the one owing least was forgotten"
    );
}

#[test]
fn access_config_errors_name_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pier.toml");
    let check = |config: &str| {
        std::fs::write(&path, config).unwrap();
        let (code, err) = check_config(&path);
        assert_eq!(code, Some(2), "{config}");
        err
    };
    let head = "[[listener]]\nlisten = \"127.0.0.1:0\"\n[[route]]\nhandler = \"respond\"\n";
    let err = check(&format!("{head}allow = [\"10.0.0.0/8\", \"10.1.2.3/8\"]\n"));
    assert!(
        err.contains(&format!("{}:5: route[1].allow[2]", path.display()))
            && err.contains("10.0.0.0/8"),
        "{err}"
    );
    let err = check(&format!(
        "{head}basic_auth = {{ htpasswd = \"/no/such/htpasswd\" }}\n"
    ));
    assert!(err.contains(":5: route[1].basic_auth.htpasswd"), "{err}");
    let htpasswd = dir.path().join("htpasswd");
    std::fs::write(&htpasswd, "alice:$apr1$abc$def\n").unwrap();
    let err = check(&format!(
        "{head}basic_auth = {{ htpasswd = \"{}\" }}\n",
        htpasswd.display()
    ));
    assert!(err.contains("line 1") && err.contains("bcrypt"), "{err}");
    let err = check(&format!("{head}\nrate_limit = {{ rate = \"10/d\" }}\n"));
    assert!(err.contains(":6: route[1].rate_limit.rate"), "{err}");
    let err = check(&format!("{head}rate_limit = {{ rate = 5, burst = 0 }}\n"));
    assert!(err.contains("route[1].rate_limit.burst"), "{err}");
    let err = check(&format!("{head}rate_limit = {{ rate = 5, bucket = 3 }}\n"));
    assert!(err.contains("bucket"), "{err}");
    let err = check(&format!("[http]\ntrusted_proxies = [\"all\"]\n{head}"));
    assert!(err.contains(":2: http.trusted_proxies[1]"), "{err}");
}
