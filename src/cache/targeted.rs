//! Targeted cache-control fields (RFC 9213): `CDN-Cache-Control`, and a field
//! of the zone's own naming (`targeted_field`), carry directives meant for
//! this cache alone. The first of them (the zone's own, then
//! `CDN-Cache-Control`) that a response sends with a valid, non-empty value
//! replaces `Cache-Control` and `Expires` in every decision the cache makes
//! about it: stored or not, for how long fresh, revalidated or not. An
//! invalid one is ignored, as if absent (RFC 9213 §2.1). Read once, when a
//! response is stored.

use sfv::{BareItem, Dictionary, ListEntry, Parser};

use super::control::{ResponseDirectives, MAX_DELTA_SECONDS};

/// The targeted field every zone reads (RFC 9213 §3), lowercase.
pub const CDN_CACHE_CONTROL: &str = "cdn-cache-control";

/// The directives a response gives this cache, and whether they came from a
/// targeted field (then `Expires` is not read either).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Directed {
    /// The directives the cache acts on.
    pub directives: ResponseDirectives,
    /// They came from a targeted field, not `Cache-Control`.
    pub targeted: bool,
}

/// The directives of a response whose field lines `fields` yields (it is
/// called once per field looked for), for a zone whose own targeted field is
/// `own` (lowercase): the first valid targeted field in precedence order,
/// else `Cache-Control`.
pub fn directives_for<'a, I>(fields: impl Fn() -> I, own: Option<&str>) -> Directed
where
    I: Iterator<Item = (&'a [u8], &'a [u8])>,
{
    let named = |name: &'a str| {
        fields()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| v)
    };
    for name in own.into_iter().chain([CDN_CACHE_CONTROL]) {
        let values = fields()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| v);
        if let Some(directives) = parse_targeted(values) {
            return Directed {
                directives,
                targeted: true,
            };
        }
    }
    Directed {
        directives: ResponseDirectives::parse(named("cache-control")),
        targeted: false,
    }
}

/// A targeted field's lines (combined as one Dictionary, RFC 9651 §4.2) as
/// directives; `None` when it is absent, empty or not a valid Dictionary.
/// Directives mean what they mean in `Cache-Control` (RFC 9213 §2.2): a
/// boolean one counts unless it is `?0`; `max-age` and `s-maxage` that are
/// not non-negative Integers count as 0, as an invalid freshness is stale
/// (RFC 9111 §4.2.1); unknown ones are ignored.
pub fn parse_targeted<'a>(values: impl Iterator<Item = &'a [u8]>) -> Option<ResponseDirectives> {
    let mut joined = Vec::new();
    for v in values {
        if !joined.is_empty() {
            joined.extend_from_slice(b", ");
        }
        joined.extend_from_slice(v);
    }
    if joined.iter().all(|b| *b == b' ' || *b == b'\t') {
        return None;
    }
    let dict: Dictionary = Parser::new(&joined).parse().ok()?;
    let mut d = ResponseDirectives::default();
    for (key, entry) in &dict {
        let item = match entry {
            ListEntry::Item(item) => Some(&item.bare_item),
            ListEntry::InnerList(_) => None,
        };
        match key.as_str() {
            "no-store" => d.no_store = present(item),
            "no-cache" => d.no_cache = present(item),
            "private" => d.private = present(item),
            "public" => d.public = present(item),
            "must-revalidate" => d.must_revalidate = present(item),
            "proxy-revalidate" => d.proxy_revalidate = present(item),
            "max-age" => d.max_age = Some(seconds(item)),
            "s-maxage" => d.s_maxage = Some(seconds(item)),
            "stale-while-revalidate" => d.stale_while_revalidate = Some(seconds(item)),
            "stale-if-error" => d.stale_if_error = Some(seconds(item)),
            _ => {}
        }
    }
    Some(d)
}

/// A directive that is on or off: on unless its value is the Boolean false
/// (`no-cache="x"`, like the qualified form in `Cache-Control`, is on).
fn present(item: Option<&BareItem>) -> bool {
    item.and_then(BareItem::as_boolean) != Some(false)
}

