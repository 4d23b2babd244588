//! Real peers written in Python (PyPI packages that `.ci/run` installs):
//! whether they can run here, and a peer script's server, killed on drop.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// `tests/<relative>`, a peer script.
pub fn script(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(relative)
}

/// Whether python3 runs `import <modules>`; without them a test says so and
/// passes, except under CI, where .ci/run installs them and their absence
/// fails. `what` names the packages in those messages.
pub fn present(modules: &str, what: &str) -> bool {
    let ok = Command::new("python3")
        .args(["-c", &format!("import {modules}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "python3 with {what} is missing; .ci/run installs it"
        );
        eprintln!("skipped: python3 with {what} is not installed");
    }
    ok
}

/// A peer script's `server DIR` mode, which prints its port on its first line.
pub struct PythonServer {
    child: Child,
    /// The port it listens on, on 127.0.0.1.
    pub port: u16,
}

impl PythonServer {
    /// Starts `python3 SCRIPT server DIR`; `what` names it if it fails.
    pub fn start(script: &Path, dir: &Path, what: &str) -> PythonServer {
        Self::start_with(script, dir, &[], what)
    }

    /// Starts `python3 SCRIPT server DIR ARGS...`.
    pub fn start_with(script: &Path, dir: &Path, args: &[&str], what: &str) -> PythonServer {
        let mut child = Command::new("python3")
            .arg(script)
            .arg("server")
            .arg(dir)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start python3");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().unwrap_or_else(|_| {
            panic!("the {what} did not start (.ci/run installs its packages): {line:?}")
        });
        PythonServer { child, port }
    }
}

impl Drop for PythonServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
