//! The audit log (`metaServer.audit`): one JSON line per tool call (a script's nested calls
//! included), per `prompts/get` and per `resources/read`. Each line is bounded ([`LINE_BYTES`];
//! a field past its bound is cut and named in `truncated`), has every character a terminal or
//! a reader could be fooled by escaped, and is one `write` to a file opened with `O_APPEND`
//! (owner-only, never through a symbolic link), so lines of several processes never
//! interleave; past `maxBytes` the file is renamed to `<path>.1` (replacing the previous one)
//! and begun anew, under a lock so that two processes never rotate twice. `serve` and `call`
//! open the file at start ([`check`]); a line that cannot be written later is a
//! warning in meta-server's log, never a failed call. The format is in `docs/audit.md`.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::config::{AuditSettings, MIN_AUDIT_MAX_BYTES};

/// The longest a line can be, newline included: the sum of the field bounds below and the
/// keys, with room to spare.
pub const LINE_BYTES: usize = 16 << 10;
/// Bytes (as written, escapes included) of a name: principal, session, client, server, tool,
/// prompt.
const NAME_BYTES: usize = 512;
/// Bytes of a resource URI.
const URI_BYTES: usize = 2 << 10;
/// Bytes of the `arguments` object (with `"arguments": true`).
const ARGUMENTS_BYTES: usize = 8 << 10;
/// Bytes of one argument's value within `arguments` that had to be cut; a longer one is
/// replaced by the start of its JSON text.
const ARGUMENT_BYTES: usize = 512;

// The rotation keeps at least `maxBytes / LINE_BYTES - 1` lines after any line (docs/audit.md).
const _: () = assert!(MIN_AUDIT_MAX_BYTES >= 64 * LINE_BYTES as u64);
const _: () = assert!(
    6 * NAME_BYTES + URI_BYTES + ARGUMENTS_BYTES + 1024 <= LINE_BYTES,
    "line bound"
);

/// How a call, prompt or read ended, as the audit log says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// It ran and did not report an error.
    Ok,
    /// The tool or server reported an error, or the request failed before or while reaching it.
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

/// What a line records.
#[derive(Debug, Clone, Copy)]
pub enum Subject<'a> {
    /// A tool call: the tool's name on its server, whether a `meta__run_script` script made
    /// it, whether result handling cut its result.
    Tool {
        tool: &'a str,
        in_script: bool,
        cut: bool,
    },
    /// `prompts/get`, by the name the client asked for.
    Prompt(&'a str),
    /// `resources/read` of a URI.
    Resource(&'a str),
}

/// One call, prompt or read as recorded.
#[derive(Debug)]
pub struct Line<'a> {
    /// When it ended (RFC 3339, milliseconds, UTC).
    pub time: String,
    /// The HTTP token's name (`anonymous` without one); `None` over stdio.
    pub principal: Option<&'a str>,
    /// The client's session: over HTTP a digest of its MCP session id, over stdio
    /// `stdio-<pid>`; `None` when it has none (an MCP 2026-07-28 request, no client).
    pub session: Option<&'a str>,
    /// The client's own name (`clientInfo.name`).
    pub client: Option<&'a str>,
    /// The server it went to; `None` when none has it (a tool name that is no
    /// `<server>__<tool>`, a prompt or URI no server lists).
    pub server: Option<&'a str>,
    pub subject: Subject<'a>,
    pub outcome: Outcome,
    pub duration_ms: u64,
    /// Bytes of the result as sent (its JSON).
    pub result_bytes: usize,
    /// The argument values (a tool's or a prompt's), only with `"arguments": true`.
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

    /// The line as written: every field within its bound, escaped, a newline at the end; at
    /// most [`LINE_BYTES`].
    fn render(&self) -> String {
        let mut fields = Fields::default();
        fields.put("time", self.time.as_str());
        let kind = match self.subject {
            Subject::Tool { .. } => "tool",
            Subject::Prompt(_) => "prompt",
            Subject::Resource(_) => "resource",
        };
        fields.put("kind", kind);
        fields.text("principal", self.principal, NAME_BYTES);
        fields.text("session", self.session, NAME_BYTES);
        fields.text("client", self.client, NAME_BYTES);
        fields.text("server", self.server, NAME_BYTES);
        match self.subject {
            Subject::Tool {
                tool, in_script, ..
            } => {
                fields.text("tool", Some(tool), NAME_BYTES);
                fields.put("inScript", in_script);
            }
            Subject::Prompt(name) => fields.text("prompt", Some(name), NAME_BYTES),
            Subject::Resource(uri) => fields.text("uri", Some(uri), URI_BYTES),
        }
        fields.put(
            "outcome",
            serde_json::to_value(self.outcome).unwrap_or_default(),
        );
        fields.put("durationMs", self.duration_ms);
        fields.put("resultBytes", self.result_bytes);
        if let Subject::Tool { cut, .. } = self.subject {
            fields.put("cut", cut);
        }
        if let Some(arguments) = self.arguments {
            fields.arguments(arguments);
        }
        let Fields {
            mut line,
            truncated,
        } = fields;
        if !truncated.is_empty() {
            line.insert("truncated".into(), Value::Object(truncated));
        }
        let mut text = escape(&Value::Object(line).to_string());
        text.push('\n');
        text
    }
}