/// A delta-seconds directive's Integer, saturating as RFC 9111 §1.2.2 says;
/// any other value is 0.
fn seconds(item: Option<&BareItem>) -> u64 {
    let Some(n) = item.and_then(BareItem::as_integer) else {
        return 0;
    };
    u64::try_from(i64::from(n)).map_or(0, |n| n.min(MAX_DELTA_SECONDS))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn targeted(v: &str) -> Option<ResponseDirectives> {
        parse_targeted(std::iter::once(v.as_bytes()))
    }

    fn directed(lines: &[(&str, &str)], own: Option<&str>) -> Directed {
        directives_for(
            || lines.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
            own,
        )
    }

    #[test]
    fn each_directive_of_a_targeted_field_is_read() {
        let d = targeted("max-age=60, s-maxage=30, must-revalidate, public").unwrap();
        assert_eq!((d.max_age, d.s_maxage), (Some(60), Some(30)));
        assert!(d.must_revalidate && d.public);
        assert!(!d.no_store && !d.no_cache && !d.private);
        assert!(targeted("no-store").unwrap().no_store);
        assert!(targeted("no-cache").unwrap().no_cache);
        assert!(targeted("private").unwrap().private);
        assert!(targeted("proxy-revalidate").unwrap().proxy_revalidate);
        assert!(targeted("private=\"set-cookie\"").unwrap().private);
        assert!(!targeted("no-store=?0").unwrap().no_store);
        assert_eq!(targeted("max-age=0").unwrap().max_age, Some(0));
        let d = targeted("stale-while-revalidate=5, stale-if-error=9").unwrap();
        assert_eq!(d.stale_while_revalidate, Some(5));
        assert_eq!(d.stale_if_error, Some(9));
        assert_eq!(targeted("x-ext=1").unwrap(), ResponseDirectives::default());
    }

    #[test]
    fn a_max_age_that_is_not_a_non_negative_integer_is_zero_and_a_huge_one_saturates() {
        assert_eq!(targeted("max-age=\"60\"").unwrap().max_age, Some(0));
        assert_eq!(targeted("max-age=-5").unwrap().max_age, Some(0));
        assert_eq!(targeted("max-age=1.5").unwrap().max_age, Some(0));
        assert_eq!(targeted("max-age").unwrap().max_age, Some(0));
        assert_eq!(
            targeted("max-age=999999999999999").unwrap().max_age,
            Some(MAX_DELTA_SECONDS)
        );
    }

    #[test]
    fn an_empty_or_invalid_targeted_field_is_as_if_absent() {
        for bad in [
            "",
            "  ",
            "MAX-AGE=60",
            "max-age=60,",
            "max-age=6 0",
            "max-age==1",
            "a b",
        ] {
            assert_eq!(targeted(bad), None, "{bad:?}");
        }
        assert_eq!(parse_targeted(std::iter::empty()), None);
        // Two lines make one Dictionary; a later member wins.
        let two = parse_targeted([&b"max-age=60"[..], b"max-age=5, no-cache"].into_iter());
        let two = two.unwrap();
        assert_eq!(two.max_age, Some(5));
        assert!(two.no_cache);
    }

    #[test]
    fn the_zones_field_beats_cdn_cache_control_which_beats_cache_control() {
        let all = [
            ("Cache-Control", "max-age=10"),
            ("CDN-Cache-Control", "max-age=20"),
            ("Pier-Cache-Control", "max-age=30"),
        ];
        let own = Some("pier-cache-control");
        let d = directed(&all, own);
        assert!(d.targeted);
        assert_eq!(d.directives.max_age, Some(30));
        let d = directed(&all, None);
        assert_eq!(d.directives.max_age, Some(20), "no field of the zone's own");
        let d = directed(&all[..2], own);
        assert_eq!(d.directives.max_age, Some(20));
        let d = directed(&all[..1], own);
        assert!(!d.targeted);
        assert_eq!(d.directives.max_age, Some(10));
    }

    #[test]
    fn an_invalid_targeted_field_falls_through_to_the_next() {
        let lines = [
            ("Cache-Control", "max-age=10"),
            ("CDN-Cache-Control", "max-age=20"),
            ("Pier-Cache-Control", "Max-Age=30"),
        ];
        let d = directed(&lines, Some("pier-cache-control"));
        assert_eq!(d.directives.max_age, Some(20));
        let lines = [("Cache-Control", "max-age=10"), ("CDN-Cache-Control", "")];
        let d = directed(&lines, None);
        assert!(!d.targeted);
        assert_eq!(d.directives.max_age, Some(10));
    }

    #[test]
    fn a_targeted_field_replaces_cache_control_whole() {
        let lines = [
            ("Cache-Control", "no-store, private"),
            ("CDN-Cache-Control", "max-age=60"),
        ];
        let d = directed(&lines, None).directives;
        assert!(!d.no_store && !d.private);
        assert_eq!(d.max_age, Some(60));
        let lines = [
            ("Cache-Control", "public, s-maxage=600, max-age=600"),
            ("CDN-Cache-Control", "no-store"),
        ];
        let d = directed(&lines, None).directives;
        assert!(d.no_store);
        assert_eq!((d.max_age, d.s_maxage), (None, None));
    }
}
