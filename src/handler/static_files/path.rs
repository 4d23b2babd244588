//! Request paths to file-system paths: percent-decoding one segment at a time,
//! refusing what could escape the root, and the errors an open maps to.

use std::ffi::OsStr;
use std::fs::{File, Metadata};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::io::Errno;

use crate::file_io::residency::{open_blocking, open_cached};

/// Appends one percent-decoded segment; NUL, `/` and `\` (raw or encoded) and broken escapes
/// are a 400. Other bytes, including non-UTF-8, are kept as the file name's bytes.
pub(super) fn decode_segment(segment: &[u8], out: &mut Vec<u8>) -> Result<(), u16> {
    let mut i = 0;
    while i < segment.len() {
        let byte = if segment[i] == b'%' {
            let hi = segment.get(i + 1).and_then(|&c| hex_value(c));
            let lo = segment.get(i + 2).and_then(|&c| hex_value(c));
            let (Some(hi), Some(lo)) = (hi, lo) else {
                return Err(400);
            };
            i += 3;
            hi << 4 | lo
        } else {
            i += 1;
            segment[i - 1]
        };
        if matches!(byte, 0 | b'/' | b'\\') {
            return Err(400);
        }
        out.push(byte);
    }
    Ok(())
}

pub(super) fn hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

pub(super) fn as_path(bytes: &[u8]) -> &Path {
    if bytes.is_empty() {
        Path::new("/")
    } else {
        Path::new(OsStr::from_bytes(bytes))
    }
}

pub(super) fn last_segment(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|&b| b == b'/') {
        Some(slash) => &path[slash + 1..],
        None => path,
    }
}

/// Opens and reads the metadata where waiting is allowed (a pool thread);
/// never waits for a FIFO's writer nor acquires a controlling terminal.
pub(super) fn open(path: &Path) -> io::Result<(File, Metadata)> {
    let file = open_blocking(path)?;
    let meta = file.metadata()?;
    Ok((file, meta))
}

/// Opens and reads the metadata on the event loop when the path resolves
/// from cached dentries; `Err(WouldBlock)` when the open must go off the loop.
pub(super) fn open_inline(path: &Path) -> io::Result<(File, Metadata)> {
    let file = open_cached(path)?;
    let meta = file.metadata()?;
    Ok((file, meta))
}

/// Like nginx: missing, not-a-directory, too long, symlink loops and device-less nodes
/// (sockets) are 404; access denied is 403; anything else is a server-side 500.
pub(super) fn error_status(e: &io::Error) -> u16 {
    match Errno::from_io_error(e) {
        Some(
            Errno::NOENT
            | Errno::NOTDIR
            | Errno::NAMETOOLONG
            | Errno::LOOP
            | Errno::NXIO
            | Errno::NODEV,
        ) => 404,
        Some(Errno::ACCESS | Errno::PERM) => 403,
        _ => match e.kind() {
            io::ErrorKind::NotFound => 404,
            io::ErrorKind::PermissionDenied => 403,
            _ => 500,
        },
    }
}

/// Percent-encodes everything but RFC 3986 unreserved bytes, so the result is safe in a
/// header, in an HTML attribute and as a relative reference (no `:` to read as a scheme).
pub(super) fn push_percent_encoded(out: &mut Vec<u8>, bytes: &[u8]) {
    for &b in bytes {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b);
        } else {
            out.extend_from_slice(&[
                b'%',
                b"0123456789ABCDEF"[usize::from(b >> 4)],
                b"0123456789ABCDEF"[usize::from(b & 0xf)],
            ]);
        }
    }
}

/// `relative` is the normalised path (`/a/b`, or empty for the root). Rebuilding it rather
/// than echoing the raw path keeps `//evil.example` from becoming a protocol-relative
/// redirect off-site.
pub(super) fn location_for_dir(relative: &[u8]) -> Vec<u8> {
    let mut location = Vec::with_capacity(relative.len() * 3 + 1);
    for segment in relative.split(|&b| b == b'/').filter(|s| !s.is_empty()) {
        location.push(b'/');
        push_percent_encoded(&mut location, segment);
    }
    location.push(b'/');
    location
}

/// Whether a request path is already what [`StaticFiles::resolve`] would make
/// of it under the root: a `/` and non-empty segments, none starting with `.`,
/// with no escape, backslash or NUL, and no trailing slash. Such a path has no
/// hidden segment and names the same file however it is looked up.
///
/// Asked of every request for a file, so it looks at eight bytes at a time:
/// a refused byte anywhere, or a `/` followed by `/` or `.`, fails the path.
///
/// [`StaticFiles::resolve`]: super::StaticFiles
pub(super) fn is_normal(path: &[u8]) -> bool {
    if path.first() != Some(&b'/') || path.last() == Some(&b'/') {
        return false;
    }
    let Some(last) = path.len().checked_sub(8) else {
        // Shorter than a word: an ordinary byte in the lanes it leaves.
        let mut word = [b'a'; 8];
        word[..path.len()].copy_from_slice(path);
        return word_is_normal(u64::from_le_bytes(word), 0);
    };
    // Words from the start, the last one ending with the path (overlapping
    // the one before it when the length is not a multiple of eight).
    let mut at = 0;
    loop {
        let start = at.min(last);
        let Some(word) = path.get(start..start + 8).and_then(|w| w.try_into().ok()) else {
            return false;
        };
        let slash_before = match start.checked_sub(1).and_then(|i| path.get(i)) {
            Some(b'/') => 0x80,
            _ => 0,
        };
        if !word_is_normal(u64::from_le_bytes(word), slash_before) {
            return false;
        }
        if start == last {
            return true;
        }
        at += 8;
    }
}

/// Bytes `0x01` in every lane.
const LANES_LOW: u64 = 0x0101_0101_0101_0101;
/// The low seven bits of every lane.
const LANES_LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;

/// Checks eight path bytes (the first in the lowest lane); `slash_before`
/// (`0x80`) marks the byte before them as a `/`.
fn word_is_normal(word: u64, slash_before: u64) -> bool {
    let refused = lanes_equal(word, b'%') | lanes_equal(word, b'\\') | lanes_equal(word, 0);
    let slash = lanes_equal(word, b'/');
    let after_slash = slash << 8 | slash_before;
    let bad_pair = after_slash & (slash | lanes_equal(word, b'.'));
    refused | bad_pair == 0
}

/// The top bit of each lane of `word` that equals `byte`, nothing else set.
/// Exact in every lane: no carry crosses from one lane into the next.
fn lanes_equal(word: u64, byte: u8) -> u64 {
    let diff = word ^ (LANES_LOW * u64::from(byte));
    !(((diff & LANES_LOW7) + LANES_LOW7) | diff) & !LANES_LOW7
}
