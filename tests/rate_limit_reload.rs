//! Rate-limit counts across a SIGHUP reload: a rule the new configuration
//! leaves unchanged keeps its counts (a client held at its limit stays held),
//! while a changed rule starts afresh.

mod common;

use std::time::Duration;

use common::{get, Pier};
use rustix::process::Signal;

fn config(body: &str, changed_burst: u32) -> String {
    format!(
        r#"
[server]
workers = 2
[[listener]]
listen = "127.0.0.1:0"
[[route]]
path = "/probe"
handler = "respond"
body = "{body}"
[[route]]
path = "/kept"
handler = "respond"
body = "kept"
rate_limit = {{ rate = "1/m", burst = 2 }}
[[route]]
path = "/changed"
handler = "respond"
body = "changed"
rate_limit = {{ rate = "1/m", burst = {changed_burst} }}
"#
    )
}

fn status(pier: &Pier, path: &str) -> (u16, String) {
    let r = get(
        pier.addr(),
        &format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"),
    );
    (r.status, String::from_utf8_lossy(&r.body).into_owned())
}

fn reload(pier: &Pier, text: &str) {
    std::fs::write(pier.root().join("pier.toml"), text).unwrap();
    pier.signal(Signal::HUP);
    pier.wait_log("configuration reloaded", Duration::from_secs(10))
        .expect("reload logged");
}

#[test]
fn an_unchanged_rate_limit_keeps_its_counts_across_sighup() {
    let pier = Pier::with_config(&config("first", 1), &[]);
    assert_eq!(status(&pier, "/kept").0, 200);
    assert_eq!(status(&pier, "/kept").0, 200);
    assert_eq!(status(&pier, "/kept").0, 429);
    assert_eq!(status(&pier, "/changed").0, 200);
    assert_eq!(status(&pier, "/changed").0, 429);

    // Another body elsewhere, the same rules: the limits still hold.
    reload(&pier, &config("second", 1));
    assert_eq!(status(&pier, "/probe"), (200, "second".into()));
    assert_eq!(
        status(&pier, "/kept").0,
        429,
        "the burst came back with the reload"
    );
    assert_eq!(status(&pier, "/changed").0, 429);

    // A changed rule is a new limit with its own burst; the other keeps counting.
    reload(&pier, &config("third", 2));
    assert_eq!(status(&pier, "/probe"), (200, "third".into()));
    assert_eq!(status(&pier, "/changed").0, 200);
    assert_eq!(status(&pier, "/changed").0, 200);
    assert_eq!(status(&pier, "/changed").0, 429);
    assert_eq!(status(&pier, "/kept").0, 429);
}
