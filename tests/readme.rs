//! The README's command-line synopses against the binary's `--help`: every flag
//! a synopsis names exists, and every flag `--help` lists is in the synopsis, so
//! the two cannot drift apart.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// Every `pier ...` synopsis in the README's code blocks, by subcommand words
/// (`["bench", "http"]`), with the text of its lines (continuations included).
fn synopses(readme: &str) -> BTreeMap<Vec<String>, String> {
    let mut out: BTreeMap<Vec<String>, String> = BTreeMap::new();
    let mut in_block = false;
    let mut current: Option<Vec<String>> = None;
    for line in readme.lines() {
        if line.starts_with("```") {
            in_block = !in_block;
            current = None;
            continue;
        }
        if !in_block {
            continue;
        }
        if let Some(rest) = line.strip_prefix("pier ") {
            let words: Vec<String> = rest
                .split_whitespace()
                .take_while(|w| {
                    w.chars().all(|c| c.is_ascii_lowercase() || c == '-') && !w.starts_with('-')
                })
                .map(str::to_string)
                .collect();
            out.entry(words.clone()).or_default().push_str(rest);
            current = Some(words);
        } else if line.starts_with(' ') {
            if let Some(words) = &current {
                let text = out.get_mut(words).expect("entry made with the first line");
                text.push(' ');
                text.push_str(line);
            }
        } else {
            current = None;
        }
    }
    out
}

/// `-x` and `--long` tokens of a text.
fn flags_in(text: &str) -> BTreeSet<String> {
    text.split(|c: char| c.is_whitespace() || "[]|()".contains(c))
        .filter_map(|w| {
            let w = w.trim_end_matches(['.', ',']);
            let long = w.strip_prefix("--").filter(|l| {
                !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            });
            if long.is_some() {
                return Some(w.to_string());
            }
            let short = w.strip_prefix('-')?;
            (short.len() == 1 && short.chars().all(|c| c.is_ascii_alphabetic()))
                .then(|| w.to_string())
        })
        .collect()
}

/// Each option of `pier <words> --help`: its short and long forms.
fn help_options(words: &[String]) -> Vec<(Option<String>, Option<String>)> {
    let out = Command::new(env!("CARGO_BIN_EXE_pier"))
        .args(words)
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success(), "pier {words:?} --help");
    let text = String::from_utf8(out.stdout).unwrap();
    let mut options = Vec::new();
    for line in text.lines() {
        let t = line.trim_start();
        if !t.starts_with('-') || line.len() == t.len() {
            continue;
        }
        let mut short = None;
        let mut long = None;
        for part in t.split([',', ' ']).filter(|p| !p.is_empty()) {
            if let Some(l) = part.strip_prefix("--") {
                long = Some(format!("--{}", l.split(['=', '<']).next().unwrap()));
                break;
            } else if part.len() == 2 && part.starts_with('-') {
                short = Some(part.to_string());
            } else {
                break;
            }
        }
        if long.as_deref() == Some("--help") || long.as_deref() == Some("--version") {
            continue;
        }
        if short.is_some() || long.is_some() {
            options.push((short, long));
        }
    }
    options
}

#[test]
fn readme_synopses_name_exactly_the_flags_of_help() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let synopses = synopses(&readme);
    let mut problems = Vec::new();
    for required in [
        &["serve"][..],
        &["check"],
        &["upgrade"],
        &["echo"],
        &["tunnel"],
        &["bench", "http"],
        &["bench", "tls-stream"],
        &["bench", "sweep", "http"],
        &["bench", "sweep", "tls-stream"],
    ] {
        let key: Vec<String> = required.iter().map(|s| s.to_string()).collect();
        let Some(text) = synopses.get(&key) else {
            problems.push(format!("no synopsis for `pier {}`", required.join(" ")));
            continue;
        };
        let named = flags_in(text);
        let options = help_options(&key);
        let known: BTreeSet<String> = options
            .iter()
            .flat_map(|(s, l)| s.iter().chain(l.iter()).cloned())
            .collect();
        for flag in &named {
            if !known.contains(flag) {
                problems.push(format!(
                    "`pier {}`: README names {flag}, --help does not",
                    key.join(" ")
                ));
            }
        }
        for (short, long) in &options {
            let listed = short.iter().chain(long.iter()).any(|f| named.contains(f));
            if !listed {
                problems.push(format!(
                    "`pier {}`: --help has {}, the README synopsis does not",
                    key.join(" "),
                    long.as_ref().or(short.as_ref()).unwrap()
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "README and --help differ:\n{}",
        problems.join("\n")
    );
}