/// A line's fields being bounded, and those that were cut with their lengths.
#[derive(Default)]
struct Fields {
    line: Map<String, Value>,
    truncated: Map<String, Value>,
}

impl Fields {
    fn put(&mut self, key: &str, value: impl Into<Value>) {
        self.line.insert(key.into(), value.into());
    }

    /// `value` cut to `bound` bytes as written; a cut one is named with its length.
    fn text(&mut self, key: &str, value: Option<&str>, bound: usize) {
        let Some(value) = value else {
            return self.put(key, Value::Null);
        };
        let (kept, whole) = cut(value, bound);
        if !whole {
            self.truncated.insert(key.into(), value.len().into());
        }
        self.put(key, kept);
    }

    /// The arguments whole when they fit [`ARGUMENTS_BYTES`]; else as many keys as fit, those
    /// whose values are short first, a long value replaced by the start of its JSON text.
    fn arguments(&mut self, arguments: &Map<String, Value>) {
        let json = serde_json::to_string(arguments).unwrap_or_default();
        if written_len(&json) <= ARGUMENTS_BYTES {
            return self.put("arguments", Value::Object(arguments.clone()));
        }
        let mut entries: Vec<(String, Value, bool)> = (arguments.iter())
            .map(|(key, value)| {
                let key = cut(key, NAME_BYTES).0.to_owned();
                let text = value.to_string();
                if written_len(&text) <= ARGUMENT_BYTES {
                    (key, value.clone(), true)
                } else {
                    (
                        key,
                        Value::String(cut(&text, ARGUMENT_BYTES).0.to_owned()),
                        false,
                    )
                }
            })
            .collect();
        entries.sort_by_key(|(_, _, whole)| !whole);
        let mut kept = Map::new();
        let mut used = 2;
        for (key, value, _) in entries {
            let size = string_len(&key) + 2 + written_len(&value.to_string());
            if used + size > ARGUMENTS_BYTES {
                break;
            }
            used += size;
            kept.insert(key, value);
        }
        self.truncated.insert("arguments".into(), json.len().into());
        self.put("arguments", Value::Object(kept));
    }
}

/// The longest start of `text` whose JSON string (quotes included) is at most `bound` bytes as
/// written; whether that is all of it.
fn cut(text: &str, bound: usize) -> (&str, bool) {
    let mut used = 2;
    for (at, c) in text.char_indices() {
        used += char_len(c);
        if used > bound {
            return (&text[..at], false);
        }
    }
    (text, true)
}

/// Bytes of `text` as a JSON string in a line, quotes included.
fn string_len(text: &str) -> usize {
    2 + text.chars().map(char_len).sum::<usize>()
}

/// Bytes of `c` inside a JSON string in a line: as serde_json escapes it, then [`escape`].
fn char_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if c < ' ' => 6,
        c if escaped(c) => 6 * c.len_utf16(),
        c => c.len_utf8(),
    }
}

/// Bytes of JSON text `json` once [`escape`]d.
fn written_len(json: &str) -> usize {
    let grown: usize = (json.chars())
        .filter(|c| escaped(*c))
        .map(|c| 6 * c.len_utf16() - c.len_utf8())
        .sum();
    json.len() + grown
}

/// Whether `c` is written as a `\u` escape though serde_json leaves it raw: DEL and C1
/// controls, bidi controls and other invisible characters (as the catalog strips them from
/// tool texts), and the line and paragraph separators some readers take as line ends.
fn escaped(c: char) -> bool {
    c >= '\u{7f}'
        && (c.is_control() || crate::hidden::is_hidden(c) || matches!(c, '\u{2028}' | '\u{2029}'))
}

