//! The audit log (`metaServer.audit`): one JSON line per tool call, a script's nested calls
//! included. Each line is one `write` to a file opened with `O_APPEND` (owner-only), so lines
//! of several processes never interleave; past `maxBytes` the file is renamed to `<path>.1`
//! (replacing the previous one) and begun anew. A line that cannot be written is a warning in
//! meta-server's log, never a failed call. The format is in `docs/audit.md`.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::config::AuditSettings;

/// How a call ended, as the audit log says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The tool ran and did not report an error.
    Ok,
    /// The tool reported an error, or the call failed before or while reaching it.
    Error,
    /// The call policy (or a token's limits) refused it.
    Denied,
    /// The tool waits for approval (`meta-server tools approve`).
    Quarantined,
    /// The user declined or cancelled the confirmation, or never answered it.
    Declined,
    /// The upstream did not answer in time.
    Timeout,
}

/// One call as recorded.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Line<'a> {
    /// When the call ended (RFC 3339, milliseconds, UTC).
    pub time: String,
    /// The HTTP token's name (`anonymous` without one); `None` over stdio.
    pub principal: Option<&'a str>,
    /// The client's session: over HTTP a digest of its MCP session id, over stdio
    /// `stdio-<pid>`; `None` when it has none (an MCP 2026-07-28 request, no client).
    pub session: Option<&'a str>,
    /// The client's own name (`clientInfo.name`).
    pub client: Option<&'a str>,
    /// The tool's server and its name there; `None` for a name that is no `<server>__<tool>`.
    pub server: Option<&'a str>,
    pub tool: &'a str,
    /// Whether a `meta__run_script` script made the call.
    pub in_script: bool,
    pub outcome: Outcome,
    pub duration_ms: u64,
    /// Bytes of the result as sent (its JSON).
    pub result_bytes: usize,
    /// Whether result handling cut the result (a truncation notice is in it).
    pub cut: bool,
    /// The argument values, only with `"arguments": true`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<&'a Map<String, Value>>,
}

impl Line<'_> {
    /// The time for a line written now.
    pub fn now() -> String {
        humantime::format_rfc3339_millis(SystemTime::now()).to_string()
    }

    /// A duration as the log says it.
    pub fn millis(elapsed: Duration) -> u64 {
        u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
    }
}

/// Why a line was not written.
#[derive(Debug, thiserror::Error)]
enum AuditError {
    #[error("cannot open the audit log {path}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot rotate the audit log {path}: {source}")]
    Rotate {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write the audit log {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The open audit log; the file is opened at the first line.
pub struct AuditLog {
    settings: AuditSettings,
    file: Mutex<Option<File>>,
}

impl AuditLog {
    pub fn new(settings: AuditSettings) -> Self {
        Self {
            settings,
            file: Mutex::new(None),
        }
    }

    /// Whether lines carry argument values.
    pub fn with_arguments(&self) -> bool {
        self.settings.arguments
    }

    /// Appends `line` whole, rotating the file first if it would pass `maxBytes`.
    pub fn write(&self, line: &Line) {
        let mut text = match serde_json::to_vec(line) {
            Ok(text) => text,
            Err(e) => return tracing::warn!("cannot write an audit line: {e}"),
        };
        text.push(b'\n');
        if let Err(e) = self.append(&text) {
            tracing::warn!("{e}");
        }
    }

    fn append(&self, text: &[u8]) -> Result<(), AuditError> {
        let path = &self.settings.path;
        let mut file = self.file.lock();
        // Another process may have rotated the file: write to the one at `path`.
        if file.as_ref().is_some_and(|f| !is_at(f, path)) {
            *file = None;
        }
        let current = match file.take() {
            Some(current) => current,
            None => open(path)?,
        };
        let len = current.metadata().map_or(0, |m| m.len());
        let current = if len > 0 && len + text.len() as u64 > self.settings.max_bytes {
            let mut rotated = path.clone().into_os_string();
            rotated.push(".1");
            std::fs::rename(path, &rotated).map_err(|source| AuditError::Rotate {
                path: path.clone(),
                source,
            })?;
            open(path)?
        } else {
            current
        };
        let written = (&current).write_all(text);
        *file = Some(current);
        written.map_err(|source| AuditError::Write {
            path: path.clone(),
            source,
        })
    }
}

fn open(path: &PathBuf) -> Result<File, AuditError> {
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path).map_err(|source| AuditError::Open {
        path: path.clone(),
        source,
    })
}

/// Whether `file` is still the file at `path` (not renamed away by a rotation).
#[cfg(unix)]
fn is_at(file: &File, path: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(open), Ok(there)) => open.dev() == there.dev() && open.ino() == there.ino(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn is_at(_file: &File, path: &std::path::Path) -> bool {
    path.exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(tool: &str) -> Line<'_> {
        Line {
            time: Line::now(),
            principal: Some("ops"),
            session: None,
            client: Some("test"),
            server: Some("fs"),
            tool,
            in_script: false,
            outcome: Outcome::Declined,
            duration_ms: 3,
            result_bytes: 10,
            cut: false,
            arguments: None,
        }
    }

    fn lines(path: &std::path::Path) -> Vec<Value> {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn lines_are_whole_json_and_rotate_by_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::new(AuditSettings {
            path: path.clone(),
            arguments: false,
            max_bytes: 600,
        });
        for i in 0..6 {
            log.write(&line(&format!("t{i}")));
        }
        let rotated = dir.path().join("audit.jsonl.1");
        let (old, new) = (lines(&rotated), lines(&path));
        assert!(!old.is_empty() && !new.is_empty(), "{old:?} {new:?}");
        assert!(std::fs::metadata(&path).unwrap().len() <= 600);
        let tools: Vec<&str> = old
            .iter()
            .chain(&new)
            .map(|l| l["tool"].as_str().unwrap())
            .collect();
        assert_eq!(tools, ["t0", "t1", "t2", "t3", "t4", "t5"], "none lost");
        assert_eq!(new[0]["outcome"], "declined");
        assert_eq!(new[0]["principal"], "ops");
        assert!(new[0].get("arguments").is_none());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "owner-only");
        }
    }

    #[test]
    fn a_file_rotated_by_another_process_is_left_for_the_new_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::new(AuditSettings {
            path: path.clone(),
            arguments: false,
            max_bytes: 1 << 20,
        });
        log.write(&line("before"));
        std::fs::rename(&path, dir.path().join("elsewhere")).unwrap();
        log.write(&line("after"));
        assert_eq!(lines(&path).len(), 1);
        assert_eq!(lines(&path)[0]["tool"], "after");
    }
}
