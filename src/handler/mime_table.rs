//! Content types beyond the compiled-in table: the `[mime]` table of the
//! configuration first, then the built-in types, then `/etc/mime.types` when
//! the system has one (Debian's `media-types`), for extensions neither knows.
//! Built when the configuration loads; a lookup allocates nothing.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, OnceLock};

use super::mime;

/// Where the system's table is read from.
const SYSTEM_MIME_TYPES: &str = "/etc/mime.types";

/// Longest extension looked up; longer ones are unknown.
const MAX_EXT: usize = 32;

/// Extension -> Content-Type, as one configuration says.
#[derive(Debug, Default)]
pub struct MimeTable {
    /// `[mime]`: lowercase extension without the dot -> type.
    configured: HashMap<Box<str>, &'static str>,
    /// Whether `/etc/mime.types` is consulted for unknown extensions.
    system: bool,
}

impl MimeTable {
    /// The built-in table, with the system's for what it does not know.
    pub fn new() -> Self {
        MimeTable {
            configured: HashMap::new(),
            system: true,
        }
    }

    /// Adds `[mime]` entries: extension (with or without its dot, any case) -> type.
    pub fn with_entries(mut self, entries: impl IntoIterator<Item = (String, String)>) -> Self {
        for (ext, ty) in entries {
            let ext = ext.trim_start_matches('.').to_ascii_lowercase();
            self.configured.insert(ext.into(), intern(ty));
        }
        self
    }

    /// Content-Type for a file name (its last path segment).
    pub fn for_file_name(&self, name: &[u8]) -> &'static str {
        let Some(dot) = name.iter().rposition(|&b| b == b'.') else {
            return mime::DEFAULT;
        };
        let ext = &name[dot + 1..];
        let mut lower = [0u8; MAX_EXT];
        if ext.is_empty() || ext.len() > MAX_EXT {
            return mime::DEFAULT;
        }
        for (d, s) in lower.iter_mut().zip(ext) {
            *d = s.to_ascii_lowercase();
        }
        let Ok(ext) = std::str::from_utf8(&lower[..ext.len()]) else {
            return mime::DEFAULT;
        };
        // Most configurations add no types: no hashing for them.
        if !self.configured.is_empty() {
            if let Some(ty) = self.configured.get(ext) {
                return ty;
            }
        }
        let builtin = mime::for_extension(ext.as_bytes());
        if builtin != mime::DEFAULT || !self.system {
            return builtin;
        }
        system_types().get(ext).copied().unwrap_or(mime::DEFAULT)
    }
}

/// The system's table, read once per process.
fn system_types() -> &'static HashMap<Box<str>, &'static str> {
    static TYPES: OnceLock<HashMap<Box<str>, &'static str>> = OnceLock::new();
    TYPES.get_or_init(|| {
        std::fs::read_to_string(SYSTEM_MIME_TYPES)
            .map(|text| parse_mime_types(&text))
            .unwrap_or_default()
    })
}

/// Reads the `type ext ext...` lines of a mime.types file; `#` starts a comment.
fn parse_mime_types(text: &str) -> HashMap<Box<str>, &'static str> {
    let mut map = HashMap::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("");
        let mut words = line.split_whitespace();
        let Some(ty) = words.next().filter(|t| t.contains('/')) else {
            continue;
        };
        let ty = intern(ty.to_string());
        for ext in words {
            map.entry(ext.to_ascii_lowercase().into()).or_insert(ty);
        }
    }
    map
}

/// Content types live for the process: each distinct one is kept once, so
/// reloading a configuration does not grow memory.
fn intern(ty: String) -> &'static str {
    static SEEN: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut seen = SEEN
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(known) = seen.get(ty.as_str()) {
        return known;
    }
    let leaked: &'static str = Box::leak(ty.into_boxed_str());
    seen.insert(leaked);
    leaked
}

/// Whether `ty` reads as a media type (`type/subtype`, parameters allowed).
pub fn is_media_type(ty: &str) -> bool {
    let essence = ty.split(';').next().unwrap_or("").trim();
    let Some((top, sub)) = essence.split_once('/') else {
        return false;
    };
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    token(top) && token(sub) && !ty.bytes().any(|b| b < 0x20 || b == 0x7f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configured_types_win_then_built_in_then_the_system_s() {
        let t = MimeTable {
            configured: HashMap::new(),
            system: false,
        }
        .with_entries([
            (".GLB".to_string(), "model/gltf-binary".to_string()),
            ("txt".to_string(), "text/plain; charset=latin1".to_string()),
        ]);
        assert_eq!(t.for_file_name(b"scene.glb"), "model/gltf-binary");
        assert_eq!(t.for_file_name(b"A.TXT"), "text/plain; charset=latin1");
        assert_eq!(t.for_file_name(b"a.css"), "text/css; charset=utf-8");
        assert_eq!(t.for_file_name(b"a.unknownext"), mime::DEFAULT);
        assert_eq!(t.for_file_name(b"noext"), mime::DEFAULT);
    }

    #[test]
    fn a_mime_types_file_is_read_as_debian_writes_it() {
        let map = parse_mime_types(
            "# comment\napplication/vnd.x\t\txyz xyz2\n\ntext/x-thing  thing # trailing\nnotatype foo\n",
        );
        assert_eq!(map.get("xyz").copied(), Some("application/vnd.x"));
        assert_eq!(map.get("xyz2").copied(), Some("application/vnd.x"));
        assert_eq!(map.get("thing").copied(), Some("text/x-thing"));
        assert!(!map.contains_key("foo"));
    }

    #[test]
    fn media_types_are_checked() {
        assert!(is_media_type("text/plain; charset=utf-8"));
        assert!(is_media_type("application/vnd.ms-excel"));
        assert!(!is_media_type("text"));
        assert!(!is_media_type("text/plain\n"));
        assert!(!is_media_type("/x"));
    }

    #[test]
    fn interned_types_are_kept_once() {
        let a = intern("x/y".to_string());
        let b = intern("x/y".to_string());
        assert!(std::ptr::eq(a, b));
    }
}
