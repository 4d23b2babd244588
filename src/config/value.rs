//! Typed settings read from raw values: durations and sizes in the forms operators
//! write (`"1m30s"`, `"250ms"`, `"64k"`, `"1 MiB"`), bounded integers, and files the
//! configuration names. Each reports errors at the value's own span.

use std::ops::RangeInclusive;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::error::{ConfigError, Locator};

/// A duration written as `"10s"`, `"500ms"`, `"2m"`, `"1h"` or a number of seconds.
#[derive(Debug, Clone)]
pub enum RawDuration {
    /// Whole seconds.
    Seconds(i64),
    /// Number with a unit suffix.
    Text(String),
}

/// A size written as a number of bytes or with a unit (`"64KiB"`, `"1MiB"`, `"512B"`).
#[derive(Debug, Clone)]
pub enum RawSize {
    /// Bytes.
    Bytes(i64),
    /// Number with a unit suffix.
    Text(String),
}

/// Reads a number or a string, and says what it expected in words when the
/// value is neither (serde's untagged enums name the Rust type instead).
struct NumberOrText<T> {
    expecting: &'static str,
    number: fn(i64) -> T,
    text: fn(String) -> T,
}

impl<'de, T> serde::de::Visitor<'de> for NumberOrText<T> {
    type Value = T;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.expecting)
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<T, E> {
        Ok((self.number)(v))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<T, E> {
        i64::try_from(v)
            .map(self.number)
            .map_err(|_| E::custom(format!("{v} is too large")))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<T, E> {
        Ok((self.text)(v.to_string()))
    }
}

impl<'de> Deserialize<'de> for RawDuration {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NumberOrText {
            expecting: "a duration such as \"10s\", \"250ms\" or a number of seconds",
            number: RawDuration::Seconds,
            text: RawDuration::Text,
        })
    }
}

impl<'de> Deserialize<'de> for RawSize {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NumberOrText {
            expecting: "a size such as \"10M\", \"64KiB\" or a number of bytes",
            number: RawSize::Bytes,
            text: RawSize::Text,
        })
    }
}

/// A size setting within `range` (in bytes), or `default` when absent.
pub fn size(
    loc: &Locator<'_>,
    v: &Option<Spanned<RawSize>>,
    key: &str,
    range: RangeInclusive<u64>,
    default: u64,
) -> Result<u64, ConfigError> {
    let Some(v) = v else { return Ok(default) };
    let n = parse_size(v.get_ref()).map_err(|m| loc.error(v.span(), key, m))?;
    if !range.contains(&n) {
        return Err(loc.error(
            v.span(),
            key,
            format!(
                "{n} bytes is out of range {}..={}",
                range.start(),
                range.end()
            ),
        ));
    }
    Ok(n)
}

/// A duration setting, or `default` when absent.
pub fn duration(
    loc: &Locator<'_>,
    v: &Option<Spanned<RawDuration>>,
    key: &str,
    default: Duration,
) -> Result<Duration, ConfigError> {
    let Some(v) = v else { return Ok(default) };
    parse_duration(v.get_ref()).map_err(|m| loc.error(v.span(), key, m))
}

/// Longest duration any setting takes: about 31 years, far past every sensible
/// timeout, and small enough that adding it to an instant cannot overflow.
const MAX_DURATION: Duration = Duration::from_secs(1_000_000_000);

/// Parses a number of seconds, or text as humantime reads it: `"10s"`, `"250ms"`,
/// `"1m30s"`, `"1h 5m"`, `"1.5s"`; bare digits in a string are seconds too.
pub fn parse_duration(v: &RawDuration) -> Result<Duration, String> {
    let d = match v {
        RawDuration::Seconds(s) if *s >= 0 => Duration::from_secs(*s as u64),
        RawDuration::Seconds(s) => return Err(format!("duration must not be negative, got {s}")),
        RawDuration::Text(t) => {
            let t = t.trim();
            if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
                let s: u64 = t
                    .parse()
                    .map_err(|_| format!("duration {t:?} out of range"))?;
                Duration::from_secs(s)
            } else {
                humantime::parse_duration(t).map_err(|e| {
                    format!(
                        "invalid duration {t:?} ({e}); write e.g. \"10s\", \"250ms\", \"1m30s\""
                    )
                })?
            }
        }
    };
    if d > MAX_DURATION {
        return Err(format!("duration {} out of range", show_duration(v)));
    }
    Ok(d)
}

