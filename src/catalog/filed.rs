//! Tools left in their catalog file: a library of 100,000 tools would hold ~135 MB of tool
//! texts that only a search hit, details, a call or a re-index reads. A filed tool is where
//! its text is in the file, and the file's checksum when it was read; the file is read again
//! when the text is asked for, and a few recently read files are kept.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};

use super::{Catalog, RawTool};
use crate::checksum::{self, Checksum};

/// How many catalog files' texts are kept once read: the tools of a search's hits, of a
/// server being re-indexed or assessed for trust are read one by one from a few files.
const RECENT: usize = 16;

/// The files whose texts are kept, oldest first.
static KEPT: Mutex<VecDeque<Weak<CatalogFile>>> = Mutex::new(VecDeque::new());

/// One catalog file as it was read.
pub struct CatalogFile {
    path: PathBuf,
    /// The checksum of its bytes then.
    sum: Checksum,
    /// Its text, read again, and whether it is as it was, while it is one of the [`RECENT`]
    /// files read last.
    kept: Mutex<Option<(Arc<str>, bool)>>,
}

/// One tool's text in a [`CatalogFile`].
pub struct FiledTool {
    file: Arc<CatalogFile>,
    pub(super) start: usize,
    pub(super) len: usize,
    /// Its name, to find it in the file if the file changed.
    name: Box<str>,
}

impl CatalogFile {
    pub fn new(path: PathBuf, sum: Checksum) -> Arc<Self> {
        Arc::new(Self {
            path,
            sum,
            kept: Mutex::new(None),
        })
    }

    /// The file's text now, and whether it is as it was read; `None` if it cannot be read.
    fn text(self: &Arc<Self>) -> Option<(Arc<str>, bool)> {
        if let Some(kept) = self.kept.lock().expect("not poisoned").clone() {
            return Some(kept);
        }
        let text: Arc<str> = std::fs::read_to_string(&self.path)
            .inspect_err(|e| tracing::warn!("cannot read catalog {}: {e}", self.path.display()))
            .ok()?
            .into();
        let same = checksum::of(text.as_bytes()) == self.sum;
        *self.kept.lock().expect("not poisoned") = Some((text.clone(), same));
        let mut kept = KEPT.lock().expect("not poisoned");
        kept.push_back(Arc::downgrade(self));
        while kept.len() > RECENT {
            if let Some(file) = kept.pop_front().and_then(|f| f.upgrade()) {
                *file.kept.lock().expect("not poisoned") = None;
            }
        }
        Some((text, same))
    }
}

impl FiledTool {
    /// The tool named `name` at `start` (`len` bytes) in `file`.
    pub(super) fn new(file: Arc<CatalogFile>, start: usize, len: usize, name: &str) -> Self {
        Self {
            file,
            start,
            len,
            name: name.into(),
        }
    }

    /// The tool's text: from the file if it is as it was read; if it changed since (another
    /// program wrote it), the tool of that name in it now; `null` if there is none.
    pub fn text(&self) -> String {
        let Some((text, same)) = self.file.text() else {
            return "null".into();
        };
        if same && let Some(tool) = text.get(self.start..self.start + self.len) {
            return tool.to_owned();
        }
        tracing::info!(
            tool = %self.name,
            "catalog {} changed since it was read; the tool is read as it is now",
            self.file.path.display()
        );
        let now = Catalog::parse(&self.file.path, &text)
            .ok()
            .and_then(|catalog| {
                catalog
                    .tools
                    .into_iter()
                    .find(|tool| super::tool::name_of(&tool.text()).as_deref() == Some(&*self.name))
            });
        now.map_or_else(|| "null".into(), |tool| tool.text().into_owned())
    }
}

