//! `Cache-Control` directives (RFC 9111 §5.2) as a shared cache reads them, on
//! responses and on requests. Unknown directives are ignored (§5.2.3); a
//! malformed delta-seconds counts as the strictest reading: `max-age=abc` is
//! `max-age=0` (§4.2.1 treats an invalid freshness as stale).

use crate::http1::grammar::list_elements;

/// The response directives a shared cache acts on.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ResponseDirectives {
    /// `no-store`: never stored.
    pub no_store: bool,
    /// `no-cache` (qualified or not): stored, but revalidated before every use.
    pub no_cache: bool,
    /// `private` (qualified or not): not for a shared cache.
    pub private: bool,
    /// `public`: storable even where it would not be by default.
    pub public: bool,
    /// `max-age`, seconds.
    pub max_age: Option<u64>,
    /// `s-maxage`, seconds: overrides `max-age` for shared caches.
    pub s_maxage: Option<u64>,
    /// `must-revalidate`: never served stale.
    pub must_revalidate: bool,
    /// `proxy-revalidate`: never served stale by a shared cache.
    pub proxy_revalidate: bool,
    /// `stale-while-revalidate` (RFC 5861), seconds.
    pub stale_while_revalidate: Option<u64>,
    /// `stale-if-error` (RFC 5861), seconds.
    pub stale_if_error: Option<u64>,
}

impl ResponseDirectives {
    /// Reads every `Cache-Control` value of a response.
    pub fn parse<'a>(values: impl Iterator<Item = &'a [u8]>) -> Self {
        let mut d = ResponseDirectives::default();
        for value in values {
            for (name, arg) in directives(value) {
                match name {
                    Name::Known("no-store") => d.no_store = true,
                    Name::Known("no-cache") => d.no_cache = true,
                    Name::Known("private") => d.private = true,
                    Name::Known("public") => d.public = true,
                    Name::Known("max-age") => d.max_age = Some(min_of(d.max_age, seconds(arg))),
                    Name::Known("s-maxage") => {
                        d.s_maxage = Some(min_of(d.s_maxage, seconds(arg)));
                    }
                    Name::Known("must-revalidate") => d.must_revalidate = true,
                    Name::Known("proxy-revalidate") => d.proxy_revalidate = true,
                    Name::Known("stale-while-revalidate") => {
                        d.stale_while_revalidate = Some(seconds(arg));
                    }
                    Name::Known("stale-if-error") => d.stale_if_error = Some(seconds(arg)),
                    _ => {}
                }
            }
        }
        d
    }

    /// Whether a stale copy must never be served (`must-revalidate`,
    /// `proxy-revalidate`, or `s-maxage`, which implies it for shared caches).
    pub fn no_stale(&self) -> bool {
        self.must_revalidate || self.proxy_revalidate || self.s_maxage.is_some()
    }
}

/// The largest delta-seconds a cache needs to tell apart (RFC 9111 §1.2.2):
/// larger values, and any that overflow, count as this.
pub const MAX_DELTA_SECONDS: u64 = 1 << 31;

/// An `Age` field (RFC 9111 §5.1), given every line of it: a list-valued
/// `Age` (or several lines, which make one list) is read by its first
/// member, and when that member is not a non-negative integer the field is
/// invalid and ignored (`None`): then the response is as old as its `Date`
/// and the time in transit say, never younger. Values past
/// [`MAX_DELTA_SECONDS`] saturate to it.
pub fn age_seconds<'a>(values: impl Iterator<Item = &'a [u8]>) -> Option<u64> {
    let first = values.flat_map(list_elements).next()?;
    if first.is_empty() || !first.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(first.iter().fold(0u64, |n, &d| {
        n.saturating_mul(10)
            .saturating_add(u64::from(d - b'0'))
            .min(MAX_DELTA_SECONDS)
    }))
}

