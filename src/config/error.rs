//! Configuration errors and where they point: every error names the file, the line
//! and the dotted key, all taken from the spans the TOML parser records (never from
//! scanning lines, which multi-line strings and inline tables would fool).

use std::fmt;
use std::ops::Range;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

/// Span given to values that came from command-line flags rather than the file.
pub const FLAG_SPAN: Range<usize> = usize::MAX..usize::MAX;

/// A configuration error: where it is and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// File name, or `command line` for flags, or `embedded default`.
    pub file: String,
    /// 1-based line; 0 when the error is not tied to a line.
    pub line: usize,
    /// Dotted key path, e.g. `route[2].root`; empty for a syntax error.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

#[cfg(test)]
impl ConfigError {
    /// For tests: asserts that the error is reported at `line` on `key`.
    #[track_caller]
    pub fn assert_at(&self, line: usize, key: &str) {
        assert_eq!((self.line, self.key.as_str()), (line, key), "{self}");
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            return match self.line {
                0 => write!(f, "{}: {}", self.file, self.message),
                line => write!(f, "{}:{line}: {}", self.file, self.message),
            };
        }
        if self.line > 0 {
            write!(
                f,
                "{}:{}: {}: {}",
                self.file, self.line, self.key, self.message
            )
        } else {
            write!(f, "{}: {}: {}", self.file, self.key, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

/// Builds errors that point into one source text.
pub struct Locator<'a> {
    /// What errors call the source: a file name or another origin.
    pub(crate) name: &'a str,
    /// The source text the spans index.
    pub(crate) text: &'a str,
    /// Problems that do not stop a server (a missing error page answers in
    /// plain text) but that `pier check` fails on.
    findings: std::cell::RefCell<Vec<ConfigError>>,
}

impl<'a> Locator<'a> {
    /// A locator for `text`, which errors call `name`.
    pub fn new(name: &'a str, text: &'a str) -> Self {
        Locator {
            name,
            text,
            findings: Default::default(),
        }
    }

    /// Records a problem `pier check` reports and fails on, while `pier serve`
    /// runs with it.
    pub fn finding(&self, e: ConfigError) {
        self.findings.borrow_mut().push(e);
    }

    /// The problems recorded by [`Locator::finding`], in the order found.
    pub fn take_findings(&self) -> Vec<ConfigError> {
        self.findings.take()
    }

    /// An error at `span` about `key`.
    pub fn error(&self, span: Range<usize>, key: &str, message: impl Into<String>) -> ConfigError {
        if span == FLAG_SPAN {
            return ConfigError {
                file: "command line".into(),
                line: 0,
                key: key.to_string(),
                message: crate::io_text::without_os_error(&message.into()),
            };
        }
        ConfigError {
            file: self.name.to_string(),
            line: line_of(self.text, span.start),
            key: key.to_string(),
            message: crate::io_text::without_os_error(&message.into()),
        }
    }

    /// A TOML syntax error: the line it is on and what the parser says, with no
    /// key (the text around it is not yet a key and a value, so naming the key
    /// before it would blame a line that is fine).
    pub fn syntax_error(&self, e: &toml::de::Error) -> ConfigError {
        let offset = e.span().map_or(0, |s| s.start);
        ConfigError {
            file: self.name.to_string(),
            line: line_of(self.text, offset),
            key: String::new(),
            message: format!("TOML syntax error: {}", e.message().trim()),
        }
    }

    /// An error from the TOML parser or deserializer, located by its span in `tree`
    /// (the parsed document, possibly partial after a syntax error).
    pub fn toml_error(&self, tree: &DeTable<'_>, e: &toml::de::Error) -> ConfigError {
        let offset = e.span().map_or(0, |s| s.start);
        let key = key_at(tree, offset).unwrap_or_else(|| "(top level)".to_string());
        ConfigError {
            file: self.name.to_string(),
            line: line_of(self.text, offset),
            key,
            message: sentence(e.message()),
        }
    }
}

/// 1-based line of a byte offset.
pub fn line_of(text: &str, offset: usize) -> usize {
    let offset = offset.min(text.len());
    text.as_bytes()[..offset]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// The dotted key (`listener[2].tls.certificate[1].cert`) whose key or value holds
/// byte `offset`, from the parsed tree's spans; failing that (an error between
/// tokens, a partial tree after a syntax error), the nearest key before it.
pub fn key_at(tree: &DeTable<'_>, offset: usize) -> Option<String> {
    let mut walk = Walk {
        offset,
        path: String::new(),
        nearest: None,
    };
    if walk.table(tree) {
        return Some(walk.path);
    }
    walk.nearest.map(|(_, p)| p)
}

/// A search through the tree for the key at `offset`.
struct Walk {
    offset: usize,
    path: String,
    /// The key starting closest before `offset`: (start, dotted path).
    nearest: Option<(usize, String)>,
}

impl Walk {
    fn table(&mut self, t: &DeTable<'_>) -> bool {
        for (k, v) in t.iter() {
            let len = self.path.len();
            if !self.path.is_empty() {
                self.path.push('.');
            }
            self.path.push_str(k.get_ref());
            let start = k.span().start;
            if start <= self.offset && self.nearest.as_ref().is_none_or(|(s, _)| *s <= start) {
                self.nearest = Some((start, self.path.clone()));
            }
            if contains(k.span(), self.offset) || self.value(v) {
                return true;
            }
            self.path.truncate(len);
        }
        false
    }

    /// Whether `v` (or something inside it) holds the offset, extending the path to it.
    fn value(&mut self, v: &Spanned<DeValue<'_>>) -> bool {
        match v.get_ref() {
            DeValue::Table(t) => self.table(t) || contains(v.span(), self.offset),
            DeValue::Array(a) => {
                for (i, e) in a.iter().enumerate() {
                    let len = self.path.len();
                    self.path.push_str(&format!("[{}]", i + 1));
                    if self.value(e) {
                        return true;
                    }
                    self.path.truncate(len);
                }
                contains(v.span(), self.offset)
            }
            _ => contains(v.span(), self.offset),
        }
    }
}

fn contains(span: Range<usize>, offset: usize) -> bool {
    span.contains(&offset) || (span.is_empty() && span.start == offset)
}

/// Turns the deserializer's wording into a sentence a user can act on: an unknown
/// key says which keys the table takes, and suggests the nearest.
fn sentence(message: &str) -> String {
    let message = message.trim();
    let Some(rest) = message.strip_prefix("unknown field `") else {
        return in_words(message);
    };
    let Some((name, expected)) = rest.split_once('`') else {
        return message.to_string();
    };
    let known: Vec<&str> = expected
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|k| !k.is_empty())
        .collect();
    let mut out = format!("unknown field `{name}`: not a key of this table");
    if let Some(best) = known
        .iter()
        .map(|k| (edit_distance(name, k), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 3))
        .min()
    {
        out.push_str(&format!("; did you mean `{}`?", best.1));
    } else if !known.is_empty() {
        out.push_str(&format!("; it takes {}", known.join(", ")));
    }
    out
}

/// The deserializer's "invalid type: string \"two\", expected i64" with the
/// Rust type names (`i64`, `struct RawTls`, `untagged enum RawRate`) said in
/// words: "expected a whole number, not the string \"two\"".
pub fn in_words(message: &str) -> String {
    let message = message.trim();
    if let Some(name) = message.strip_prefix("data did not match any variant of untagged enum ") {
        return format!("expected {}", expected_in_words(&format!("enum {name}")));
    }
    for prefix in ["invalid type: ", "invalid value: "] {
        let Some(rest) = message.strip_prefix(prefix) else {
            continue;
        };
        let Some((found, expected)) = rest.rsplit_once(", expected ") else {
            continue;
        };
        return format!(
            "expected {}, not {}",
            expected_in_words(expected),
            found_in_words(found)
        );
    }
    if let Some((head, expected)) = message.rsplit_once(", expected ") {
        return format!("{head}, expected {}", expected_in_words(expected));
    }
    message.to_string()
}

/// What serde says a value should be, in the words the README uses.
fn expected_in_words(expected: &str) -> String {
    let expected = expected.trim();
    let words = match expected {
        "i8" | "i16" | "i32" | "i64" | "i128" | "u8" | "u16" | "u32" | "u64" | "u128" | "usize"
        | "isize" => "a whole number",
        "f32" | "f64" => "a number",
        "a sequence" | "sequence" => "a list such as [\"a\", \"b\"]",
        "a map" | "map" => "a table",
        "a boolean" | "bool" => "true or false",
        "enum RawRate" => "a rate such as \"10/s\", \"600/m\" or a number per second",
        "enum RawFieldValues" => "a field value or a list of field values",
        "enum RawTrust" => {
            "true, false or a list of addresses and networks such as [\"10.0.0.0/8\"]"
        }
        _ if expected.starts_with("struct ") => "a table",
        _ if expected.starts_with("enum ") => "a value of another form",
        _ => expected,
    };
    words.to_string()
}

/// What serde found, in words: `string "x"` -> `the string "x"`, `map` -> `a table`.
fn found_in_words(found: &str) -> String {
    let found = found.trim();
    match found {
        "map" => "a table".into(),
        "sequence" => "a list".into(),
        "unit" | "option" => "an empty value".into(),
        _ => match found.split_once(' ') {
            Some(("string" | "integer" | "boolean", v)) => {
                format!(
                    "the {} {}",
                    found.split(' ').next().unwrap_or(""),
                    v.trim_matches('`')
                )
            }
            Some(("floating", v)) => format!(
                "the number {}",
                v.trim_start_matches("point ").trim_matches('`')
            ),
            _ => found.to_string(),
        },
    }
}

/// Levenshtein distance, for "did you mean" suggestions on short key names.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let up = row[j + 1];
            row[j + 1] = (diag + usize::from(ca != *cb)).min(up + 1).min(row[j] + 1);
            diag = up;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_get_the_nearest_suggestion() {
        let m = sentence("unknown field `lisen`, expected one of `listen`, `backlog`, `tls`");
        assert_eq!(
            m,
            "unknown field `lisen`: not a key of this table; did you mean `listen`?"
        );
        let m = sentence("unknown field `zzzzzz`, expected `body` or `status`");
        assert_eq!(
            m,
            "unknown field `zzzzzz`: not a key of this table; it takes body, status"
        );
        assert_eq!(sentence("invalid type: string"), "invalid type: string");
    }

    #[test]
    fn rust_type_names_are_said_in_words() {
        assert_eq!(
            in_words("invalid type: string \"two\", expected i64"),
            "expected a whole number, not the string \"two\""
        );
        assert_eq!(
            in_words("invalid type: boolean `true`, expected struct RawTls"),
            "expected a table, not the boolean true"
        );
        assert_eq!(
            in_words("invalid type: map, expected a sequence"),
            "expected a list such as [\"a\", \"b\"], not a table"
        );
        assert_eq!(
            in_words("data did not match any variant of untagged enum RawSomething"),
            "expected a value of another form"
        );
    }

    #[test]
    fn keys_are_found_by_span_not_by_line() {
        let text = "[[route]]\nbody = \"\"\"\n[[route]]\n\"\"\"\nbogus = 1\n[[route]]\nx = 2\n";
        let tree = DeTable::parse(text).unwrap();
        let at = |needle: &str| key_at(tree.get_ref(), text.find(needle).unwrap());
        assert_eq!(at("bogus").as_deref(), Some("route[1].bogus"));
        assert_eq!(at("x =").as_deref(), Some("route[2].x"));
        assert_eq!(at("\"\"\"\n[[").as_deref(), Some("route[1].body"));
    }

    #[test]
    fn edit_distance_counts_single_edits() {
        assert_eq!(edit_distance("lisen", "listen"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
    }
}
