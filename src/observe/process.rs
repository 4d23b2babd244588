//! Process metrics as Prometheus's client libraries name them (`process_*`):
//! read from `/proc/self` when `/metrics` is scraped, on the admin thread, so
//! they cost the workers nothing.

use std::fmt::Write as _;

use crate::observe::exposition::family_head;

/// Appends `process_open_fds`, `process_max_fds`, `process_resident_memory_bytes`,
/// `process_virtual_memory_bytes`, `process_cpu_seconds_total` and
/// `process_start_time_seconds`; a value `/proc` does not give is left out.
pub fn render_process(out: &mut String) {
    let mut gauge = |name: &str, kind: &str, help: &str, v: f64| {
        family_head(out, name, kind, help);
        let _ = writeln!(out, "{name} {v}");
    };
    if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
        // The directory handle itself is one of the entries.
        let n = dir.count().saturating_sub(1);
        gauge(
            "process_open_fds",
            "gauge",
            "Open file descriptors.",
            n as f64,
        );
    }
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    if let Some(max) = limit.current {
        gauge(
            "process_max_fds",
            "gauge",
            "Limit on open file descriptors.",
            max as f64,
        );
    }
    let Some(stat) = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| ProcStat::parse(&s))
    else {
        return;
    };
    let ticks = clock_ticks();
    gauge(
        "process_cpu_seconds_total",
        "counter",
        "User and system CPU time spent, in seconds.",
        (stat.utime + stat.stime) as f64 / ticks,
    );
    if let Some(kib) = resident_kib() {
        gauge(
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
            (kib * 1024) as f64,
        );
    }
    gauge(
        "process_virtual_memory_bytes",
        "gauge",
        "Virtual memory size in bytes.",
        stat.vsize as f64,
    );
    if let Some(boot) = boot_time() {
        gauge(
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since the Unix epoch, in seconds.",
            boot as f64 + stat.start_ticks as f64 / ticks,
        );
    }
}

/// The fields of `/proc/self/stat` the metrics use (proc(5) numbering).
#[derive(Debug, PartialEq)]
struct ProcStat {
    utime: u64,
    stime: u64,
    start_ticks: u64,
    vsize: u64,
}

impl ProcStat {
    fn parse(text: &str) -> Option<ProcStat> {
        // The command name (field 2) is in parentheses and may hold spaces.
        let rest = &text[text.rfind(')')? + 2..];
        let f: Vec<&str> = rest.split_ascii_whitespace().collect();
        // `rest` starts at field 3 (state).
        let field = |n: usize| f.get(n - 3)?.parse::<u64>().ok();
        Some(ProcStat {
            utime: field(14)?,
            stime: field(15)?,
            start_ticks: field(22)?,
            vsize: field(23)?,
        })
    }
}

/// `USER_HZ`: 100 on every Linux architecture Pier builds for.
fn clock_ticks() -> f64 {
    100.0
}

/// `VmRSS` of `/proc/self/status`, in KiB (page size free, unlike `stat`'s pages).
fn resident_kib() -> Option<u64> {
    std::fs::read_to_string("/proc/self/status")
        .ok()?
        .lines()
        .find_map(|l| {
            l.strip_prefix("VmRSS:")?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
}

/// `btime` of `/proc/stat`: the boot time in seconds since the epoch.
fn boot_time() -> Option<u64> {
    std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_read_after_a_command_name_with_spaces() {
        let line = "4242 (pier worker) S 1 2 3 4 5 6 7 8 9 10 150 25 0 0 20 0 3 0 98765 \
                    123456789 2048 18446744073709551615 1 2 3";
        assert_eq!(
            ProcStat::parse(line),
            Some(ProcStat {
                utime: 150,
                stime: 25,
                start_ticks: 98765,
                vsize: 123456789,
            })
        );
        let mut out = String::new();
        render_process(&mut out);
        for name in [
            "process_open_fds ",
            "process_resident_memory_bytes ",
            "process_cpu_seconds_total ",
            "process_start_time_seconds ",
        ] {
            assert!(out.contains(name), "{name} in {out}");
        }
    }
}
