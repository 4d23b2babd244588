//! HTTP/2 conformance: h2spec in `--strict` mode against a real `pier serve`,
//! once over TLS (ALPN `h2`) and once over a cleartext listener with
//! `http2 = true` (prior knowledge), each serving a static route (which
//! answers before it reads a request body, the case that needs the driver to
//! keep reading the stream after its answer). Every case must pass; none may
//! be skipped (the page served is long enough for the flow-control cases).
//!
//! h2spec is installed by `.ci/run` (`go install`, pinned) and found through
//! `$H2SPEC`, `PATH` or Go's bin directory. Without it the test fails when
//! `CI` is set and is skipped, saying so, otherwise.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::Pier;

/// The one case whose outcome depends on timing rather than on the server:
/// "WINDOW_UPDATE frames increasing a stream's window above 2^31-1". h2spec
/// sends HEADERS (no END_STREAM) and the two WINDOW_UPDATEs as separate
/// writes; when the server has sent its whole answer before the updates
/// arrive, the stream is closed for sending and h2 (like the RFC's "sender")
/// has no window left to overflow, so no FLOW_CONTROL_ERROR follows. It is
/// rerun alone when it fails, and must pass at least once.
const TIMING_CASE: &str = "http2/6.9.1/3";

/// Reruns allowed for [`TIMING_CASE`].
const TIMING_RERUNS: usize = 5;

const CONFIG: &str = r#"
[[listener]]
listen = "127.0.0.1:0"
http2 = true

[[listener]]
listen = "127.0.0.1:0"
tls = { self_signed = true }

[[route]]
path = "/"
handler = "static"
root = "{dir}"
"#;