/// `tools` (parsed from `text`, the bytes of `file`) as filed tools: each one's place in
/// `text`, found in order. `names` are their names; a tool without one, or whose text is not
/// found as it is in the file, stays held.
pub fn file_tools(
    file: &Arc<CatalogFile>,
    text: &str,
    tools: &[RawTool],
    names: &[Option<&str>],
) -> Vec<RawTool> {
    // The tools come after the first `"tools"` in the file (the key, or something before it),
    // the first one usually as the first object after it.
    let mut from = text.find("\"tools\"").unwrap_or(0);
    tools
        .iter()
        .zip(names)
        .map(|(tool, name)| {
            let own = tool.text();
            // Usually the next object in the file; a substring search (28 % of the samples of
            // a start at 100k tools when it was the only way) only when it is not.
            let next = text[from..]
                .find('{')
                .filter(|&at| text[from + at..].starts_with(&*own));
            let found = next
                .or_else(|| text[from..].find(&*own))
                .map(|at| from + at);
            let (Some(name), Some(start)) = (name, found) else {
                return tool.clone();
            };
            from = start + own.len();
            RawTool::filed(FiledTool::new(file.clone(), start, own.len(), name))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use std::path::Path;
    use std::time::SystemTime;

    use super::super::{Catalog, RawTool, ToolDef};

    /// The catalog of `srv` in `dir` and its tools, read from the file.
    fn read_srv(dir: &Path) -> (Catalog, Vec<ToolDef>) {
        let read = Catalog::read_server_filed(dir, "srv", None, SystemTime::now())
            .unwrap()
            .unwrap();
        (read.catalog, read.tools)
    }

    fn catalog(description: &str) -> Catalog {
        let tools = ["a", "b", "c"].map(|name| {
            RawTool::from(
                json!({"name": name, "description": format!("{name} {description}"),
                "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}}}),
            )
        });
        Catalog::new("srv", tools.to_vec())
    }

    #[test]
    fn filed_tools_read_their_text_from_the_file_as_it_was_or_is_now() {
        let dir = tempfile::tempdir().unwrap();
        let written = catalog("one");
        written.write(dir.path()).unwrap();
        let (read, defs) = read_srv(dir.path());
        assert_eq!(read, written, "the same tools, read from the file");
        assert_eq!(defs.len(), 3);
        assert_eq!(defs[1].description(), "b one");
        assert_eq!(defs[1].value(), written.tools[1].value());
        assert_eq!(defs[2].params()[0].name, "x");

        // Another program rewrites the file: each tool is read as it is now, by its name.
        let (before, defs) = read_srv(dir.path());
        let mut now = catalog("two");
        now.tools.reverse();
        now.tools.pop();
        now.write(dir.path()).unwrap();
        assert_eq!(defs[1].value()["description"], "b two");
        assert_eq!(before.tools[2].value()["description"], "c two");
        assert_eq!(defs[0].value(), serde_json::Value::Null, "a is gone");

        // The file is gone: the tools read as null, the names and titles read up front stay.
        let (_, defs) = read_srv(dir.path());
        std::fs::remove_file(Catalog::path(dir.path(), "srv")).unwrap();
        assert_eq!(defs[0].value(), serde_json::Value::Null);
        assert_eq!(defs[0].title, None);
    }

    #[test]
    fn tools_are_found_after_a_tools_key_that_is_not_the_catalogs() {
        let dir = tempfile::tempdir().unwrap();
        let mut written = catalog("one");
        written.server_info = Some(json!({"capabilities": {"tools": {"listChanged": true}}}));
        written.write(dir.path()).unwrap();
        let (read, defs) = read_srv(dir.path());
        assert_eq!(read, written);
        assert_eq!(defs[0].description(), "a one");
        // Each tool was found in the file: without it, none has a text left.
        let (_, defs) = read_srv(dir.path());
        std::fs::remove_file(Catalog::path(dir.path(), "srv")).unwrap();
        assert!(defs.iter().all(|d| d.value() == serde_json::Value::Null));
    }

    #[test]
    fn a_tool_cleaned_of_hidden_characters_keeps_its_cleaned_text() {
        let dir = tempfile::tempdir().unwrap();
        let tools = vec![RawTool::from(
            json!({"name": "a", "description": "x\u{200B}y"}),
        )];
        Catalog::new("srv", tools).write(dir.path()).unwrap();
        let (_, defs) = read_srv(dir.path());
        std::fs::remove_file(Catalog::path(dir.path(), "srv")).unwrap();
        assert_eq!(defs[0].hidden, 1);
        assert_eq!(defs[0].value()["description"], "xy");
    }
}
