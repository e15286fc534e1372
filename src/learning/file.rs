//! The evidence beside the catalogs: `<catalog-dir>/.learned/evidence.json` (format 1,
//! owner-only, written whole), and the vectors of its queries in `.learned/queries.vectors`.
//! A directory, so no server's catalog (`<server>.json`) can be taken for it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Evidence;
use crate::atomic_file::{self, Access};

/// The directory of the evidence in the catalog dir.
pub const DIR: &str = ".learned";
/// The evidence file in [`DIR`].
pub const FILE: &str = "evidence.json";
/// The file of the learned queries' vectors in [`DIR`].
pub const VECTORS_FILE: &str = "queries.vectors";
const FORMAT: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum LearnedError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{path} is not learned evidence ({reason}); remove it, or run `meta-server learned forget`"
    )]
    Unreadable { path: PathBuf, reason: String },
    #[error(
        "{path} has format {found}; this meta-server reads format {FORMAT} (it was written by a newer one)"
    )]
    NewerFormat { path: PathBuf, found: u32 },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Where the evidence of the catalogs in `catalog_dir` is kept.
pub fn path(catalog_dir: &Path) -> PathBuf {
    catalog_dir.join(DIR).join(FILE)
}

/// Where the vectors of the learned queries of `catalog_dir` are kept.
pub fn vectors_path(catalog_dir: &Path) -> PathBuf {
    catalog_dir.join(DIR).join(VECTORS_FILE)
}

#[derive(Serialize, Deserialize)]
struct File {
    format: u32,
    #[serde(flatten)]
    evidence: Evidence,
}

impl Evidence {
    /// The evidence kept in `catalog_dir`; empty when there is none.
    pub fn load(catalog_dir: &Path) -> Result<Self, LearnedError> {
        let path = path(catalog_dir);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(source) => return Err(LearnedError::Read { path, source }),
        };
        Self::parse(&path, &text)
    }

    /// Evidence from the text of a file (or of the shared store) at `path`.
    pub fn parse(path: &Path, text: &str) -> Result<Self, LearnedError> {
        #[derive(Deserialize)]
        struct Format {
            format: u32,
        }
        let unreadable = |e: serde_json::Error| LearnedError::Unreadable {
            path: path.to_owned(),
            reason: e.to_string(),
        };
        let found = serde_json::from_str::<Format>(text)
            .map_err(unreadable)?
            .format;
        if found > FORMAT {
            return Err(LearnedError::NewerFormat {
                path: path.to_owned(),
                found,
            });
        }
        Ok(serde_json::from_str::<File>(text)
            .map_err(unreadable)?
            .evidence)
    }

    /// The evidence as its file holds it.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&File {
            format: FORMAT,
            evidence: self.clone(),
        })
        .expect("evidence serializes")
    }

    /// Writes the evidence in `catalog_dir` (whole, owner-only); no evidence removes the file.
    pub fn save(&self, catalog_dir: &Path) -> Result<(), LearnedError> {
        let path = path(catalog_dir);
        let failed = |source| LearnedError::Write {
            path: path.clone(),
            source,
        };
        if self.is_empty() {
            return match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(failed(e)),
                _ => Ok(()),
            };
        }
        atomic_file::write(&path, self.to_json().as_bytes(), Access::OwnerOnly).map_err(failed)
    }
}

/// An exclusive lock on the evidence of `catalog_dir`, held while it is read, merged and
/// written, so two processes serving one catalog dir (or `learned forget`) never drop each
/// other's changes; `None` when it cannot be taken (then merged without it).
pub fn lock(catalog_dir: &Path) -> Option<std::fs::File> {
    let path = catalog_dir.join(DIR).join("evidence.lock");
    let taken = std::fs::create_dir_all(catalog_dir.join(DIR))
        .and_then(|()| {
            std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
        })
        .and_then(|file| file.lock().map(|()| file));
    taken
        .inspect_err(|e| tracing::debug!("evidence merged without its lock: {e}"))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::learning::{Contribution, Teaching};

    #[test]
    fn evidence_round_trips_and_a_newer_or_damaged_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Evidence::load(dir.path()).unwrap().is_empty());
        let mut e = Evidence::default();
        e.teach(Teaching {
            tool: "s__t".into(),
            fingerprint: "f".into(),
            query: "read a file".into(),
            by: Contribution {
                principal: "p".into(),
                session: "s".into(),
                weight: 1.0,
                at: 5,
            },
        });
        e.save(dir.path()).unwrap();
        assert_eq!(Evidence::load(dir.path()).unwrap(), e);
        let file = path(dir.path());
        std::fs::write(&file, r#"{"format": 2, "tools": {}}"#).unwrap();
        let newer = Evidence::load(dir.path()).unwrap_err().to_string();
        assert!(newer.contains("format 2"), "{newer}");
        std::fs::write(&file, "{").unwrap();
        assert!(Evidence::load(dir.path()).is_err());
        Evidence::default().save(dir.path()).unwrap();
        assert!(!file.exists(), "no evidence, no file");
    }
}
