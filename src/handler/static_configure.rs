//! Second configuration stage of the `static` handler: its raw keys checked and
//! turned into a [`StaticFiles`] (root opened, index names checked), beside the
//! handler as h2o keeps each configurator beside its handler.

use std::ops::Range;

use crate::config::error::{ConfigError, Locator};
use crate::config::raw::RawStatic;
use crate::config::value::parse_duration;

use super::static_files::StaticFiles;

/// Builds a `static` route's handler; `key` names the route (`route[2]`) and
/// `span` its table, for keys that are missing.
pub fn build(
    loc: &Locator<'_>,
    key: &str,
    span: Range<usize>,
    raw: &RawStatic,
) -> Result<StaticFiles, ConfigError> {
    let Some(root) = &raw.root else {
        return Err(loc.error(span, &format!("{key}.root"), "a static route needs `root`"));
    };
    let index = match &raw.index {
        None => vec!["index.html".to_string()],
        Some(list) => {
            if let Some(bad) = list
                .get_ref()
                .iter()
                .find(|n| n.is_empty() || n.contains('/') || n.as_str() == "..")
            {
                return Err(loc.error(
                    list.span(),
                    &format!("{key}.index"),
                    format!("{bad:?} is not a file name"),
                ));
            }
            list.get_ref().clone()
        }
    };
    let files = StaticFiles::new(
        std::path::Path::new(root.get_ref()),
        index,
        raw.autoindex.unwrap_or(false),
        raw.allow_symlinks_outside.unwrap_or(false),
    )
    .map_err(|e| {
        loc.error(
            root.span(),
            &format!("{key}.root"),
            format!("{:?}: {e}", root.get_ref()),
        )
    })?;
    Ok(match &raw.open_file_cache_valid {
        None => files,
        Some(d) => {
            let valid = parse_duration(d.get_ref())
                .map_err(|m| loc.error(d.span(), &format!("{key}.open_file_cache_valid"), m))?;
            files.with_cache_valid(valid)
        }
    })
}
