//! A browser's WebSocket over HTTP/2 (RFC 8441): headless Chromium loads a
//! page from Pier over TLS with ALPN h2, and the page's script opens
//! `wss://` on the same origin, proxied to a WebSocket echo server (PyPI
//! `websockets`, tests/websocket_h2/ws_peer.py). Chromium opens a WebSocket
//! over HTTP/2 only on an HTTP/2 connection it already holds whose server
//! sent SETTINGS_ENABLE_CONNECT_PROTOCOL, so the page load opens it and the
//! WebSocket rides on it as an extended CONNECT stream; the access log says
//! so (HTTP/2.0, a stream id), and the echo lands in the page's DOM.

mod common;

use common::chromium::{chromium, headless, wait_for_log};
use common::websocket::echo_server;
use common::Pier;

const PAGE: &str = r#"<!doctype html>
<html><body><p id="out">waiting</p>
<script>
// A request the origin holds for a while: Chromium's virtual time stands
// still while a fetch is pending, so the page is not dumped before the
// WebSocket's round trips (which are not fetches) end.
fetch("/slow");
const out = document.getElementById("out");
const ws = new WebSocket("wss://" + location.host + "/ws/echo", ["chat"]);
ws.onopen = () => ws.send("hello from the browser");
ws.onmessage = (e) => { out.textContent = "echo: " + e.data; ws.close(1000); };
ws.onerror = () => { out.textContent = "websocket error"; };
</script></body></html>
"#;

#[test]
fn headless_chromium_opens_a_websocket_over_the_pages_http2_connection() {
    let Some(chromium) = chromium() else { return };
    if !common::python_peer::present("websockets", "PyPI websockets") {
        return;
    }
    let markers = tempfile::tempdir().unwrap();
    let echo = echo_server(markers.path());
    let slow = common::upstream::Upstream::start(|_| {
        std::thread::sleep(std::time::Duration::from_millis(1500));
        common::upstream::ok("late")
    });
    let config = format!(
        r#"
[server]
workers = 1
[[listener]]
listen = "127.0.0.1:0"
tls = {{ self_signed = true }}
[[upstream]]
name = "ws"
servers = [{{ address = "127.0.0.1:{}" }}]
[[upstream]]
name = "slow"
servers = [{{ address = "127.0.0.1:{}" }}]
[[route]]
path = "/ws/"
handler = "proxy"
upstream = "ws"
[[route]]
path = "/slow"
handler = "proxy"
upstream = "slow"
[[route]]
path = "/"
handler = "static"
root = "{{dir}}"
[access_log]
path = "{{dir}}/access.log"
flush_interval = "10ms"
"#,
        echo.port,
        slow.addr.port()
    );
    let pier = Pier::with_config(&config, &[]);
    std::fs::write(pier.root().join("page.html"), PAGE).unwrap();
    let profile = pier.dir.path().join("chromium");
    let url = format!("https://localhost:{}/page.html", pier.https[0].port());
    let resolve = format!("--host-resolver-rules=MAP localhost {}", pier.https[0].ip());
    let args = [
        "--dump-dom",
        "--ignore-certificate-errors",
        // localhost names the listener's loopback address.
        &resolve,
    ];
    let echoed = "<p id=\"out\">echo: hello from the browser</p>";
    // Chromium dumps the page once its virtual time runs out; the held
    // fetch keeps it still for 1.5 s of real time, and a load that still
    // says "waiting" (a very busy machine) is tried again, a few times.
    let mut dom = String::new();
    for _ in 0..3 {
        dom = headless(&chromium, &profile, &args, &url);
        if !dom.contains("<p id=\"out\">waiting</p>") {
            break;
        }
    }
    assert!(dom.contains(echoed), "{dom}");
    // The page and the WebSocket came over HTTP/2: the WebSocket as an
    // extended CONNECT stream (read as the GET upgrade it stands for),
    // answered 200, not an HTTP/1.1 upgrade's 101.
    let log = wait_for_log(&pier.dir.path().join("access.log"), "/ws/echo");
    let page = log
        .lines()
        .find(|l| l.contains("\"GET /page.html "))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(page.contains(" HTTP/2.0\" 200 "), "{page}");
    let ws = log
        .lines()
        .find(|l| l.contains("\"GET /ws/echo HTTP/2.0\" 200 "))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(ws.contains(" stream="), "{ws}");
    assert!(!log.contains(" 101 "), "{log}");
}