fn show_duration(v: &RawDuration) -> String {
    match v {
        RawDuration::Seconds(s) => format!("{s}"),
        RawDuration::Text(t) => format!("{t:?}"),
    }
}

/// Parses a number of bytes or text with a unit, as nginx and HAProxy read sizes
/// (binary multiples: `"64k"` and `"64KB"` are 65536 bytes, as is `"64KiB"`;
/// `"1 MiB"`, `"1M"`, `"512B"`, `"1.5k"` work too).
pub fn parse_size(v: &RawSize) -> Result<u64, String> {
    match v {
        RawSize::Bytes(n) if *n >= 0 => Ok(*n as u64),
        RawSize::Bytes(n) => Err(format!("size must not be negative, got {n}")),
        RawSize::Text(t) => parse_size::Config::new()
            .with_binary()
            .parse_size(t.trim())
            .map_err(|e| {
                format!("invalid size {t:?} ({e}); write e.g. \"64KiB\", \"1 MiB\" or 65536")
            }),
    }
}

/// An integer setting within `range`, or `default` when absent.
pub fn int(
    loc: &Locator<'_>,
    v: &Option<Spanned<i64>>,
    key: &str,
    range: RangeInclusive<i64>,
    default: i64,
) -> Result<i64, ConfigError> {
    match v {
        Some(v) => in_range(loc, v, key, range),
        None => Ok(default),
    }
}

/// An integer that was written, checked against `range`.
pub fn in_range(
    loc: &Locator<'_>,
    v: &Spanned<i64>,
    key: &str,
    range: RangeInclusive<i64>,
) -> Result<i64, ConfigError> {
    let n = *v.get_ref();
    if !range.contains(&n) {
        return Err(loc.error(
            v.span(),
            key,
            format!("{n} is out of range {}..={}", range.start(), range.end()),
        ));
    }
    Ok(n)
}

/// Letters, digits, `-`, `.` and `_`, and not empty: the host names a route's
/// `host` and a certificate's `names` take (one rule, so a name a route
/// matches is a name a certificate can be chosen for).
pub fn is_host_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
}

/// The error for a text setting that is none of `choices`: names the value and
/// every choice (`unknown balance "x"; expected "a", "b" or "c"`). `what` is the
/// setting as the message calls it.
pub fn unknown_choice(
    loc: &Locator<'_>,
    v: &Option<Spanned<String>>,
    key: &str,
    what: &str,
    choices: &[&str],
) -> ConfigError {
    let (span, text) = v
        .as_ref()
        .map_or((0..0, ""), |v| (v.span(), v.get_ref().as_str()));
    let expected = one_of(choices.iter().copied());
    loc.error(
        span,
        key,
        format!("unknown {what} {text:?}; expected {expected}"),
    )
}