/// JSON text with the characters of [`escaped`] written as `\uXXXX` (a surrogate pair beyond
/// the BMP): the same value. serde_json writes them only inside strings, where the escape
/// means the same character.
fn escape(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if escaped(c) {
            let mut units = [0; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Bytes of `value` as JSON, counted without keeping them.
pub fn json_bytes(value: &impl Serialize) -> usize {
    struct Count(usize);
    impl Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// Why the log cannot be opened or a line was not written.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error(
        "cannot open the audit log {path}: {source}; metaServer.audit.path must name a file meta-server can create or append to"
    )]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the audit log {path} is a symbolic link, which meta-server does not follow; set metaServer.audit.path to the file itself"
    )]
    Link { path: PathBuf },
    #[error(
        "the audit log {path} is not a regular file; set metaServer.audit.path to a file meta-server can create or append to"
    )]
    NotFile { path: PathBuf },
    #[error(
        "the audit log {path} can be read by others (mode {mode:o}) and cannot be made owner-only: {source}; make it 0600 (chmod 600) or owned by this user"
    )]
    Private {
        path: PathBuf,
        mode: u32,
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

/// Opens the log `settings` name as lines will be written to it (created, made owner-only),
/// and closes it again: a path that cannot take lines stops a command at start instead of
/// warning at each call.
pub fn check(settings: &AuditSettings) -> Result<(), AuditError> {
    open(&settings.path).map(drop)
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
        if let Err(e) = self.append(line.render().as_bytes()) {
            tracing::warn!("{e}");
        }
    }

    fn append(&self, text: &[u8]) -> Result<(), AuditError> {
        let path = &self.settings.path;
        let mut held = self.file.lock();
        // Another process may have rotated the file: write to the one at `path`.
        let mut file = match held.take() {
            Some(file) if is_at(&file, path) => file,
            _ => open(path)?,
        };
        // Between the look at the size and the rename, no other process rotates: one that
        // waited for the lock finds the file renamed and takes the new one.
        let locked = file.lock().is_ok();
        if locked && !is_at(&file, path) {
            file = open(path)?;
            file.lock().ok();
        }
        let len = file.metadata().map_or(0, |m| m.len());
        if len > 0 && len + text.len() as u64 > self.settings.max_bytes {
            let mut rotated = path.clone().into_os_string();
            rotated.push(".1");
            std::fs::rename(path, &rotated).map_err(|source| AuditError::Rotate {
                path: path.clone(),
                source,
            })?;
            // Closing the old file releases its lock.
            file = open(path)?;
        }
        let written = (&file).write_all(text);
        file.unlock().ok();
        *held = Some(file);
        written.map_err(|source| AuditError::Write {
            path: path.clone(),
            source,
        })
    }
}

/// Opens the log at `path` for appending: created owner-only, an existing one made
/// owner-only; a symbolic link, a FIFO or anything but a regular file refused.
fn open(path: &Path) -> Result<File, AuditError> {
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // O_NOFOLLOW: a link at `path` is refused (ELOOP). O_NONBLOCK: a FIFO without a reader
        // fails the open (ENXIO) instead of blocking it.
        options
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(|source| {
        if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
            AuditError::Link { path: path.into() }
        } else {
            AuditError::Open {
                path: path.into(),
                source,
            }
        }
    })?;
    let metadata = file.metadata().map_err(|source| AuditError::Open {
        path: path.into(),
        source,
    })?;
    if !metadata.is_file() {
        return Err(AuditError::NotFile { path: path.into() });
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = metadata.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            // fchmod on the file opened, never on whatever `path` names by now.
            (file.set_permissions(std::fs::Permissions::from_mode(0o600))).map_err(|source| {
                AuditError::Private {
                    path: path.into(),
                    mode,
                    source,
                }
            })?;
            tracing::info!(path = %path.display(), "the audit log was mode {mode:o}; it is now owner-only (0600)");
        }
    }
    Ok(file)
}

