//! `[cache.NAME]` tables: read as written ([`RawCache`]), then built into
//! zones that proxy routes name with `cache = "NAME"`. Errors name the file,
//! the line and the key.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};

use serde::Deserialize;
use toml::Spanned;

use super::disk::DiskSettings;
use super::key::KeySpec;
use super::zone::{CacheZone, ZoneSettings};
use crate::config::error::{ConfigError, Locator};
use crate::config::value::{duration, parse_size, RawDuration, RawSize};

/// One `[cache.NAME]` table.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCache {
    /// Memory for stored responses (`"256MiB"`).
    pub memory: Option<Spanned<RawSize>>,
    /// Largest response stored (`"8MiB"`).
    pub max_object: Option<Spanned<RawSize>>,
    /// How long a request waits for another's fetch of the same key.
    pub lock_timeout: Option<Spanned<RawDuration>>,
    /// How long a key found uncacheable skips collapsing.
    pub hit_for_miss: Option<Spanned<RawDuration>>,
    /// How long past freshness a response may be served when the origin fails.
    pub stale_if_error: Option<Spanned<RawDuration>>,
    /// The parts of the cache key.
    pub key: Option<Spanned<Vec<String>>>,
    /// The disk tier's directory.
    pub disk_path: Option<Spanned<String>>,
    /// The disk tier's byte budget (`"10GiB"`).
    pub disk_size: Option<Spanned<RawSize>>,
    /// Largest response written to disk (`"64MiB"`); default `max_object`.
    pub disk_max_object: Option<Spanned<RawSize>>,
    /// The zone's own targeted cache-control field (`"Pier-Cache-Control"`).
    pub targeted_field: Option<Spanned<String>>,
}

/// Every `[cache.NAME]` table, by name.
pub type RawCaches = BTreeMap<String, Spanned<RawCache>>;

/// Builds the zones of `raw`, in name order.
pub fn build_zones(
    loc: &Locator<'_>,
    raw: Option<&Spanned<RawCaches>>,
) -> Result<Vec<Arc<CacheZone>>, ConfigError> {
    let mut zones = Vec::new();
    let mut dirs = std::collections::HashSet::new();
    for (name, table) in raw.map(|r| r.get_ref().iter()).into_iter().flatten() {
        let c = table.get_ref();
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(loc.error(
                table.span(),
                &format!("cache.{name}"),
                "a cache name is letters, digits, '-' and '_'",
            ));
        }
        let d = ZoneSettings::default();
        let size = |v: &Option<Spanned<RawSize>>, key: &str, default: usize, min: u64| {
            let Some(v) = v else { return Ok(default) };
            let at = format!("cache.{name}.{key}");
            let n = parse_size(v.get_ref()).map_err(|m| loc.error(v.span(), &at, m))?;
            if n < min || n > (1 << 40) {
                return Err(loc.error(
                    v.span(),
                    &at,
                    format!("{n} bytes is out of range {min}..=1TiB"),
                ));
            }
            Ok(n as usize)
        };
        let memory = size(&c.memory, "memory", d.memory, 64 * 1024)?;
        let max_object = size(&c.max_object, "max_object", d.max_object.min(memory / 2), 1)?;
        if max_object > memory {
            let span = c.max_object.as_ref().map_or(table.span(), |m| m.span());
            return Err(loc.error(
                span,
                &format!("cache.{name}.max_object"),
                "max_object must not be larger than memory",
            ));
        }
        let disk_max_object = size(&c.disk_max_object, "disk_max_object", max_object, 1)?;
        if let Some(v) = &c.disk_max_object {
            let at = format!("cache.{name}.disk_max_object");
            if c.disk_path.is_none() {
                return Err(loc.error(v.span(), &at, "disk_max_object needs a disk_path"));
            }
            // A response is held in memory while it arrives, then written.
            if disk_max_object > memory {
                return Err(loc.error(
                    v.span(),
                    &at,
                    "disk_max_object must not be larger than memory (a response is held there while it arrives)",
                ));
            }
        }
        let key = match &c.key {
            None => KeySpec::default(),
            Some(k) => KeySpec::parse(k.get_ref())
                .map_err(|m| loc.error(k.span(), &format!("cache.{name}.key"), m))?,
        };
        let at = |k: &str| format!("cache.{name}.{k}");
        let settings = ZoneSettings {
            memory,
            max_object,
            disk_max_object,
            lock_timeout: duration(loc, &c.lock_timeout, &at("lock_timeout"), d.lock_timeout)?,
            hit_for_miss: duration(loc, &c.hit_for_miss, &at("hit_for_miss"), d.hit_for_miss)?,
            stale_if_error: duration(
                loc,
                &c.stale_if_error,
                &at("stale_if_error"),
                d.stale_if_error,
            )?,
            key,
            disk: disk_settings(loc, name, c)?,
            targeted_field: targeted_field(loc, name, c)?,
        };
        if let (Some(d), Some(p)) = (&settings.disk, &c.disk_path) {
            // Two zones in one directory would evict each other's files.
            if !dirs.insert(d.path.clone()) {
                return Err(loc.error(
                    p.span(),
                    &format!("cache.{name}.disk_path"),
                    format!("{} is the disk_path of another cache too", d.path.display()),
                ));
            }
        }
        zones.push(reuse_or_new(name, settings));
    }
    Ok(zones)
}

