//! Replacing a configuration file whole, as `POST /api/config` does with
//! `[admin] allow_config_write`: the new text goes to a temporary file in the
//! same directory, is synced, and is renamed over the file, so a reader (a
//! reload, an editor, a crash) sees the old text or the new, never a part.
//! The old text is kept beside it as `FILE.prev`, replaced the same way.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Where the text a replaced `file` held is kept.
pub fn previous_path(file: &Path) -> PathBuf {
    let mut p = file.as_os_str().to_os_string();
    p.push(".prev");
    PathBuf::from(p)
}

/// Writes `text` to `file` atomically, the old text kept in
/// [`previous_path`]; answers that path.
pub fn replace_keeping_previous(file: &Path, text: &str) -> io::Result<PathBuf> {
    let previous = previous_path(file);
    match std::fs::read(file) {
        Ok(old) => write_atomically(&previous, &old)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    write_atomically(file, text.as_bytes())?;
    Ok(previous)
}

/// `bytes` to a temporary file beside `path`, synced, then renamed over it;
/// the directory synced after, so the rename lasts.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let temp = dir.join(format!(".{name}.{}.new", std::process::id()));
    let written = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&temp)?;
        if let Ok(meta) = std::fs::metadata(path) {
            f.set_permissions(meta.permissions())?;
        }
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written?;
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_is_replaced_and_the_old_text_kept() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pier.toml");
        std::fs::write(&file, "old = 1\n").unwrap();
        let prev = replace_keeping_previous(&file, "new = 2\n").unwrap();
        assert_eq!(prev, dir.path().join("pier.toml.prev"));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "new = 2\n");
        assert_eq!(std::fs::read_to_string(&prev).unwrap(), "old = 1\n");
        // Nothing else is left in the directory.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
        replace_keeping_previous(&file, "newer = 3\n").unwrap();
        assert_eq!(std::fs::read_to_string(&prev).unwrap(), "new = 2\n");
    }

    #[test]
    fn a_directory_that_cannot_be_written_leaves_the_file_alone() {
        let file = Path::new("/nonexistent-dir/pier.toml");
        assert!(replace_keeping_previous(file, "x = 1\n").is_err());
    }
}