/// The h2spec binary: `$H2SPEC`, then `PATH`, then Go's bin directories.
fn h2spec() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("H2SPEC") {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    if let Some(p) = common::which("h2spec") {
        return Some(p);
    }
    let mut dirs = Vec::new();
    if let Some(d) = std::env::var_os("GOBIN") {
        dirs.push(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("GOPATH") {
        dirs.push(Path::new(&d).join("bin"));
    }
    if let Some(h) = std::env::var_os("HOME") {
        dirs.push(Path::new(&h).join("go/bin"));
    }
    dirs.into_iter()
        .map(|d| d.join("h2spec"))
        .find(|p| p.is_file())
}

/// One case's outcome from the JUnit report.
#[derive(Debug)]
struct Case {
    /// h2spec's id for it, `http2/6.9.1/3`, which runs it alone.
    id: String,
    name: String,
    outcome: Outcome,
}

#[derive(Debug, PartialEq)]
enum Outcome {
    Passed,
    Failed(String),
    Skipped,
}

/// Runs h2spec (every case, or the ones named) against `port` and reads its
/// JUnit report.
fn run(bin: &Path, dir: &Path, port: u16, tls: bool, only: &[&str]) -> Vec<Case> {
    let report = dir.join(format!("h2spec-{port}.xml"));
    let _ = std::fs::remove_file(&report);
    let mut cmd = Command::new(bin);
    cmd.args(["--strict", "-h", "127.0.0.1", "-o", "5", "-j"])
        .arg(&report)
        .args(["-p", &port.to_string()]);
    if tls {
        cmd.args(["-t", "-k"]);
    }
    cmd.args(only);
    let out = cmd.output().expect("h2spec runs");
    let xml = std::fs::read_to_string(&report).unwrap_or_else(|e| {
        panic!(
            "h2spec wrote no report ({e}); it said:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    parse_junit(&xml)
}

/// The value of attribute `name` in the tag text `tag`.
fn attr<'x>(tag: &'x str, name: &str) -> &'x str {
    let key = format!(" {name}=\"");
    let start = tag.find(&key).map(|i| i + key.len()).unwrap_or(tag.len());
    let len = tag[start..].find('"').unwrap_or(0);
    &tag[start..start + len]
}

/// The cases of an h2spec JUnit report, numbered within their group as h2spec
/// numbers them.
fn parse_junit(xml: &str) -> Vec<Case> {
    let mut cases = Vec::new();
    for suite in xml.split("<testsuite ").skip(1) {
        for (i, case) in suite.split("<testcase ").skip(1).enumerate() {
            let body = case.split("</testcase>").next().unwrap_or(case);
            let tag_end = body.find('>').unwrap_or(body.len());
            let tag = format!(" {}", &body[..tag_end]);
            let inner = &body[tag_end..];
            let outcome = if inner.contains("<failure") || inner.contains("<error") {
                Outcome::Failed(inner.trim_start_matches('>').trim().to_string())
            } else if inner.contains("<skipped") {
                Outcome::Skipped
            } else {
                Outcome::Passed
            };
            cases.push(Case {
                id: format!("{}/{}", attr(&tag, "package"), i + 1),
                name: attr(&tag, "classname").to_string(),
                outcome,
            });
        }
    }
    cases
}

/// Runs the whole suite against one listener and asserts every case passed.
fn conforms(bin: &Path, dir: &Path, port: u16, tls: bool) {
    let which = if tls { "TLS" } else { "cleartext" };
    let cases = run(bin, dir, port, tls, &[]);
    assert!(
        cases.len() >= 146,
        "h2spec ran only {} cases on the {which} listener",
        cases.len()
    );
    let mut bad: Vec<&Case> = cases
        .iter()
        .filter(|c| c.outcome != Outcome::Passed)
        .collect();
    if let Some(pos) = bad.iter().position(|c| c.id == TIMING_CASE) {
        let again = (0..TIMING_RERUNS).any(|_| {
            run(bin, dir, port, tls, &[TIMING_CASE])
                .iter()
                .all(|c| c.outcome == Outcome::Passed)
        });
        eprintln!("{TIMING_CASE} failed on the {which} listener; passed when rerun: {again}");
        if again {
            bad.remove(pos);
        }
    }
    assert!(
        bad.is_empty(),
        "h2spec --strict on the {which} listener: {} of {} cases did not pass:\n{}",
        bad.len(),
        cases.len(),
        bad.iter()
            .map(|c| format!("  {} {}: {:?}", c.id, c.name, c.outcome))
            .collect::<Vec<_>>()
            .join("\n")
    );
    eprintln!(
        "h2spec --strict on the {which} listener: all {} cases passed",
        cases.len()
    );
}

#[test]
fn h2spec_strict_passes_every_case_over_tls_and_cleartext() {
    let Some(bin) = h2spec() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "h2spec is not installed (CI runs .ci/run, which installs it with go install)"
        );
        eprintln!(
            "h2spec not installed (go install github.com/summerwind/h2spec/cmd/h2spec); skipping"
        );
        return;
    };
    let pier = Pier::with_config(CONFIG, &[]);
    // At least 5 bytes: the flow-control cases of 6.9.2 skip a shorter page.
    std::fs::write(
        pier.root().join("index.html"),
        "a page served over HTTP/2\n",
    )
    .unwrap();
    conforms(&bin, pier.root(), pier.addr().port(), false);
    conforms(&bin, pier.root(), pier.https[0].port(), true);
}

#[test]
fn the_junit_report_is_read_case_by_case() {
    let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites>
  <testsuite name="3.5. HTTP/2 Connection Preface" package="http2/3.5" id="3.5" tests="2" skipped="0" failures="1" errors="0">
    <testcase package="http2/3.5" classname="Sends client connection preface" time="0.0059"></testcase>
    <testcase package="http2/3.5" classname="Sends invalid connection preface" time="0.0010">
      <failure>-&gt; The endpoint MUST terminate the TCP connection.</failure>
    </testcase>
  </testsuite>
  <testsuite name="6.9.2" package="http2/6.9.2" id="6.9.2" tests="1" skipped="1" failures="0" errors="0">
    <testcase package="http2/6.9.2" classname="Negative window" time="0.01">
      <skipped></skipped>
    </testcase>
  </testsuite>
</testsuites>"#;
    let cases = parse_junit(xml);
    assert_eq!(cases.len(), 3);
    assert_eq!(cases[0].id, "http2/3.5/1");
    assert_eq!(cases[0].outcome, Outcome::Passed);
    assert_eq!(cases[1].id, "http2/3.5/2");
    assert_eq!(cases[1].name, "Sends invalid connection preface");
    assert!(matches!(&cases[1].outcome, Outcome::Failed(m) if m.contains("MUST terminate")));
    assert_eq!(cases[2].id, "http2/6.9.2/1");
    assert_eq!(cases[2].outcome, Outcome::Skipped);
}
