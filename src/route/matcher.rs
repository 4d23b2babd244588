//! What a route matches beside its host: path prefixes, exact paths and path
//! patterns, file extensions, methods, the scheme, the listener and request
//! fields; and the rank that orders a site's routes (exact paths first, then
//! the longest literal path, then the route with more conditions, then the
//! order written).

use crate::http::RequestView;

/// One way a route matches the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathMatch {
    /// The path starts with these bytes (`/api/`).
    Prefix(Box<[u8]>),
    /// The path is exactly these bytes.
    Exact(Box<[u8]>),
    /// A pattern where `*` stands for any run of bytes, `/` included
    /// (`/assets/*`, `*.css`, `/img/*.png`).
    Pattern(Box<[u8]>),
}

impl PathMatch {
    /// `text` as written in a route's `path`: a pattern if it has a `*`,
    /// else a prefix.
    pub fn from_path(text: &str) -> PathMatch {
        if text.contains('*') {
            PathMatch::Pattern(text.as_bytes().into())
        } else {
            PathMatch::Prefix(text.as_bytes().into())
        }
    }

    /// Whether `path` (without the query) matches.
    #[inline]
    pub fn matches(&self, path: &[u8]) -> bool {
        match self {
            PathMatch::Prefix(p) => path.starts_with(p),
            PathMatch::Exact(p) => path == &**p,
            PathMatch::Pattern(p) => glob(p, path),
        }
    }

    /// How many literal bytes the match is sure of: the whole of an exact
    /// path or prefix, a pattern's part before its first `*` (`/` at least:
    /// every path starts with it).
    fn literal_len(&self) -> usize {
        match self {
            PathMatch::Prefix(p) | PathMatch::Exact(p) => p.len(),
            PathMatch::Pattern(p) => p.iter().position(|&b| b == b'*').unwrap_or(p.len()).max(1),
        }
    }

    /// As written in the configuration, for labels and `pier check --routes`.
    pub fn text(&self) -> String {
        match self {
            PathMatch::Prefix(p) | PathMatch::Pattern(p) => String::from_utf8_lossy(p).into(),
            PathMatch::Exact(p) => format!("={}", String::from_utf8_lossy(p)),
        }
    }
}

/// `*` matches any run of bytes; every other byte itself.
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where the last `*` was, and the text position it was tried at.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if p < pattern.len() && pattern[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((sp, st)) = star {
            // Let the last `*` take one more byte and try again from there.
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&b| b == b'*')
}

/// `http` or `https`, as a route's `scheme` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// A plain listener.
    Http,
    /// A TLS listener.
    Https,
}

/// A request field a route asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldCondition {
    /// The field's name (matched without regard to case).
    pub name: String,
    /// The value it must have exactly; `None`: any value, present.
    pub value: Option<Box<[u8]>>,
}

/// The conditions of a route beside its path; all must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Conditions {
    /// The last path segment ends with `.` and one of these (lowercase).
    pub extensions: Vec<Box<[u8]>>,
    /// The method is one of these.
    pub methods: Vec<Box<[u8]>>,
    /// The listener is plain or TLS.
    pub scheme: Option<Scheme>,
    /// The request came on one of these listeners (by position in the
    /// configuration).
    pub listeners: Option<Vec<usize>>,
    /// Fields the request carries.
    pub fields: Vec<FieldCondition>,
}

impl Conditions {
    /// How many conditions there are, for the rank.
    fn count(&self) -> usize {
        usize::from(!self.extensions.is_empty())
            + usize::from(!self.methods.is_empty())
            + usize::from(self.scheme.is_some())
            + usize::from(self.listeners.is_some())
            + self.fields.len()
    }

    /// Whether there are none: a route of paths alone.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }

    /// Whether every condition holds for `req`, whose path is `path`.
    pub fn hold(&self, req: &RequestView<'_>, path: &[u8]) -> bool {
        if !self.extensions.is_empty() && !has_extension(path, &self.extensions) {
            return false;
        }
        if !self.methods.is_empty() && !self.methods.iter().any(|m| **m == *req.method_token()) {
            return false;
        }
        match self.scheme {
            Some(Scheme::Http) if req.is_secure() => return false,
            Some(Scheme::Https) if !req.is_secure() => return false,
            _ => {}
        }
        if let Some(listeners) = &self.listeners {
            if !listeners.contains(&req.listener()) {
                return false;
            }
        }
        self.fields
            .iter()
            .all(|f| match (req.header(&f.name), &f.value) {
                (None, _) => false,
                (Some(_), None) => true,
                (Some(v), Some(want)) => v == &**want,
            })
    }
}