/// `targeted_field`: a field name (a token) that is not one the cache
/// already reads, lowercased.
fn targeted_field(
    loc: &Locator<'_>,
    name: &str,
    c: &RawCache,
) -> Result<Option<Box<str>>, ConfigError> {
    let Some(field) = &c.targeted_field else {
        return Ok(None);
    };
    let at = format!("cache.{name}.targeted_field");
    let v = field.get_ref();
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if v.is_empty() || !v.bytes().all(token) {
        return Err(loc.error(
            field.span(),
            &at,
            "a field name is a token, e.g. \"Pier-Cache-Control\"",
        ));
    }
    let lower = v.to_ascii_lowercase();
    if ["cache-control", "cdn-cache-control", "expires"].contains(&lower.as_str()) {
        return Err(loc.error(
            field.span(),
            &at,
            format!("{v} is read already; name a field of this cache's own, e.g. \"Pier-Cache-Control\""),
        ));
    }
    Ok(Some(lower.into_boxed_str()))
}

/// Smallest disk budget: room for a few objects.
const MIN_DISK: u64 = 1 << 20;

/// `disk_path` and `disk_size` of a `[cache.NAME]` table.
fn disk_settings(
    loc: &Locator<'_>,
    name: &str,
    c: &RawCache,
) -> Result<Option<DiskSettings>, ConfigError> {
    let Some(path) = &c.disk_path else {
        if let Some(size) = &c.disk_size {
            return Err(loc.error(
                size.span(),
                &format!("cache.{name}.disk_size"),
                "disk_size needs a disk_path",
            ));
        }
        return Ok(None);
    };
    let at = format!("cache.{name}.disk_path");
    if path.get_ref().trim().is_empty() {
        return Err(loc.error(path.span(), &at, "disk_path must name a directory"));
    }
    let mut dir = std::path::PathBuf::from(path.get_ref());
    if dir.is_relative() {
        let cwd = std::env::current_dir().map_err(|e| {
            loc.error(
                path.span(),
                &at,
                format!("cannot resolve a relative path: {e}"),
            )
        })?;
        dir = cwd.join(dir);
    }
    let size = match &c.disk_size {
        None => DEFAULT_DISK,
        Some(v) => {
            let at = format!("cache.{name}.disk_size");
            let n = parse_size(v.get_ref()).map_err(|m| loc.error(v.span(), &at, m))?;
            if !(MIN_DISK..=(1 << 50)).contains(&n) {
                return Err(loc.error(
                    v.span(),
                    &at,
                    format!("{n} bytes is out of range 1MiB..=1PiB"),
                ));
            }
            n
        }
    };
    Ok(Some(DiskSettings { path: dir, size }))
}

/// Disk budget of a zone that names a directory without `disk_size`.
const DEFAULT_DISK: u64 = 1 << 30;

/// Zones of the configurations alive in this process, so a reload that keeps
/// a zone's name and settings keeps what it stored.
static LIVE_ZONES: Mutex<Vec<Weak<CacheZone>>> = Mutex::new(Vec::new());

fn reuse_or_new(name: &str, settings: ZoneSettings) -> Arc<CacheZone> {
    let mut live = LIVE_ZONES.lock().unwrap_or_else(|e| e.into_inner());
    live.retain(|w| w.strong_count() > 0);
    let same = live
        .iter()
        .filter_map(Weak::upgrade)
        .find(|z| z.name == name && z.settings == settings);
    if let Some(z) = same {
        return z;
    }
    let zone = Arc::new(CacheZone::new(name, settings));
    live.push(Arc::downgrade(&zone));
    zone
}

/// The zone a proxy route's `cache` key names.
pub fn zone_named(
    loc: &Locator<'_>,
    route_key: &str,
    name: &Spanned<String>,
    zones: &[Arc<CacheZone>],
) -> Result<Arc<CacheZone>, ConfigError> {
    zones
        .iter()
        .find(|z| z.name == *name.get_ref())
        .cloned()
        .ok_or_else(|| {
            loc.error(
                name.span(),
                &format!("{route_key}.cache"),
                format!("no [cache.{}] table defines this cache", name.get_ref()),
            )
        })
}
