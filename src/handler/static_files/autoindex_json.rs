//! Autoindex as JSON, for scripts: nginx's `autoindex_format json` shape, an
//! array of `{"name", "type", "mtime", "size"}` in the order of the HTML page
//! (directories first, then files, by name). Chosen by `autoindex_format =
//! "json"`, or per request by `Accept: application/json` as Caddy's browse does.

use std::path::Path;

use serde::Serialize;

use super::autoindex::read_entries;
use super::reply::Reply;

/// One entry as nginx's JSON autoindex writes it.
#[derive(Serialize)]
struct JsonEntry<'a> {
    name: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    mtime: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<u64>,
}

/// The listing of `dir` as JSON; names that are not UTF-8 are shown with
/// U+FFFD in place of the bytes that are not.
pub(super) fn listing_json(dir: &Path) -> Reply {
    let (names, _truncated) = match read_entries(dir) {
        Ok(read) => read,
        Err(status) => return Reply::Error(status),
    };
    let shown: Vec<String> = names
        .iter()
        .map(|(_, n, _)| String::from_utf8_lossy(n).into_owned())
        .collect();
    let entries: Vec<JsonEntry<'_>> = names
        .iter()
        .zip(&shown)
        .map(|((is_file, _, meta), name)| JsonEntry {
            name,
            kind: match meta {
                _ if !is_file => "directory",
                Some(m) if m.is_file() => "file",
                _ => "other",
            },
            mtime: meta
                .as_ref()
                .and_then(|m| m.modified().ok())
                .map(httpdate::fmt_http_date),
            size: meta.as_ref().filter(|m| m.is_file()).map(|m| m.len()),
        })
        .collect();
    let mut body = serde_json::to_vec(&entries).unwrap_or_else(|_| b"[]".to_vec());
    body.push(b'\n');
    Reply::ListingJson { body }
}
