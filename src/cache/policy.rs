//! RFC 9111 decisions as pure functions over what a response and its request
//! say: may it be stored (§3), for how long is it fresh (§4.2.1, with the
//! §4.2.2 heuristic from `Last-Modified` only), how old was it when it came
//! (§4.2.3), and may a stored one answer a request now (§4.2, §5.2.1).

use std::time::{Duration, SystemTime};

use super::control::{RequestDirectives, ResponseDirectives};

/// Statuses a cache may store without explicit freshness (RFC 9110 §15.1),
/// less 206, which this cache does not store (it stores whole bodies and
/// answers ranges from them).
pub const HEURISTICALLY_CACHEABLE: &[u16] =
    &[200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501];

/// The heuristic: a tenth of the time since `Last-Modified` (§4.2.2), at most
/// a day, as Squid and Varnish bound it.
const HEURISTIC_MAX: Duration = Duration::from_secs(24 * 3600);

/// What a response says about itself, read once from its head.
#[derive(Debug, Clone, Default)]
pub struct ResponseFacts {
    /// Final status.
    pub status: u16,
    /// Its `Cache-Control`.
    pub directives: ResponseDirectives,
    /// `Expires`; `Some(None)` when present but not a date (already expired).
    pub expires: Option<Option<SystemTime>>,
    /// `Date`.
    pub date: Option<SystemTime>,
    /// `Last-Modified`.
    pub last_modified: Option<SystemTime>,
    /// `Age`, seconds.
    pub age: Option<u64>,
    /// `Vary: *` (never matches a later request).
    pub vary_any: bool,
    /// `Set-Cookie` present: another client's cookie must not be handed out.
    pub sets_cookie: bool,
    /// `ETag` present: a stored copy can be revalidated.
    pub etag: bool,
}

/// What the request that brought the response says.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestFacts {
    /// GET (HEAD answers are not stored: they have no body).
    pub get: bool,
    /// `Authorization` present.
    pub authorization: bool,
    /// Its `Cache-Control`.
    pub directives: RequestDirectives,
}

/// Why a response is not stored, for logs and hit-for-miss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotStored {
    /// Not a GET.
    Method,
    /// A status neither cacheable by default nor made so explicitly.
    Status,
    /// `no-store` on the request or the response.
    NoStore,
    /// `private`.
    Private,
    /// An `Authorization` request without `public`, `s-maxage` or `must-revalidate`.
    Authorization,
    /// `Vary: *`.
    VaryAny,
    /// `Set-Cookie`.
    Cookie,
    /// Nothing makes it fresh and nothing could revalidate it.
    NoFreshness,
}

/// RFC 9111 §3: whether a shared cache may store this response.
pub fn storable(req: &RequestFacts, resp: &ResponseFacts) -> Result<(), NotStored> {
    let d = &resp.directives;
    if !req.get {
        return Err(NotStored::Method);
    }
    if resp.status < 200 || resp.status == 206 || resp.status == 304 {
        return Err(NotStored::Status);
    }
    if d.no_store || req.directives.no_store {
        return Err(NotStored::NoStore);
    }
    if d.private {
        return Err(NotStored::Private);
    }
    // §3.5: a shared cache stores an authenticated answer only when told so.
    if req.authorization && !(d.public || d.s_maxage.is_some() || d.must_revalidate) {
        return Err(NotStored::Authorization);
    }
    if resp.vary_any {
        return Err(NotStored::VaryAny);
    }
    if resp.sets_cookie {
        return Err(NotStored::Cookie);
    }
    let explicit =
        d.public || d.max_age.is_some() || d.s_maxage.is_some() || resp.expires.is_some();
    if !explicit && !HEURISTICALLY_CACHEABLE.contains(&resp.status) {
        return Err(NotStored::Status);
    }
    if freshness_lifetime(resp).is_zero() && resp.last_modified.is_none() && !resp.etag {
        return Err(NotStored::NoFreshness);
    }
    Ok(())
}

