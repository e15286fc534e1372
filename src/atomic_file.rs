//! Writing a whole file at once: a temporary file in the target's directory, synced, then
//! renamed over the target, so a reader sees the old file or the new one, never half of either.
//! The one place files are written this way (catalogs, vectors, spilled results, client configs).

use std::io::Write;
use std::path::{Path, PathBuf};

/// Who may read the file written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Owner-only (0600 on Unix): catalogs, vectors, stored results.
    OwnerOnly,
    /// As the file it replaces (owner-only if new); a symlink is followed, so the file it
    /// points at is replaced, not the link: the config files of other programs.
    AsBefore,
}

/// Replaces `path` with `bytes`, creating its directory if needed.
pub fn write(path: &Path, bytes: &[u8], access: Access) -> std::io::Result<()> {
    write_with(path, access, |file| file.write_all(bytes))
}

/// Like [`write`], with the bytes that `fill` writes (buffered), not all held at once.
pub fn write_with(
    path: &Path,
    access: Access,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let target = match access {
        Access::AsBefore => std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned()),
        Access::OwnerOnly => path.to_owned(),
    };
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir)?;
    let mut prefix = target.file_name().unwrap_or_default().to_os_string();
    prefix.push(".");
    // tempfile creates the file owner-only.
    let mut tmp = tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".tmp")
        .tempfile_in(&dir)?;
    let mut buffered = std::io::BufWriter::new(&mut tmp);
    fill(&mut buffered)?;
    buffered.flush()?;
    drop(buffered);
    tmp.as_file().sync_all()?;
    if access == Access::AsBefore
        && let Ok(meta) = std::fs::metadata(&target)
    {
        std::fs::set_permissions(tmp.path(), meta.permissions())?;
    }
    tmp.persist(&target).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_whole_files_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/x.json");
        write(&path, b"one", Access::OwnerOnly).unwrap();
        write(&path, b"two", Access::OwnerOnly).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(dir.path().join("sub"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["x.json"]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "owner-only, mode {mode:o}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn as_before_keeps_permissions_and_follows_symlinks() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.json");
        std::fs::write(&real, "{}").unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o644)).unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        write(&link, b"[]", Access::AsBefore).unwrap();
        assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "[]");
        let mode = std::fs::metadata(&real).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o644);
    }
}