/// The choices an error offers, quoted: `"a", "b" or "c"`.
pub fn one_of<'a>(choices: impl IntoIterator<Item = &'a str>) -> String {
    let quoted: Vec<String> = choices.into_iter().map(|c| format!("{c:?}")).collect();
    match quoted.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// Largest certificate chain, key or CA bundle a configuration may name (the
/// system CA bundle is about 200 KiB).
pub const MAX_PEM_FILE: u64 = 8 << 20;

/// Reads a file the configuration names (certificate, key, CA bundle, OCSP
/// response, ticket key) whole. It must be a regular file of at most `limit`
/// bytes, so a path such as `/dev/zero`, `/dev/stdin` or a FIFO is an error
/// rather than an endless read or a hang.
pub fn read_named_file(path: &str, limit: u64) -> std::io::Result<Vec<u8>> {
    use std::io::{Error, ErrorKind, Read};
    if !std::fs::metadata(path)?.is_file() {
        return Err(Error::new(ErrorKind::InvalidInput, "not a regular file"));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(limit + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(Error::new(
            ErrorKind::InvalidData,
            format!("larger than {limit} bytes"),
        ));
    }
    Ok(bytes)
}

/// A field of a limits table (`[http2]`, `[http3]`): `$table.$field` of raw
/// `$raw` within `$range`, or the field's value in the defaults `$d`; the
/// key is the field's own name, and the range keeps the value within the
/// field's type.
macro_rules! int_field {
    ($loc:expr, $table:literal, $raw:expr, $d:expr, $field:ident, $range:expr) => {
        $crate::config::value::int(
            $loc,
            &$raw.$field,
            concat!($table, ".", stringify!($field)),
            $range,
            $d.$field as i64,
        )? as _
    };
}
pub(super) use int_field;

/// The same for a size: bytes, or a number with a unit ("1M", "64KiB").
macro_rules! size_field {
    ($loc:expr, $table:literal, $raw:expr, $d:expr, $field:ident, $range:expr) => {
        $crate::config::value::size(
            $loc,
            &$raw.$field,
            concat!($table, ".", stringify!($field)),
            $range,
            $d.$field as u64,
        )? as _
    };
}
pub(super) use size_field;

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> RawDuration {
        RawDuration::Text(s.to_string())
    }

    fn size(s: &str) -> Result<u64, String> {
        parse_size(&RawSize::Text(s.to_string()))
    }

    #[test]
    fn durations_in_the_forms_operators_write() {
        let secs = Duration::from_secs;
        assert_eq!(parse_duration(&text("1m30s")), Ok(secs(90)));
        assert_eq!(parse_duration(&text("1m 30s")), Ok(secs(90)));
        assert_eq!(
            parse_duration(&text("250ms")),
            Ok(Duration::from_millis(250))
        );
        assert_eq!(
            parse_duration(&text("1.5s")),
            Ok(Duration::from_millis(1500))
        );
        assert_eq!(parse_duration(&text("2h")), Ok(secs(7200)));
        assert_eq!(parse_duration(&text("10")), Ok(secs(10)));
        assert_eq!(parse_duration(&RawDuration::Seconds(5)), Ok(secs(5)));
        assert_eq!(parse_duration(&text("0s")), Ok(Duration::ZERO));
    }

    #[test]
    fn bad_durations_say_what_to_write() {
        let e = parse_duration(&text("5 fortnights")).unwrap_err();
        assert!(e.contains("\"5 fortnights\"") && e.contains("1m30s"), "{e}");
        assert!(parse_duration(&text("")).is_err());
        assert!(parse_duration(&text("-3s")).is_err());
        assert!(parse_duration(&RawDuration::Seconds(-1)).is_err());
        assert!(parse_duration(&text("99999999999999999999s")).is_err());
        let e = parse_duration(&text("100y")).unwrap_err();
        assert!(e.contains("out of range"), "{e}");
    }

    #[test]
    fn sizes_in_the_usual_forms() {
        assert_eq!(size("64k"), Ok(64 * 1024));
        assert_eq!(size("64K"), Ok(64 * 1024));
        assert_eq!(size("64KiB"), Ok(64 * 1024));
        assert_eq!(size("512KB"), Ok(512 * 1024));
        assert_eq!(size("1 MiB"), Ok(1 << 20));
        assert_eq!(size("1M"), Ok(1 << 20));
        assert_eq!(size("1.5k"), Ok(1536));
        assert_eq!(size("512B"), Ok(512));
        assert_eq!(size("65536"), Ok(65536));
        assert_eq!(parse_size(&RawSize::Bytes(7)), Ok(7));
    }

    #[test]
    fn size_settings_take_units() {
        let cfg = crate::config::check_text(
            "[http]\nmax_body_bytes = \"10M\"\nmax_head_bytes = \"16KiB\"\n\
             [http2]\nmax_send_buffer = \"1MiB\"\n\
             [[listener]]\nlisten = \"127.0.0.1:1\"\n[[route]]\nhandler = \"respond\"\n",
        )
        .unwrap();
        assert_eq!(cfg.http.max_body_bytes, 10 << 20);
        assert_eq!(cfg.http.limits.max_head_bytes, 16 << 10);
        assert_eq!(cfg.http2.max_send_buffer, 1 << 20);
        let e = crate::config::check_text(
            "[http]\nmax_head_bytes = \"1G\"\n[[listener]]\nlisten = \"127.0.0.1:1\"\n",
        )
        .unwrap_err();
        e.assert_at(2, "http.max_head_bytes");
        assert!(e.message.contains("out of range"), "{e}");
    }

    #[test]
    fn bad_sizes_say_what_to_write() {
        let e = size("64 parsecs").unwrap_err();
        assert!(e.contains("\"64 parsecs\"") && e.contains("1 MiB"), "{e}");
        assert!(size("").is_err());
        assert!(size("-1k").is_err());
        assert!(parse_size(&RawSize::Bytes(-1)).is_err());
        assert!(size("99999999999 EiB").is_err());
    }
}