/// The request directives a shared cache acts on.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RequestDirectives {
    /// `no-cache` (or `Pragma: no-cache` without `Cache-Control`): revalidate.
    pub no_cache: bool,
    /// `no-store`: neither the request nor its response is stored.
    pub no_store: bool,
    /// `max-age`: a stored response older than this is not wanted.
    pub max_age: Option<u64>,
    /// `max-stale`: a stale response is acceptable this far past its
    /// freshness (`u64::MAX` when the directive has no value).
    pub max_stale: Option<u64>,
    /// `min-fresh`: the response must stay fresh at least this much longer.
    pub min_fresh: Option<u64>,
    /// `only-if-cached`: answer from the cache or 504.
    pub only_if_cached: bool,
}

impl RequestDirectives {
    /// Reads a request's `Cache-Control` values, and `Pragma: no-cache` when
    /// it has none (RFC 9111 §5.4).
    pub fn parse<'a>(
        values: impl Iterator<Item = &'a [u8]>,
        pragma: impl Iterator<Item = &'a [u8]>,
    ) -> Self {
        let mut d = RequestDirectives::default();
        let mut any = false;
        for value in values {
            for (name, arg) in directives(value) {
                any = true;
                match name {
                    Name::Known("no-cache") => d.no_cache = true,
                    Name::Known("no-store") => d.no_store = true,
                    Name::Known("max-age") => d.max_age = Some(seconds(arg)),
                    Name::Known("max-stale") => {
                        d.max_stale = Some(if arg.is_none() {
                            u64::MAX
                        } else {
                            seconds(arg)
                        });
                    }
                    Name::Known("min-fresh") => d.min_fresh = Some(seconds(arg)),
                    Name::Known("only-if-cached") => d.only_if_cached = true,
                    _ => {}
                }
            }
        }
        if !any {
            d.no_cache = pragma
                .flat_map(list_elements)
                .any(|e| e.eq_ignore_ascii_case(b"no-cache"));
        }
        d
    }
}

