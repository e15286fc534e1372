//! Reading, atomic writing, and the install backup (`<file>.meta-server-backup`).

use std::io::Write;
use std::path::{Path, PathBuf};

use super::ClientError;

/// Where `install` keeps the original of `path`.
pub fn backup_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".meta-server-backup");
    path.with_file_name(name)
}

/// The file's text, or `None` if it does not exist.
pub fn read_text(path: &Path) -> Result<Option<String>, ClientError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ClientError::Read {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Replaces `path` with `bytes` through a temporary file and a rename, keeping the old file's
/// permissions; a symlink is followed, so the file it points at is replaced, not the link.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ClientError> {
    let fail = |source| ClientError::Write {
        path: path.to_owned(),
        source,
    };
    let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir).map_err(fail)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".meta-server-")
        .tempfile_in(&dir)
        .map_err(fail)?;
    tmp.write_all(bytes).map_err(fail)?;
    tmp.as_file().sync_all().map_err(fail)?;
    if let Ok(meta) = std::fs::metadata(&target) {
        std::fs::set_permissions(tmp.path(), meta.permissions()).map_err(fail)?;
    }
    tmp.persist(&target).map_err(|e| fail(e.error))?;
    Ok(())
}

/// Copies `path` byte for byte to its backup; an existing backup is never overwritten.
pub fn write_backup(path: &Path, client: &'static str) -> Result<PathBuf, ClientError> {
    let backup = backup_path(path);
    let bytes = std::fs::read(path).map_err(|source| ClientError::Read {
        path: path.to_owned(),
        source,
    })?;
    let fail = |source| ClientError::Write {
        path: backup.clone(),
        source,
    };
    let mut file = match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&backup)
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(ClientError::BackupExists {
                path: backup,
                client,
            });
        }
        Err(e) => return Err(fail(e)),
    };
    file.write_all(&bytes).map_err(fail)?;
    file.sync_all().map_err(fail)?;
    if let Ok(meta) = std::fs::metadata(path) {
        std::fs::set_permissions(&backup, meta.permissions()).map_err(fail)?;
    }
    Ok(backup)
}

/// Puts the backup's bytes back at `path` and removes the backup.
pub fn restore_backup(path: &Path, client: &'static str) -> Result<PathBuf, ClientError> {
    let backup = backup_path(path);
    let bytes = match std::fs::read(&backup) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ClientError::NoBackup {
                path: backup,
                client,
            });
        }
        Err(source) => {
            return Err(ClientError::Read {
                path: backup,
                source,
            });
        }
    };
    write_atomic(path, &bytes)?;
    std::fs::remove_file(&backup).map_err(|source| ClientError::Write {
        path: backup.clone(),
        source,
    })?;
    Ok(backup)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backup_restore_is_byte_exact_and_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mcp.json");
        let original = b"{\r\n\t\"mcpServers\": {}\r\n}";
        std::fs::write(&path, original).unwrap();
        let backup = write_backup(&path, "cursor").unwrap();
        assert_eq!(backup, dir.path().join("mcp.json.meta-server-backup"));
        assert_eq!(std::fs::read(&backup).unwrap(), original);
        let again = write_backup(&path, "cursor").unwrap_err().to_string();
        assert!(again.contains("uninstall --client cursor"), "{again}");

        write_atomic(&path, b"changed").unwrap();
        restore_backup(&path, "cursor").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), original);
        assert!(!backup.exists());
        let none = restore_backup(&path, "cursor").unwrap_err().to_string();
        assert!(
            none.contains("no backup") && none.contains("install --client cursor"),
            "{none}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn atomic_write_keeps_permissions_and_follows_symlinks() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.json");
        std::fs::write(&real, "{}").unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o644)).unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        write_atomic(&link, b"[]").unwrap();
        assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "[]");
        let mode = std::fs::metadata(&real).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o644);
    }
}
