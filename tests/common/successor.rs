//! The process that took over after a binary upgrade: not a child of the
//! test, so it is found by the PID file and stopped by PID (SIGTERM) when
//! the test ends.

use std::path::Path;
use std::time::{Duration, Instant};

use rustix::process::{kill_process, test_kill_process, Pid, Signal};

/// A process that replaced the one a test started; stopped on drop.
pub struct Successor(pub i32);

impl Successor {
    /// The process the PID file at `path` names once it names another than
    /// `not` (within 15 s).
    pub fn from_pid_file(path: &Path, not: u32) -> Successor {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let pid: i32 = std::fs::read_to_string(path)
                .ok()
                .and_then(|t| t.trim().parse().ok())
                .unwrap_or(0);
            if pid > 0 && pid as u32 != not {
                return Successor(pid);
            }
            assert!(
                Instant::now() < deadline,
                "the PID file never named a new process"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether it still runs.
    pub fn alive(&self) -> bool {
        let status = std::fs::read_to_string(format!("/proc/{}/stat", self.0)).unwrap_or_default();
        // Field 3 is the state; a zombie has exited.
        let state = status.rsplit_once(") ").map(|(_, r)| r.chars().next());
        test_kill_process(Pid::from_raw(self.0).unwrap()).is_ok() && state != Some(Some('Z'))
    }
}

impl Drop for Successor {
    fn drop(&mut self) {
        if let Some(pid) = Pid::from_raw(self.0) {
            let _ = kill_process(pid, Signal::TERM);
        }
    }
}
