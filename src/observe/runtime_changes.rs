//! The changes made through the runtime API to a running configuration's
//! upstream groups, read back from the groups' server tables (so a change
//! undone is no longer shown), and the configuration's text with them marked
//! as TOML comments for `GET /api/config`. The marked text is the same
//! configuration: posting it back undoes every change.

use std::fmt::Write;

use toml::de::{DeTable, DeValue};

use crate::config::Config;
use crate::upstream::group::UpstreamGroup;
use crate::upstream::server_table::{Server, ServerMode, ServerOrigin};

/// One server's state that an operator set, as a sentence.
fn server_changes(s: &Server) -> Vec<String> {
    let who = if s.authority == s.addr.to_string() {
        format!("server {}", s.addr)
    } else {
        format!("server {} ({})", s.addr, s.authority)
    };
    let mut out = Vec::new();
    match (s.origin, s.listed()) {
        (ServerOrigin::Runtime, false) => return out,
        (ServerOrigin::Runtime, true) => {
            out.push(format!("{who} added (weight {})", s.weight_given()))
        }
        (ServerOrigin::Configured, false) => out.push(format!("{who} removed")),
        _ => {}
    }
    if let Some(w) = s.weight_set() {
        out.push(format!(
            "{who} weight {w} (configured {})",
            s.weight_given()
        ));
    }
    match s.mode() {
        ServerMode::Drain => out.push(format!("{who} draining")),
        ServerMode::Maintenance => out.push(format!("{who} in maintenance")),
        ServerMode::Ready => {}
    }
    out
}

/// Every runtime change of `group`.
pub fn group_changes(group: &UpstreamGroup) -> Vec<String> {
    group.servers.iter().flat_map(server_changes).collect()
}

/// `config`'s text with a header saying where it came from and every runtime
/// change listed, each also marked under the `name` line of its group.
pub fn marked_config_text(config: &Config) -> String {
    let text = &*config.text;
    let changes: Vec<(&str, Vec<String>)> = config
        .upstreams
        .iter()
        .map(|g| (g.name.as_str(), group_changes(g)))
        .filter(|(_, c)| !c.is_empty())
        .collect();
    let mut out = format!(
        "# The running configuration, loaded from {}.\n",
        config.source
    );
    if changes.is_empty() {
        out.push_str("# No changes through the runtime API since.\n");
    } else {
        out.push_str(
            "# Changed through the runtime API since (until the next reload or restart):\n",
        );
        for (group, list) in &changes {
            for c in list {
                let _ = writeln!(out, "#   upstream {group:?}: {c}");
            }
        }
    }
    let mut marks = group_name_lines(text);
    marks.retain(|(_, name)| changes.iter().any(|(g, _)| g == name));
    let mut line_end = 0;
    for (end, name) in marks {
        out.push_str(&text[line_end..end]);
        line_end = end;
        let Some((_, list)) = changes.iter().find(|(g, _)| *g == name) else {
            continue;
        };
        if !out.ends_with('\n') {
            out.push('\n');
        }
        for c in list {
            let _ = writeln!(out, "# runtime change: {c}");
        }
    }
    out.push_str(&text[line_end..]);
    out
}

/// For each `[[upstream]]` table, the byte offset just past the line holding
/// its `name` (its newline included) and the name; empty when the text does
/// not parse.
fn group_name_lines(text: &str) -> Vec<(usize, String)> {
    let Ok(tree) = DeTable::parse(text) else {
        return Vec::new();
    };
    let Some(upstreams) = tree.get_ref().get("upstream") else {
        return Vec::new();
    };
    let DeValue::Array(list) = upstreams.get_ref() else {
        return Vec::new();
    };
    let mut out: Vec<(usize, String)> = list
        .iter()
        .filter_map(|u| match u.get_ref() {
            DeValue::Table(t) => t.get("name"),
            _ => None,
        })
        .filter_map(|name| match name.get_ref() {
            DeValue::String(n) => {
                let end = text[name.span().end..]
                    .find('\n')
                    .map_or(text.len(), |i| name.span().end + i + 1);
                Some((end, n.to_string()))
            }
            _ => None,
        })
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::check_text;

    const TEXT: &str = "[[listener]]\nlisten = \"127.0.0.1:0\"\n[[route]]\nhandler = \"respond\"\n\
                        [[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:1\", \"127.0.0.1:2\"]\n\
                        [[upstream]]\nname = \"other\"\nservers = [\"127.0.0.1:3\"]\n";

    #[test]
    fn runtime_changes_are_marked_under_their_group_and_the_text_stays_toml() {
        let config = check_text(TEXT).unwrap();
        let app = &config.upstreams[0];
        app.servers.set_weight(0, 3);
        app.servers.set_mode(1, ServerMode::Drain);
        app.servers.add_runtime("127.0.0.1:4".parse().unwrap(), 2);
        let other = &config.upstreams[1];
        other.servers.remove(0);
        let text = marked_config_text(&config);
        assert!(
            text.contains("#   upstream \"app\": server 127.0.0.1:1 weight 3 (configured 1)\n"),
            "{text}"
        );
        assert!(text.contains("name = \"app\"\n# runtime change: server 127.0.0.1:1 weight 3 (configured 1)\n# runtime change: server 127.0.0.1:2 draining\n# runtime change: server 127.0.0.1:4 added (weight 2)\nservers"), "{text}");
        assert!(
            text.contains("name = \"other\"\n# runtime change: server 127.0.0.1:3 removed\n"),
            "{text}"
        );
        // The same configuration: the marks are comments.
        let again = check_text(&text).unwrap();
        assert_eq!(again.upstreams[0].servers.len(), 2);
        assert_eq!(group_changes(&again.upstreams[0]), Vec::<String>::new());
    }

    #[test]
    fn an_undone_change_is_not_marked() {
        let config = check_text(TEXT).unwrap();
        config.upstreams[0].servers.set_mode(0, ServerMode::Drain);
        config.upstreams[0].servers.set_mode(0, ServerMode::Ready);
        let text = marked_config_text(&config);
        assert!(
            text.contains("No changes through the runtime API"),
            "{text}"
        );
        assert!(text.ends_with(TEXT), "{text}");
    }
}