/// RFC 9111 §4.2.1: `s-maxage`, else `max-age`, else `Expires - Date`, else
/// the heuristic from `Last-Modified` for a status cacheable by default.
pub fn freshness_lifetime(resp: &ResponseFacts) -> Duration {
    let d = &resp.directives;
    if let Some(s) = d.s_maxage.or(d.max_age) {
        return Duration::from_secs(s);
    }
    if let Some(expires) = resp.expires {
        let Some(expires) = expires else {
            return Duration::ZERO;
        };
        let date = resp.date.unwrap_or_else(SystemTime::now);
        return expires.duration_since(date).unwrap_or(Duration::ZERO);
    }
    let heuristic_allowed = HEURISTICALLY_CACHEABLE.contains(&resp.status) || d.public;
    match resp.last_modified {
        Some(lm) if heuristic_allowed => {
            let date = resp.date.unwrap_or_else(SystemTime::now);
            (date.duration_since(lm).unwrap_or(Duration::ZERO) / 10).min(HEURISTIC_MAX)
        }
        _ => Duration::ZERO,
    }
}

/// RFC 9111 §4.2.3: the age a response had when it arrived (its
/// `corrected_initial_age`), from when the request went out and when the
/// response came.
pub fn initial_age(
    resp: &ResponseFacts,
    request_time: SystemTime,
    response_time: SystemTime,
) -> Duration {
    let apparent = resp
        .date
        .and_then(|d| response_time.duration_since(d).ok())
        .unwrap_or(Duration::ZERO);
    let delay = response_time
        .duration_since(request_time)
        .unwrap_or(Duration::ZERO);
    let corrected = Duration::from_secs(resp.age.unwrap_or(0)).saturating_add(delay);
    apparent.max(corrected)
}

/// How a stored response may be used for a request, from its age now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usable {
    /// Fresh enough for this request: served as it is.
    Fresh,
    /// Stale but within `stale-while-revalidate`: served, and refreshed behind.
    StaleWhileRevalidate,
    /// Stale, and the request's `max-stale` accepts it.
    StaleAccepted,
    /// Must be revalidated (or fetched) before it is used.
    Revalidate,
}

/// RFC 9111 §4.2 and §5.2.1: whether a response with `lifetime` and `age`
/// satisfies a request with `req` directives, given the response's own.
pub fn usable(
    lifetime: Duration,
    age: Duration,
    resp: &ResponseDirectives,
    req: &RequestDirectives,
) -> Usable {
    if req.no_cache || resp.no_cache {
        return Usable::Revalidate;
    }
    if req.max_age.is_some_and(|m| age > Duration::from_secs(m)) {
        return Usable::Revalidate;
    }
    let remaining = lifetime.saturating_sub(age);
    let fresh = lifetime > age;
    if fresh {
        let needed = Duration::from_secs(req.min_fresh.unwrap_or(0));
        if remaining >= needed {
            return Usable::Fresh;
        }
        return Usable::Revalidate;
    }
    if resp.no_stale() {
        return Usable::Revalidate;
    }
    let staleness = age - lifetime;
    if req
        .max_stale
        .is_some_and(|m| staleness <= Duration::from_secs(m))
    {
        return Usable::StaleAccepted;
    }
    if resp
        .stale_while_revalidate
        .is_some_and(|s| staleness <= Duration::from_secs(s))
    {
        return Usable::StaleWhileRevalidate;
    }
    Usable::Revalidate
}