/// Whether `file` is still the file at `path` (not renamed away by a rotation, nor replaced).
#[cfg(unix)]
fn is_at(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(open), Ok(there)) => open.dev() == there.dev() && open.ino() == there.ino(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn is_at(_file: &File, path: &Path) -> bool {
    path.exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(path: &Path, max_bytes: u64) -> AuditSettings {
        AuditSettings {
            path: path.into(),
            arguments: false,
            max_bytes,
        }
    }

    fn line(tool: &str) -> Line<'_> {
        Line {
            time: Line::now(),
            principal: Some("ops"),
            session: None,
            client: Some("test"),
            server: Some("fs"),
            subject: Subject::Tool {
                tool,
                in_script: false,
                cut: false,
            },
            outcome: Outcome::Declined,
            duration_ms: 3,
            result_bytes: 10,
            arguments: None,
        }
    }

    fn lines(path: &Path) -> Vec<Value> {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[cfg(unix)]
    fn mode(path: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn lines_are_whole_json_and_rotate_by_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        // Three lines a file.
        let max = 3 * line("t0").render().len() as u64 + 2;
        let log = AuditLog::new(settings(&path, max));
        for i in 0..6 {
            log.write(&line(&format!("t{i}")));
        }
        let rotated = dir.path().join("audit.jsonl.1");
        let (old, new) = (lines(&rotated), lines(&path));
        assert!(!old.is_empty() && !new.is_empty(), "{old:?} {new:?}");
        assert!(std::fs::metadata(&path).unwrap().len() <= max);
        let tools: Vec<&str> = old
            .iter()
            .chain(&new)
            .map(|l| l["tool"].as_str().unwrap())
            .collect();
        assert_eq!(tools, ["t0", "t1", "t2", "t3", "t4", "t5"], "none lost");
        assert_eq!(new[0]["kind"], "tool");
        assert_eq!(new[0]["outcome"], "declined");
        assert_eq!(new[0]["principal"], "ops");
        assert!(new[0].get("arguments").is_none() && new[0].get("truncated").is_none());
        #[cfg(unix)]
        assert_eq!(mode(&path), 0o600, "owner-only");
    }

    #[test]
    fn a_file_rotated_by_another_process_is_left_for_the_new_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::new(settings(&path, 1 << 20));
        log.write(&line("before"));
        std::fs::rename(&path, dir.path().join("elsewhere")).unwrap();
        log.write(&line("after"));
        assert_eq!(lines(&path).len(), 1);
        assert_eq!(lines(&path)[0]["tool"], "after");
    }

    /// Issue 38, M5: lines had no bound, and the client chooses tool names, prompt names,
    /// URIs, `clientInfo.name` and (with `"arguments": true`) argument values.
    #[test]
    fn every_field_and_line_is_bounded_and_says_what_was_cut() {
        let huge = "\u{202e}\u{E0041}\u{7f}\"\\\x01é".repeat(30_000);
        let content = "x".repeat(1 << 20);
        let arguments: Map<String, Value> = [
            ("content".to_owned(), Value::from(content.as_str())),
            ("path".to_owned(), Value::from("/home/u/.bashrc")),
            (huge.clone(), Value::from(huge.as_str())),
        ]
        .into_iter()
        .collect();
        let subjects = [
            Subject::Tool {
                tool: &huge,
                in_script: true,
                cut: true,
            },
            Subject::Prompt(&huge),
            Subject::Resource(&huge),
        ];
        for subject in subjects {
            let line = Line {
                principal: Some(&huge),
                session: Some(&huge),
                client: Some(&huge),
                server: Some(&huge),
                subject,
                arguments: Some(&arguments),
                ..line("t")
            };
            let text = line.render();
            assert!(text.len() <= LINE_BYTES, "{} bytes", text.len());
            assert!(text.ends_with('\n') && text.matches('\n').count() == 1);
            let value: Value = serde_json::from_str(&text).unwrap();
            let truncated = &value["truncated"];
            for key in ["principal", "session", "client", "server", "arguments"] {
                assert!(truncated[key].as_u64().is_some(), "{key} in {truncated}");
            }
            let (key, said) = match subject {
                Subject::Tool { .. } => ("tool", "tool"),
                Subject::Prompt(_) => ("prompt", "prompt"),
                Subject::Resource(_) => ("uri", "resource"),
            };
            assert_eq!(value["kind"], said);
            assert_eq!(truncated[key], huge.len(), "the original length");
            let kept = value[key].as_str().unwrap();
            assert!(
                !kept.is_empty() && huge.starts_with(kept),
                "a cut keeps the start"
            );
            assert_eq!(
                value["arguments"]["path"], "/home/u/.bashrc",
                "short values kept"
            );
            assert!(
                content.starts_with(
                    (serde_json::from_str::<Value>(&format!(
                        "{}\"",
                        value["arguments"]["content"].as_str().unwrap()
                    )))
                    .unwrap()
                    .as_str()
                    .unwrap()
                )
            );
        }
        let small: Map<String, Value> = [("path".to_owned(), Value::from("/x"))]
            .into_iter()
            .collect();
        let value: Value = serde_json::from_str(
            &Line {
                arguments: Some(&small),
                ..line("t")
            }
            .render(),
        )
        .unwrap();
        assert_eq!(value["arguments"], Value::Object(small));
        assert!(value.get("truncated").is_none());
    }

    /// Issue 38, M5: after a `destroy`, nine calls with 3.9 MB names rotated its line out of
    /// both files. A line now survives `maxBytes / LINE_BYTES - 1` later lines of any size.
    #[test]
    fn the_longest_lines_cannot_rotate_a_line_out_of_both_files_soon() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::new(settings(&path, MIN_AUDIT_MAX_BYTES));
        log.write(&line("destroy"));
        let name = "\u{E0041}".repeat(3_900_000 / 4);
        let long = &name[..4_000];
        let arguments: Map<String, Value> = (0..20)
            .map(|i| (format!("{i}{long}"), Value::from(long)))
            .collect();
        let longest = MIN_AUDIT_MAX_BYTES as usize / LINE_BYTES - 1;
        for _ in 0..longest {
            let line = Line {
                principal: Some(&name),
                session: Some(&name),
                client: Some(&name),
                server: Some(&name),
                arguments: Some(&arguments),
                ..line(&name)
            };
            let len = line.render().len();
            assert!(len > LINE_BYTES / 2, "{len}");
            log.write(&line);
        }
        let rotated = dir.path().join("audit.jsonl.1");
        let kept: Vec<Value> = lines(&rotated).into_iter().chain(lines(&path)).collect();
        assert_eq!(
            kept[0]["tool"], "destroy",
            "still there after {longest} of the longest"
        );
        assert_eq!(kept.len(), longest + 1);
    }

    /// Issue 38, L8: U+202E and other characters a terminal or reader acts on were written raw.
    #[test]
    fn bidi_controls_and_invisible_characters_are_escaped() {
        let client = "a\u{202e}txt.exe\u{2066}\u{200b}\u{E0041}\u{2028}\u{85}\u{7f}\x1b[31m";
        let text = Line {
            client: Some(client),
            ..line("t")
        }
        .render();
        let raw = |c: char| c != '\n' && (c.is_control() || escaped(c));
        assert!(!text.chars().any(raw), "{text:?}");
        assert!(
            text.contains(r"a\u202etxt.exe\u2066\u200b\udb40\udc41\u2028\u0085\u007f\u001b[31m"),
            "{text}"
        );
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["client"], client, "the same value");
    }

    /// Issue 38, L8: an existing 0644 file stayed 0644.
    #[cfg(unix)]
    #[test]
    fn an_existing_file_readable_by_others_is_made_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        std::fs::write(&path, "").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        check(&settings(&path, 1 << 20)).unwrap();
        assert_eq!(mode(&path), 0o600);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        AuditLog::new(settings(&path, 1 << 20)).write(&line("t"));
        assert_eq!(mode(&path), 0o600);
        assert_eq!(lines(&path).len(), 1);
    }

    /// Issue 38, L8: a symbolic link at the path was followed.
    #[cfg(unix)]
    #[test]
    fn a_symbolic_link_or_a_fifo_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "").unwrap();
        let path = dir.path().join("audit.jsonl");
        std::os::unix::fs::symlink(&target, &path).unwrap();
        let e = check(&settings(&path, 1 << 20)).unwrap_err().to_string();
        assert!(
            e.contains(&path.display().to_string()) && e.contains("symbolic link"),
            "{e}"
        );
        AuditLog::new(settings(&path, 1 << 20)).write(&line("t"));
        assert_eq!(
            std::fs::read_to_string(&target).unwrap(),
            "",
            "nothing through the link"
        );
        let dangling = dir.path().join("dangling.jsonl");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
        assert!(matches!(
            check(&settings(&dangling, 1 << 20)),
            Err(AuditError::Link { .. })
        ));
        assert!(
            !dir.path().join("nowhere").exists(),
            "not created through the link"
        );
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = check(&settings(&fifo, 1 << 20)).unwrap_err().to_string();
        assert!(e.contains("fifo"), "refused at once, not blocked: {e}");
    }

    /// Issue 38, L8: an unwritable path let calls run with a warning and no check at start.
    #[test]
    fn a_path_that_cannot_take_lines_is_an_error_that_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing-dir").join("audit.jsonl");
        let e = check(&settings(&path, 1 << 20)).unwrap_err().to_string();
        assert!(
            e.contains(&path.display().to_string())
                && e.contains("No such file or directory")
                && e.contains("metaServer.audit.path"),
            "{e}"
        );
        let e = check(&settings(dir.path(), 1 << 20))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot open the audit log"), "a directory: {e}");
    }
}
