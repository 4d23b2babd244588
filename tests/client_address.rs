//! The client address behind trusted proxies, end to end: per listener or
//! server-wide `trusted_proxies`, `X-Forwarded-For`, RFC 7239 `Forwarded` and
//! the PROXY protocol read from trusted peers only, and the address that
//! results seen alike by access rules, rate limits and the access log, while
//! untrusted peers' headers are ignored.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{assert_config_error, connect_from, Pier, Reader, Response};

/// Sends `before` (a PROXY line, or nothing) and a GET of `path` with `extra`
/// header lines from the local address `from`.
fn exchange(from: &str, to: SocketAddr, before: &str, path: &str, extra: &str) -> Response {
    let mut r = Reader::new(connect_from(from.parse().unwrap(), to));
    r.send(
        format!("{before}GET {path} HTTP/1.1\r\nHost: t\r\n{extra}Connection: close\r\n\r\n")
            .as_bytes(),
    );
    r.response(false).expect("a response")
}

fn status(from: &str, to: SocketAddr, path: &str, extra: &str) -> u16 {
    exchange(from, to, "", path, extra).status
}

const CONFIG: &str = r#"
[server]
workers = 1
[http]
trusted_proxies = ["127.0.0.3"]

# 0: its own list, which replaces the server's.
[[listener]]
listen = "127.0.0.1:0"
trusted_proxies = ["127.0.0.2"]
# 1: the server's list.
[[listener]]
listen = "127.0.0.1:0"
# 2: RFC 7239 Forwarded.
[[listener]]
listen = "127.0.0.1:0"
trusted_proxies = ["127.0.0.2/32"]
client_address_header = "Forwarded"
# 3: the PROXY protocol, from 127.0.0.2 only.
[[listener]]
listen = "127.0.0.1:0"
accept_proxy_protocol = true
trusted_proxies = ["127.0.0.2"]

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

[access_log]
path = "{dir}/access.log"
format = "json"
flush_interval = "10ms"
"#;

/// Waits until the access log holds `n` lines (or five seconds pass).
fn log_lines(pier: &Pier, n: usize) -> Vec<String> {
    let path = pier.dir.path().join("access.log");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let got: Vec<String> = std::fs::read_to_string(&path)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect();
        if got.len() >= n || Instant::now() > deadline {
            return got;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn client_of(line: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    v["client"].as_str().unwrap().to_string()
}

#[test]
fn trusted_peers_name_the_client_and_untrusted_peers_cannot() {
    let pier = Pier::with_config(CONFIG, &[]);
    let [own, server, forwarded, proxied] = [0, 1, 2, 3].map(|i| pier.http[i]);
    let xff = "X-Forwarded-For: 198.51.100.1, 203.0.113.9\r\n";

    // A listener's own list replaces the server's.
    assert_eq!(status("127.0.0.2", own, "/partners", xff), 200);
    assert_eq!(status("127.0.0.3", own, "/partners", xff), 403);
    // Without one, the server's list applies.
    assert_eq!(status("127.0.0.3", server, "/partners", xff), 200);
    assert_eq!(status("127.0.0.2", server, "/partners", xff), 403);
    // A trusted proxy's own address is skipped; an untrusted one stops the walk.
    let through = "X-Forwarded-For: 203.0.113.9, 127.0.0.2\r\n";
    assert_eq!(status("127.0.0.2", own, "/partners", through), 200);
    let forged = "X-Forwarded-For: 203.0.113.9, 198.51.100.1\r\n";
    assert_eq!(status("127.0.0.2", own, "/partners", forged), 403);

    // RFC 7239: the for= of the rightmost element; X-Forwarded-For is not read there.
    let fwd = "Forwarded: for=198.51.100.1, for=\"203.0.113.9:4711\";proto=https\r\n";
    assert_eq!(status("127.0.0.2", forwarded, "/partners", fwd), 200);
    assert_eq!(status("127.0.0.2", forwarded, "/partners", xff), 403);
    assert_eq!(status("127.0.0.1", forwarded, "/partners", fwd), 403);

    // The PROXY header is read from the trusted balancer only; anyone else
    // speaks HTTP from the first byte, so a PROXY line from them is a bad request.
    let line = "PROXY TCP4 203.0.113.7 127.0.0.1 40000 80\r\n";
    assert_eq!(
        exchange("127.0.0.2", proxied, line, "/partners", "").status,
        200
    );
    assert_eq!(
        exchange("127.0.0.1", proxied, line, "/partners", "").status,
        400
    );
    assert_eq!(status("127.0.0.1", proxied, "/partners", ""), 403);

    // The rate limit counts forwarded clients apart, and an untrusted peer's
    // header cannot make it a new client.
    let from = |ip: &str| format!("X-Forwarded-For: {ip}\r\n");
    assert_eq!(
        status("127.0.0.2", own, "/limited", &from("198.51.100.1")),
        200
    );
    assert_eq!(
        status("127.0.0.2", own, "/limited", &from("198.51.100.1")),
        429
    );
    assert_eq!(
        status("127.0.0.2", own, "/limited", &from("198.51.100.2")),
        200
    );
    assert_eq!(
        status("127.0.0.4", own, "/limited", &from("198.51.100.3")),
        200
    );
    assert_eq!(
        status("127.0.0.4", own, "/limited", &from("198.51.100.4")),
        429
    );

    // The access log shows the same client addresses.
    let lines = log_lines(&pier, 17);
    let clients: Vec<String> = lines.iter().map(|l| client_of(l)).collect();
    assert_eq!(
        clients,
        [
            "203.0.113.9",
            "127.0.0.3",
            "203.0.113.9",
            "127.0.0.2",
            "203.0.113.9",
            "198.51.100.1",
            "203.0.113.9",
            "127.0.0.2",
            "127.0.0.1",
            "203.0.113.7",
            "127.0.0.1",
            "127.0.0.1",
            "198.51.100.1",
            "198.51.100.1",
            "198.51.100.2",
            "127.0.0.4",
            "127.0.0.4",
        ],
        "{lines:#?}"
    );
}

#[test]
fn listener_trust_errors_name_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pier.toml");
    std::fs::write(
        &path,
        "[[listener]]\nlisten = \"127.0.0.1:0\"\ntrusted_proxies = [\"10.0.0.0/8\", \"nope\"]\n\
         [[route]]\nhandler = \"respond\"\n",
    )
    .unwrap();
    assert_config_error(&path, 3, "listener[1].trusted_proxies[2]");
}
