//! Reading, atomic writing, and the install backup (`<file>.meta-server-backup`).

use std::io::Write;
use std::path::{Path, PathBuf};

use super::ClientError;
use crate::atomic_file::{self, Access};

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

/// Replaces `path` with `bytes` atomically, keeping the old file's permissions; a symlink is
/// followed, so the file it points at is replaced, not the link.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ClientError> {
    atomic_file::write(path, bytes, Access::AsBefore).map_err(|source| ClientError::Write {
        path: path.to_owned(),
        source,
    })
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
}