/// RFC 5861 §4: whether a stale response may answer when the origin fails
/// (an error, or a 5xx), allowing `stale_if_error` seconds past freshness,
/// or the zone's own allowance when the response names none.
pub fn usable_on_error(
    lifetime: Duration,
    age: Duration,
    resp: &ResponseDirectives,
    zone_allowance: Duration,
) -> bool {
    if resp.no_stale() {
        return false;
    }
    let staleness = age.saturating_sub(lifetime);
    let allowed = resp
        .stale_if_error
        .map_or(zone_allowance, Duration::from_secs);
    staleness <= allowed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cc(v: &str) -> ResponseDirectives {
        ResponseDirectives::parse(std::iter::once(v.as_bytes()))
    }

    fn get() -> RequestFacts {
        RequestFacts {
            get: true,
            ..RequestFacts::default()
        }
    }

    fn ok_with(v: &str) -> ResponseFacts {
        ResponseFacts {
            status: 200,
            directives: cc(v),
            ..ResponseFacts::default()
        }
    }

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + secs)
    }

    #[test]
    fn only_get_responses_are_stored() {
        let resp = ok_with("max-age=60");
        assert_eq!(storable(&get(), &resp), Ok(()));
        assert_eq!(
            storable(&RequestFacts::default(), &resp),
            Err(NotStored::Method)
        );
    }

    #[test]
    fn statuses_cacheable_by_default_need_no_explicit_freshness_but_others_do() {
        let mut resp = ok_with("");
        resp.last_modified = Some(at(0));
        resp.date = Some(at(1000));
        resp.status = 404;
        assert_eq!(storable(&get(), &resp), Ok(()));
        resp.status = 302;
        assert_eq!(storable(&get(), &resp), Err(NotStored::Status));
        resp.directives = cc("max-age=10");
        assert_eq!(storable(&get(), &resp), Ok(()));
        resp.status = 206;
        assert_eq!(storable(&get(), &resp), Err(NotStored::Status));
    }

    #[test]
    fn no_store_on_response_or_request_prevents_storing() {
        assert_eq!(
            storable(&get(), &ok_with("no-store, max-age=60")),
            Err(NotStored::NoStore)
        );
        let mut req = get();
        req.directives.no_store = true;
        assert_eq!(
            storable(&req, &ok_with("max-age=60")),
            Err(NotStored::NoStore)
        );
    }

    #[test]
    fn private_is_not_stored_by_a_shared_cache() {
        assert_eq!(
            storable(&get(), &ok_with("private, max-age=60")),
            Err(NotStored::Private)
        );
    }

    #[test]
    fn authorization_needs_public_s_maxage_or_must_revalidate() {
        let req = RequestFacts {
            authorization: true,
            ..get()
        };
        assert_eq!(
            storable(&req, &ok_with("max-age=60")),
            Err(NotStored::Authorization)
        );
        for v in [
            "public, max-age=60",
            "s-maxage=60",
            "max-age=60, must-revalidate",
        ] {
            assert_eq!(storable(&req, &ok_with(v)), Ok(()), "{v}");
        }
    }

    #[test]
    fn vary_star_and_set_cookie_are_not_stored() {
        let mut resp = ok_with("max-age=60");
        resp.vary_any = true;
        assert_eq!(storable(&get(), &resp), Err(NotStored::VaryAny));
        resp.vary_any = false;
        resp.sets_cookie = true;
        assert_eq!(storable(&get(), &resp), Err(NotStored::Cookie));
    }

    #[test]
    fn a_response_with_nothing_to_make_it_fresh_is_not_stored() {
        assert_eq!(storable(&get(), &ok_with("")), Err(NotStored::NoFreshness));
        // no-cache with a validator: stored, for revalidation.
        let mut resp = ok_with("no-cache");
        assert_eq!(storable(&get(), &resp), Err(NotStored::NoFreshness));
        resp.etag = true;
        assert_eq!(storable(&get(), &resp), Ok(()));
    }

    #[test]
    fn s_maxage_beats_max_age_beats_expires() {
        let mut resp = ok_with("max-age=60, s-maxage=5");
        resp.date = Some(at(0));
        resp.expires = Some(Some(at(1000)));
        assert_eq!(freshness_lifetime(&resp), Duration::from_secs(5));
        resp.directives = cc("max-age=60");
        assert_eq!(freshness_lifetime(&resp), Duration::from_secs(60));
        resp.directives = cc("");
        assert_eq!(freshness_lifetime(&resp), Duration::from_secs(1000));
    }

    #[test]
    fn an_invalid_expires_means_already_expired() {
        let mut resp = ok_with("");
        resp.expires = Some(None);
        assert_eq!(freshness_lifetime(&resp), Duration::ZERO);
        assert_eq!(storable(&get(), &resp), Err(NotStored::NoFreshness));
    }

    #[test]
    fn heuristic_freshness_is_a_tenth_of_the_last_modified_age_and_only_from_it() {
        let mut resp = ok_with("");
        resp.date = Some(at(10_000));
        resp.last_modified = Some(at(0));
        assert_eq!(freshness_lifetime(&resp), Duration::from_secs(1000));
        resp.last_modified = None;
        assert_eq!(freshness_lifetime(&resp), Duration::ZERO);
        // Not for a status that is not cacheable by default.
        resp.last_modified = Some(at(0));
        resp.status = 302;
        assert_eq!(freshness_lifetime(&resp), Duration::ZERO);
        // Bounded to a day.
        resp.status = 200;
        resp.date = Some(at(100 * 24 * 3600));
        assert_eq!(freshness_lifetime(&resp), HEURISTIC_MAX);
    }

    #[test]
    fn initial_age_takes_the_larger_of_apparent_and_corrected_age() {
        let mut resp = ok_with("");
        resp.date = Some(at(100));
        // Apparent age 20 s (the clock says so); Age says 5 + 1 s delay.
        resp.age = Some(5);
        assert_eq!(
            initial_age(&resp, at(119), at(120)),
            Duration::from_secs(20)
        );
        // Age 50 + 1 s delay beats the apparent 20.
        resp.age = Some(50);
        assert_eq!(
            initial_age(&resp, at(119), at(120)),
            Duration::from_secs(51)
        );
        // A Date in the future counts as no apparent age.
        resp.date = Some(at(500));
        resp.age = None;
        assert_eq!(initial_age(&resp, at(120), at(120)), Duration::ZERO);
        // A saturated Age stays stale for any lifetime a response can have.
        resp.age = Some(crate::cache::control::MAX_DELTA_SECONDS);
        let aged = initial_age(&resp, at(119), at(120));
        assert_eq!(aged, Duration::from_secs((1 << 31) + 1));
        let lifetime = Duration::from_secs(3600);
        assert_eq!(
            usable(lifetime, aged, &cc("max-age=3600"), &req("")),
            Usable::Revalidate
        );
    }

    fn req(v: &str) -> RequestDirectives {
        RequestDirectives::parse(std::iter::once(v.as_bytes()), std::iter::empty())
    }

    /// [`usable`] for a response with `lifetime` and `age` in seconds and
    /// the `Cache-Control` values of the response and the request.
    fn usable_for(lifetime: u64, age: u64, response: &str, request: &str) -> Usable {
        let s = Duration::from_secs;
        usable(s(lifetime), s(age), &cc(response), &req(request))
    }

    /// [`usable_on_error`], every duration in seconds.
    fn usable_on_error_for(lifetime: u64, age: u64, response: &str, zone: u64) -> bool {
        let s = Duration::from_secs;
        usable_on_error(s(lifetime), s(age), &cc(response), s(zone))
    }

    #[test]
    fn fresh_while_age_is_below_the_lifetime() {
        assert_eq!(usable_for(60, 59, "", ""), Usable::Fresh);
        assert_eq!(usable_for(60, 60, "", ""), Usable::Revalidate);
    }

    #[test]
    fn response_no_cache_always_revalidates() {
        assert_eq!(usable_for(60, 0, "no-cache", ""), Usable::Revalidate);
    }

    #[test]
    fn request_no_cache_max_age_and_min_fresh_are_honoured() {
        assert_eq!(usable_for(60, 1, "", "no-cache"), Usable::Revalidate);
        assert_eq!(usable_for(60, 10, "", "max-age=5"), Usable::Revalidate);
        assert_eq!(usable_for(60, 4, "", "max-age=5"), Usable::Fresh);
        assert_eq!(usable_for(60, 50, "", "min-fresh=20"), Usable::Revalidate);
        assert_eq!(usable_for(60, 30, "", "min-fresh=20"), Usable::Fresh);
    }

    #[test]
    fn max_stale_accepts_stale_unless_the_response_forbids_it() {
        assert_eq!(
            usable_for(60, 70, "", "max-stale=20"),
            Usable::StaleAccepted
        );
        assert_eq!(usable_for(60, 90, "", "max-stale=20"), Usable::Revalidate);
        assert_eq!(usable_for(60, 9999, "", "max-stale"), Usable::StaleAccepted);
        for v in ["must-revalidate", "proxy-revalidate", "s-maxage=60"] {
            assert_eq!(
                usable_for(60, 70, v, "max-stale"),
                Usable::Revalidate,
                "{v}"
            );
        }
    }

    #[test]
    fn stale_while_revalidate_serves_within_its_window() {
        let d = "max-age=60, stale-while-revalidate=30";
        assert_eq!(usable_for(60, 80, d, ""), Usable::StaleWhileRevalidate);
        assert_eq!(usable_for(60, 91, d, ""), Usable::Revalidate);
    }

    #[test]
    fn stale_if_error_allows_its_window_or_the_zone_default() {
        assert!(usable_on_error_for(60, 100, "stale-if-error=50", 0));
        assert!(!usable_on_error_for(60, 200, "stale-if-error=50", 0));
        assert!(usable_on_error_for(60, 200, "", 3600));
        assert!(!usable_on_error_for(60, 61, "must-revalidate", 3600));
    }
}
