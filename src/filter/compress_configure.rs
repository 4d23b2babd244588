//! Second configuration stage of a route's `compress` key: `true`, `false`,
//! or a table (`codings`, `types`, `min_length`, `levels`), checked and built
//! into [`CompressSettings`], each error naming the file, the line and the key.

use serde::Deserialize;

use super::compress_rules::CompressSettings;
use crate::config::error::{ConfigError, Locator};
use crate::config::raw::{RawCompressSettings, RawRouteFilters};
use crate::config::value::parse_size;
use crate::http::content_coding::Coding;

/// The route's compression settings; `None` when it does not compress. `key`
/// names the route (`route[2]`).
pub fn compress_settings(
    loc: &Locator<'_>,
    key: &str,
    raw: &RawRouteFilters,
) -> Result<Option<CompressSettings>, ConfigError> {
    let Some(value) = &raw.compress else {
        return Ok(None);
    };
    let key = format!("{key}.compress");
    let err = |m: String| loc.error(value.span(), &key, m);
    let table = match value.get_ref() {
        toml::Value::Boolean(on) => return Ok(on.then(CompressSettings::default)),
        toml::Value::Table(_) => RawCompressSettings::deserialize(value.get_ref().clone())
            .map_err(|e| err(crate::config::error::in_words(e.message())))?,
        _ => {
            return Err(err(
                "write `compress = true`, or a table such as { types = [\"text/*\"], \
                 min_length = 1024, levels = { gzip = 5 } }"
                    .into(),
            ))
        }
    };
    if table.enabled == Some(false) {
        return Ok(None);
    }
    let mut settings = CompressSettings::default();
    if let Some(names) = &table.codings {
        let mut codings = Vec::new();
        for name in names {
            let Some(c) = Coding::from_name(name) else {
                return Err(err(format!(
                    "{name:?} is not a coding Pier produces; use \"zstd\", \"br\" or \"gzip\""
                )));
            };
            if codings.contains(&c) {
                return Err(err(format!("{name:?} is listed twice in codings")));
            }
            codings.push(c);
        }
        if codings.is_empty() {
            return Err(err(
                "codings is empty: list at least one, or write `compress = false`".into(),
            ));
        }
        settings.codings = codings.into();
    }
    if let Some(types) = &table.types {
        let mut patterns = Vec::new();
        for t in types {
            let t = t.trim().to_ascii_lowercase();
            let well_formed = t.split_once('/').is_some_and(|(a, b)| {
                !a.is_empty()
                    && !b.is_empty()
                    && !b.contains('/')
                    && t.matches('*').count() <= 1
                    && t.bytes().all(|c| c.is_ascii_graphic() && c != b';')
            });
            if !well_formed {
                return Err(err(format!(
                    "{t:?} is not a media type such as \"text/html\", \"text/*\" or \
                     \"application/*+json\""
                )));
            }
            patterns.push(t.into_boxed_str());
        }
        settings.types = patterns.into();
    }
    if let Some(size) = &table.min_length {
        settings.min_length = parse_size(size).map_err(|m| err(format!("min_length: {m}")))?;
    }
    for (name, &level) in table.levels.iter().flatten() {
        let Some(c) = Coding::from_name(name) else {
            return Err(err(format!(
                "levels: {name:?} is not a coding; use zstd, br or gzip"
            )));
        };
        let (min, max) = match c {
            Coding::Gzip => (1, 9),
            Coding::Br => (0, 11),
            Coding::Zstd => (1, 19),
        };
        if !(min..=max).contains(&level) {
            return Err(err(format!(
                "levels: {name} takes a level from {min} to {max}, not {level}"
            )));
        }
        let level = level as u32;
        match c {
            Coding::Gzip => settings.gzip_level = level,
            Coding::Br => settings.br_level = level,
            Coding::Zstd => settings.zstd_level = level,
        }
    }
    Ok(Some(settings))
}
