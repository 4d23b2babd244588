//! The static handler's open-file cache belongs to a configuration generation:
//! the files a replaced configuration kept open are closed once it goes, not
//! held for the life of the worker.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{get, Pier};
use rustix::process::Signal;

const CONFIG: &str = r#"
[server]
workers = 1
drain_timeout = "5s"
[http]
keepalive_timeout = "1s"
[[listener]]
listen = "127.0.0.1:0"
[[route]]
path = "/"
handler = "static"
root = "{dir}"
"#;

/// Whether process `pid` has `file` open.
fn held_open(pid: u32, file: &Path) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .any(|target| target == file)
}

#[test]
fn a_reload_closes_the_files_the_old_configuration_kept_open() {
    let pier = Pier::with_config(CONFIG, &[]);
    let file = pier.root().canonicalize().unwrap().join("cached.txt");
    std::fs::write(&file, "kept open by the cache").unwrap();
    let r = get(
        pier.addr(),
        "GET /cached.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 200);
    assert!(
        held_open(pier.pid(), &file),
        "the cache keeps the file open"
    );

    pier.signal(Signal::HUP);
    pier.wait_log("configuration reloaded", Duration::from_secs(10))
        .expect("reload logged");
    // The replaced generation retires after one keep-alive timeout and goes
    // once its connections (none here) are closed.
    let deadline = Instant::now() + Duration::from_secs(10);
    while held_open(pier.pid(), &file) {
        assert!(
            Instant::now() < deadline,
            "the old configuration's open file is still open"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The new configuration serves (and caches) it afresh.
    let r = get(
        pier.addr(),
        "GET /cached.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"kept open by the cache");
}
