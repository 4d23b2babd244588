//! Headless Chromium, a real browser for the tests that need one: found by
//! the names Debian and others give it, run with its own profile.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Chromium's binary, as Debian (`chromium`) or others name it; without
/// one the caller says so and passes, except under CI, where .ci/run
/// installs it and its absence fails.
pub fn chromium() -> Option<PathBuf> {
    let found = ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|b| super::which(b));
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            ".ci/run installs chromium"
        );
        eprintln!("skipped: chromium not installed; .ci/run installs it");
    }
    found
}

/// Runs headless Chromium on `url` with `args` (its own profile in `profile`),
/// giving the page's script three seconds of virtual time to poll; its
/// standard output.
pub fn headless(chromium: &Path, profile: &Path, args: &[&str], url: &str) -> String {
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--hide-scrollbars",
            "--virtual-time-budget=3000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .stdin(Stdio::null())
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The access log at `path` once it holds a line with `want` (within 5 s),
/// or as it is then.
pub fn wait_for_log(path: &Path, want: &str) -> String {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let log = std::fs::read_to_string(path).unwrap_or_default();
        if log.contains(want) || Instant::now() > until {
            return log;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