/// Whether the last segment of `path` ends with `.ext` for one of `exts`
/// (lowercase), without regard to case.
fn has_extension(path: &[u8], exts: &[Box<[u8]>]) -> bool {
    let segment = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
    let Some(dot) = segment.iter().rposition(|&b| b == b'.') else {
        return false;
    };
    let ext = &segment[dot + 1..];
    exts.iter().any(|e| e.eq_ignore_ascii_case(ext))
}

/// Everything a route matches on beside its host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteMatch {
    /// Ways the path may match (any one); never empty.
    pub paths: Vec<PathMatch>,
    /// Conditions beside the path (all of them).
    pub conditions: Conditions,
}

impl RouteMatch {
    /// Every path under `prefix`, no other condition.
    pub fn prefix(prefix: &str) -> RouteMatch {
        RouteMatch {
            paths: vec![PathMatch::Prefix(prefix.as_bytes().into())],
            conditions: Conditions::default(),
        }
    }

    /// Every request.
    pub fn everything() -> RouteMatch {
        RouteMatch::prefix("/")
    }

    /// The rank of the route's path `i`: higher is tried first.
    pub(super) fn rank(&self, i: usize) -> Rank {
        let p = &self.paths[i];
        Rank {
            exact: matches!(p, PathMatch::Exact(_)),
            literal: p.literal_len(),
            conditions: self.conditions.count() + usize::from(matches!(p, PathMatch::Pattern(_))),
        }
    }

    /// The first path as written, for labels.
    pub fn label(&self) -> String {
        self.paths
            .first()
            .map_or_else(|| "/".into(), PathMatch::text)
    }
}

/// The order routes are tried in: exact paths first, then the longest literal
/// path, then more conditions (a pattern counts as one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Rank {
    exact: bool,
    literal: usize,
    conditions: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_any_run_of_bytes_at_each_star() {
        assert!(glob(b"*.css", b"/a/b/site.css"));
        assert!(!glob(b"*.css", b"/a/b/site.css.map"));
        assert!(glob(b"/assets/*", b"/assets/"));
        assert!(glob(b"/assets/*", b"/assets/x/y.js"));
        assert!(!glob(b"/assets/*", b"/asset"));
        assert!(glob(b"/img/*.png", b"/img/a/b.png"));
        assert!(!glob(b"/img/*.png", b"/other/b.png"));
        assert!(glob(b"/a*b*c", b"/aXXbYYbZc"));
        assert!(!glob(b"/a*b*c", b"/aXXbYY"));
        assert!(glob(b"/exact", b"/exact"));
        assert!(!glob(b"/exact", b"/exact/"));
    }

    #[test]
    fn extensions_are_read_from_the_last_segment_without_case() {
        let exts: Vec<Box<[u8]>> = vec![b"css"[..].into(), b"js"[..].into()];
        assert!(has_extension(b"/a/site.CSS", &exts));
        assert!(has_extension(b"/app.min.js", &exts));
        assert!(!has_extension(b"/css/", &exts));
        assert!(!has_extension(b"/a.css/b", &exts));
        assert!(!has_extension(b"/js", &exts));
    }

    #[test]
    fn exact_paths_rank_first_then_longer_literals_then_more_conditions() {
        let m = |paths: Vec<PathMatch>, exts: usize| RouteMatch {
            paths,
            conditions: Conditions {
                extensions: vec![b"css"[..].into(); exts],
                ..Conditions::default()
            },
        };
        let exact = m(vec![PathMatch::Exact(b"/"[..].into())], 0).rank(0);
        let assets = m(vec![PathMatch::from_path("/assets/")], 0).rank(0);
        let root = m(vec![PathMatch::from_path("/")], 0).rank(0);
        let css = m(vec![PathMatch::from_path("*.css")], 0).rank(0);
        let root_css = m(vec![PathMatch::from_path("/")], 1).rank(0);
        assert!(exact > assets && assets > css && css > root);
        assert!(root_css > root);
        assert_eq!(css, root_css);
    }
}
