//! Autoindex: the HTML listing of a directory without an index file.

use std::fs;
use std::os::unix::ffi::OsStringExt;
use std::path::Path;

use super::path::{error_status, push_percent_encoded};
use super::reply::Reply;

/// Most directory entries read for one autoindex page, bounding its time and memory.
pub const MAX_LISTING_ENTRIES: usize = 10_000;

fn push_html_escaped(out: &mut Vec<u8>, text: &str) {
    for b in text.bytes() {
        match b {
            b'&' => out.extend_from_slice(b"&amp;"),
            b'<' => out.extend_from_slice(b"&lt;"),
            b'>' => out.extend_from_slice(b"&gt;"),
            b'"' => out.extend_from_slice(b"&quot;"),
            b'\'' => out.extend_from_slice(b"&#39;"),
            _ => out.push(b),
        }
    }
}

/// Width of the name column, as nginx's autoindex pads it.
const NAME_COLUMN: usize = 50;

/// The date (UTC, as in HTTP) and size columns after an entry's name: `-` for
/// a directory's size and for what cannot be read.
fn push_details(out: &mut Vec<u8>, name_width: usize, meta: Option<&fs::Metadata>) {
    out.resize(
        out.len() + NAME_COLUMN.saturating_sub(name_width).max(1),
        b' ',
    );
    let date = meta
        .and_then(|m| m.modified().ok())
        .map_or_else(|| "-".to_string(), httpdate::fmt_http_date);
    let size = match meta {
        Some(m) if m.is_file() => m.len().to_string(),
        _ => "-".to_string(),
    };
    out.extend_from_slice(format!("{date:<29} {size:>12}").trim_end().as_bytes());
}

/// One listed entry: (is a file, name bytes, metadata through symlinks).
pub(super) type ListingEntry = (bool, Vec<u8>, Option<fs::Metadata>);

/// The entries of `dir` to list, directories first, then files, each by name
/// bytes; dot-files left out; whether the listing stopped at
/// [`MAX_LISTING_ENTRIES`]; the status to answer when it cannot be read.
pub(super) fn read_entries(dir: &Path) -> Result<(Vec<ListingEntry>, bool), u16> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => return Err(error_status(&e)),
    };
    let mut names: Vec<ListingEntry> = Vec::new();
    let mut truncated = false;
    for (seen, entry) in entries.enumerate() {
        if seen == MAX_LISTING_ENTRIES {
            truncated = true;
            break;
        }
        let Ok(entry) = entry else { continue };
        let name = entry.file_name().into_vec();
        if name.starts_with(b".") {
            continue;
        }
        // Through a symlink, what it leads to (its size, its date).
        let meta = match entry.file_type() {
            Ok(t) if t.is_symlink() => fs::metadata(entry.path()).ok(),
            _ => entry.metadata().ok(),
        };
        let is_dir = meta.as_ref().is_some_and(|m| m.is_dir());
        names.push((!is_dir, name, meta));
    }
    names.sort_unstable_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    Ok((names, truncated))
}

/// Autoindex page: directories first, then files, each by name bytes, with the
/// date and size of each (as `python -m http.server`, Caddy's browse and nginx's
/// autoindex show). Dot-files are left out
/// (as nginx does) and at most [`MAX_LISTING_ENTRIES`] entries are read.
pub(super) fn listing(dir: &Path, relative: &[u8]) -> Reply {
    let (names, truncated) = match read_entries(dir) {
        Ok(read) => read,
        Err(status) => return Reply::Error(status),
    };
    let mut title = String::from_utf8_lossy(relative).into_owned();
    title.push('/');
    let mut body = Vec::with_capacity(
        256 + names
            .iter()
            .map(|(_, n, _)| 2 * n.len() + 96)
            .sum::<usize>(),
    );
    body.extend_from_slice(
        b"<!DOCTYPE html>\n<html>\n<head><meta charset=\"utf-8\"><title>Index of ",
    );
    push_html_escaped(&mut body, &title);
    body.extend_from_slice(b"</title></head>\n<body>\n<h1>Index of ");
    push_html_escaped(&mut body, &title);
    body.extend_from_slice(b"</h1><hr><pre>\n");
    if !relative.is_empty() {
        body.extend_from_slice(b"<a href=\"../\">../</a>\n");
    }
    for (is_file, name, meta) in &names {
        let slash: &[u8] = if *is_file { b"" } else { b"/" };
        body.extend_from_slice(b"<a href=\"");
        push_percent_encoded(&mut body, name);
        body.extend_from_slice(slash);
        body.extend_from_slice(b"\">");
        let shown = String::from_utf8_lossy(name);
        push_html_escaped(&mut body, &shown);
        body.extend_from_slice(slash);
        body.extend_from_slice(b"</a>");
        push_details(
            &mut body,
            shown.chars().count() + slash.len(),
            meta.as_ref(),
        );
        body.push(b'\n');
    }
    if truncated {
        body.extend_from_slice(b"(listing truncated)\n");
    }
    body.extend_from_slice(b"</pre><hr></body>\n</html>\n");
    Reply::Listing { body }
}