/// A directive name, lowercased when it is one this module knows.
enum Name {
    Known(&'static str),
    Other,
}

const KNOWN: &[&str] = &[
    "no-store",
    "no-cache",
    "private",
    "public",
    "max-age",
    "s-maxage",
    "must-revalidate",
    "proxy-revalidate",
    "stale-while-revalidate",
    "stale-if-error",
    "max-stale",
    "min-fresh",
    "only-if-cached",
];

/// The directives of one field value: names (case-insensitive) and their
/// argument, quotes removed.
fn directives(value: &[u8]) -> impl Iterator<Item = (Name, Option<&[u8]>)> {
    list_elements(value).map(|element| {
        let (name, arg) = match element.iter().position(|&b| b == b'=') {
            Some(eq) => (&element[..eq], Some(&element[eq + 1..])),
            None => (element, None),
        };
        let name = crate::http1::grammar::trim_ows(name);
        let known = KNOWN
            .iter()
            .find(|k| k.as_bytes().eq_ignore_ascii_case(name))
            .map_or(Name::Other, |k| Name::Known(k));
        let arg = arg.map(|a| {
            let a = crate::http1::grammar::trim_ows(a);
            a.strip_prefix(b"\"")
                .and_then(|a| a.strip_suffix(b"\""))
                .unwrap_or(a)
        });
        (known, arg)
    })
}

/// delta-seconds (RFC 9111 §1.2.2): digits; too large saturates, anything
/// else reads as 0.
fn seconds(arg: Option<&[u8]>) -> u64 {
    let Some(arg) = arg else { return 0 };
    if arg.is_empty() || !arg.iter().all(u8::is_ascii_digit) {
        return 0;
    }
    arg.iter().fold(0u64, |n, &d| {
        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    })
}

/// A directive given twice counts at its stricter (smaller) value.
fn min_of(old: Option<u64>, new: u64) -> u64 {
    old.map_or(new, |o| o.min(new))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(v: &str) -> ResponseDirectives {
        ResponseDirectives::parse(std::iter::once(v.as_bytes()))
    }

    fn request(v: &str) -> RequestDirectives {
        RequestDirectives::parse(std::iter::once(v.as_bytes()), std::iter::empty())
    }

    #[test]
    fn response_directives_are_read_case_insensitively_with_arguments() {
        let d = response("Public, MAX-AGE=60, s-maxage=\"30\", must-revalidate, x-ext=1");
        assert!(d.public && d.must_revalidate);
        assert_eq!(d.max_age, Some(60));
        assert_eq!(d.s_maxage, Some(30));
        assert!(!d.no_store && !d.private && !d.no_cache);
    }

    #[test]
    fn qualified_private_and_no_cache_count_as_unqualified() {
        let d = response("private=\"Set-Cookie, X-A\", no-cache=\"X-B\"");
        assert!(d.private && d.no_cache);
    }

    #[test]
    fn an_invalid_max_age_is_zero_and_a_repeated_one_takes_the_smaller() {
        assert_eq!(response("max-age=abc").max_age, Some(0));
        assert_eq!(response("max-age=60, max-age=10").max_age, Some(10));
        assert_eq!(
            response("max-age=99999999999999999999999").max_age,
            Some(u64::MAX)
        );
    }

    fn age(lines: &[&str]) -> Option<u64> {
        age_seconds(lines.iter().map(|l| l.as_bytes()))
    }

    #[test]
    fn an_age_list_is_read_by_its_first_member() {
        assert_eq!(age(&["100"]), Some(100));
        assert_eq!(age(&[" 7 "]), Some(7));
        assert_eq!(age(&["100, 0"]), Some(100));
        assert_eq!(age(&["0, 100"]), Some(0));
        assert_eq!(age(&[", 30"]), Some(30), "empty members do not count");
        // Two lines make one list.
        assert_eq!(age(&["100", "0"]), Some(100));
        assert_eq!(age(&["0", "100"]), Some(0));
    }

    #[test]
    fn an_age_whose_first_member_is_not_a_non_negative_integer_is_ignored() {
        for junk in [
            &["old, 0"][..],
            &["old", "0"],
            &["-5"],
            &["+5"],
            &["1.5"],
            &["5s"],
            &["0x10"],
            &[""],
            &["\"12\""],
        ] {
            assert_eq!(age(junk), None, "{junk:?}");
        }
        assert_eq!(age(&[]), None);
    }

    #[test]
    fn a_huge_age_saturates_at_two_to_the_31() {
        assert_eq!(age(&["2147483647"]), Some(2_147_483_647));
        assert_eq!(age(&["2147483648"]), Some(MAX_DELTA_SECONDS));
        assert_eq!(age(&["2147483649"]), Some(MAX_DELTA_SECONDS));
        assert_eq!(
            age(&["99999999999999999999999999999, 0"]),
            Some(MAX_DELTA_SECONDS)
        );
    }

    #[test]
    fn stale_extensions_are_read() {
        let d = response("max-age=1, stale-while-revalidate=30, stale-if-error=600");
        assert_eq!(d.stale_while_revalidate, Some(30));
        assert_eq!(d.stale_if_error, Some(600));
    }

    #[test]
    fn s_maxage_and_proxy_revalidate_forbid_stale_use() {
        assert!(response("s-maxage=5").no_stale());
        assert!(response("proxy-revalidate").no_stale());
        assert!(!response("max-age=5").no_stale());
    }

    #[test]
    fn request_directives_are_read() {
        let d = request("no-cache, max-age=5, min-fresh=2, only-if-cached");
        assert!(d.no_cache && d.only_if_cached);
        assert_eq!((d.max_age, d.min_fresh), (Some(5), Some(2)));
        assert_eq!(request("max-stale").max_stale, Some(u64::MAX));
        assert_eq!(request("max-stale=7").max_stale, Some(7));
        assert!(request("no-store").no_store);
    }

    #[test]
    fn pragma_no_cache_counts_only_without_cache_control() {
        let pragma = || std::iter::once(&b"no-cache"[..]);
        assert!(RequestDirectives::parse(std::iter::empty(), pragma()).no_cache);
        let d = RequestDirectives::parse(std::iter::once(&b"max-age=9"[..]), pragma());
        assert!(!d.no_cache);
    }
}
