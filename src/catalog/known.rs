//! What the last start knew of each catalog file, so that the next one files an unchanged
//! catalog's tools without reading or parsing the file: at 100,000 tools in 15,664 files,
//! reading and parsing them was a third of a start's CPU. Kept in one file beside the saved
//! search index ([`Known::path`]).
//!
//! A [`Record`] holds the file's [`Stamp`] (size, modification and change times, inode), the
//! checksum of its bytes, the catalog less its tools (as JSON), and per tool its place in the
//! file, name, title and hidden characters removed (with its cleaned text when cleaning
//! changed it). A file whose stamp is not the record's is read again. A record is
//! only made of a file that had not changed for [`SETTLED`] when it was read: a file changed
//! again within one tick of the file system's clock would keep its stamp.

use std::collections::{BTreeMap, HashMap};
use std::fs::Metadata;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::filed::{CatalogFile, FiledTool};
use super::{Catalog, RawTool, ToolDef};
use crate::atomic_file::{self, Access};
use crate::binary::{DecodeError, Reader, Writer};
use crate::checksum::{self, Checksum};

/// The file of records, in the saved index's directory; another layout gets another name.
const FILE: &str = "catalogs.v1";

/// How long a file must have been unchanged when read for its stamp to be trusted.
pub const SETTLED: Duration = Duration::from_secs(2);

/// A catalog file's size, times and identity on disk; a write to the file, in place or by
/// replacing it, changes its change time (which no program sets) or its inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp([u64; 7]);

impl Stamp {
    /// The stamp of a file with metadata `meta`; `None` where the platform gives no change
    /// time and inode (such files are always read).
    #[cfg(unix)]
    pub fn of(meta: &Metadata) -> Option<Self> {
        use std::os::unix::fs::MetadataExt;
        Some(Self([
            meta.size(),
            meta.mtime() as u64,
            meta.mtime_nsec() as u64,
            meta.ctime() as u64,
            meta.ctime_nsec() as u64,
            meta.ino(),
            meta.dev(),
        ]))
    }

    #[cfg(not(unix))]
    pub fn of(_: &Metadata) -> Option<Self> {
        None
    }

    /// Whether the file had been unchanged for [`SETTLED`] at `now`.
    pub fn settled(&self, now: SystemTime) -> bool {
        let [_, msec, mnsec, csec, cnsec, ..] = self.0;
        // Nanoseconds are below a second; a time before 1970 reads as one far ahead: never
        // settled.
        let at = |secs, nanos| Duration::new(secs, (nanos % 1_000_000_000) as u32);
        let settled = at(msec, mnsec).max(at(csec, cnsec)).checked_add(SETTLED);
        let now = now.duration_since(UNIX_EPOCH);
        matches!((now, settled), (Ok(now), Some(settled)) if now >= settled)
    }
}

/// One catalog file as a start read it, encoded.
#[derive(Clone)]
pub struct Record {
    bytes: Arc<[u8]>,
    /// Whether it was read from the saved records (else made by this start).
    saved: bool,
}

/// A catalog read from its [`Record`]: the catalog (its tools filed), its file's checksum and
/// its tools as MCP tools.
pub type Recalled = (Catalog, Checksum, Vec<ToolDef>);

impl Record {
    /// The record of `catalog`, read from a file with `stamp` and checksum `sum`, whose tools
    /// are `defs`; `None` unless every tool is filed and an MCP tool (a catalog with a tool
    /// that was skipped is read from its file every time, to warn of it).
    pub fn of(stamp: Stamp, sum: &Checksum, catalog: &Catalog, defs: &[ToolDef]) -> Option<Self> {
        if catalog.tools.len() != defs.len() {
            return None;
        }
        let mut out = Writer::default();
        for n in stamp.0 {
            out.u64(n);
        }
        out.0.extend_from_slice(sum);
        let head = Catalog {
            tools: Vec::new(),
            ..catalog.clone()
        };
        out.string(&serde_json::to_string(&head).ok()?);
        out.count(defs.len());
        for (tool, def) in catalog.tools.iter().zip(defs) {
            let place = tool.place()?;
            out.u64(place.start as u64);
            out.u64(place.len as u64);
            out.string(&def.name);
            match &def.title {
                Some(title) => {
                    out.0.push(1);
                    out.string(title);
                }
                None => out.0.push(0),
            }
            // A tool cleaned of hidden characters: its cleaned text, which is not the file's
            // (a variation selector after an emoji is cleaned without counting as hidden).
            out.u64(def.hidden as u64);
            if def.raw.is(tool) {
                out.0.push(0);
            } else {
                out.0.push(1);
                out.string(&def.raw.text());
            }
        }
        Some(Self {
            bytes: out.0.into(),
            saved: false,
        })
    }

    fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The stamp the file had when it was read.
    pub fn stamp(&self) -> Result<Stamp, DecodeError> {
        let mut r = Reader(self.bytes());
        let mut stamp = [0; 7];
        for n in &mut stamp {
            *n = r.u64()?;
        }
        Ok(Stamp(stamp))
    }

    /// The catalog of `server` recorded here, its tools filed in the file at `path` as it was.
    pub fn recall(&self, path: &Path, server: &str) -> Result<Recalled, DecodeError> {
        let mut r = Reader(self.bytes());
        r.take(7 * 8)?;
        let sum: Checksum = r.take(16)?.try_into().expect("16 bytes");
        let mut catalog = Catalog::parse(path, r.str()?).map_err(|_| DecodeError::Inconsistent)?;
        if catalog.server != server || !catalog.tools.is_empty() {
            return Err(DecodeError::Inconsistent);
        }
        let file = CatalogFile::new(path.to_owned(), sum);
        let count = r.count()?;
        let mut defs = Vec::with_capacity(count.min(r.0.len()));
        catalog.tools.reserve_exact(defs.capacity());
        for _ in 0..count {
            let start = usize::try_from(r.u64()?).map_err(|_| DecodeError::Inconsistent)?;
            let len = usize::try_from(r.u64()?).map_err(|_| DecodeError::Inconsistent)?;
            let name = r.string()?;
            let title = match r.take(1)? {
                [0] => None,
                _ => Some(r.string()?),
            };
            let filed = RawTool::filed(FiledTool::new(file.clone(), start, len, &name));
            let hidden = usize::try_from(r.u64()?).map_err(|_| DecodeError::Inconsistent)?;
            let raw = match r.take(1)? {
                [0] => filed.clone(),
                _ => serde_json::from_str(r.str()?).map_err(|_| DecodeError::Inconsistent)?,
            };
            catalog.tools.push(filed);
            defs.push(ToolDef {
                name,
                title,
                raw,
                hidden,
            });
        }
        if !r.is_done() {
            return Err(DecodeError::Inconsistent);
        }
        Ok((catalog, sum, defs))
    }

    /// Whether it was read from the saved records, not made by this start.
    pub fn is_saved(&self) -> bool {
        self.saved
    }
}

/// The records the last start saved, by server.
#[derive(Default)]
pub struct Known {
    records: HashMap<String, Record>,
}

impl Known {
    /// Where the records of the catalogs in `catalog_dir` are kept.
    pub fn path(catalog_dir: &Path) -> PathBuf {
        crate::library::index_dir(catalog_dir).join(FILE)
    }

    /// The records saved in `catalog_dir`; none if there are none or they cannot be read
    /// (every catalog is then read from its file). Read record by record: the file whole
    /// (13 MB at 100k tools) would be one allocation big enough that, freed, it moves the
    /// allocator's threshold for mapping memory and leaves the process larger.
    pub fn load(catalog_dir: &Path) -> Self {
        let path = Self::path(catalog_dir);
        let file = match std::fs::File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Self::default(),
            Err(e) => {
                tracing::warn!("cannot read {}: {e}; every catalog is read", path.display());
                return Self::default();
            }
        };
        match Self::read(std::io::BufReader::new(file)) {
            Ok(records) => Self { records },
            Err(e) => {
                tracing::warn!("{} is unusable: {e}; every catalog is read", path.display());
                Self::default()
            }
        }
    }

    /// The records in `file` as [`Known::save`] wrote it, its checksum checked.
    fn read(mut file: impl Read) -> std::io::Result<HashMap<String, Record>> {
        let mut bytes = |n: usize| -> std::io::Result<Vec<u8>> {
            let mut bytes = Vec::new();
            file.by_ref().take(n as u64).read_to_end(&mut bytes)?;
            match bytes.len() == n {
                true => Ok(bytes),
                false => Err(std::io::Error::other(DecodeError::Truncated)),
            }
        };
        let count_of =
            |bytes: Vec<u8>| u32::from_le_bytes(bytes.try_into().expect("4 bytes")) as usize;
        let sum = bytes(16)?;
        let mut summer = checksum::Summer::default();
        let mut part = |n: usize| {
            let part = bytes(n)?;
            summer.update(&part);
            Ok::<_, std::io::Error>(part)
        };
        let count = count_of(part(4)?);
        let mut records = HashMap::with_capacity(count.min(1 << 20));
        for _ in 0..count {
            let len = count_of(part(4)?);
            let server = String::from_utf8(part(len)?)
                .map_err(|_| std::io::Error::other(DecodeError::NotUtf8))?;
            let len = count_of(part(4)?);
            let record = Record {
                bytes: part(len)?.into(),
                saved: true,
            };
            records.insert(server, record);
        }
        let at_end = file.read(&mut [0])? == 0;
        if sum != summer.sum() || !at_end {
            return Err(std::io::Error::other(DecodeError::Inconsistent));
        }
        Ok(records)
    }

    /// `server`'s record, if there is one.
    pub fn get(&self, server: &str) -> Option<Record> {
        self.records.get(server).cloned()
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Replaces the records in `catalog_dir` with `records`, written as they are read (at
    /// 100k tools they are 13 MB: a copy in one buffer stayed in the heap after the save).
    pub fn save(catalog_dir: &Path, records: &BTreeMap<String, Record>) -> std::io::Result<()> {
        let mut summer = checksum::Summer::default();
        parts(records, |part| {
            summer.update(part);
            Ok(())
        })?;
        atomic_file::write_with(&Self::path(catalog_dir), Access::OwnerOnly, |file| {
            file.write_all(&summer.sum())?;
            parts(records, |part| file.write_all(part))
        })
    }
}

/// The saved form of `records`, part by part, to `put`: their count, then each server's name
/// and record (as [`Writer::string`] and [`Writer::bytes`] write them).
fn parts(
    records: &BTreeMap<String, Record>,
    mut put: impl FnMut(&[u8]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let count = |n: usize| (n as u32).to_le_bytes();
    put(&count(records.len()))?;
    for (server, record) in records {
        put(&count(server.len()))?;
        put(server.as_bytes())?;
        put(&count(record.bytes().len()))?;
        put(record.bytes())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn catalog(instructions: &str) -> Catalog {
        let tools = vec![
            RawTool::from(
                json!({"name": "a", "title": "Tool A", "description": "does a",
                "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}}}),
            ),
            RawTool::from(json!({"name": "b", "annotations": {"title": "B"}})),
            RawTool::from(json!({"name": "c", "description": "café ☕ 東京"})),
        ];
        let mut catalog = Catalog::new("srv", tools);
        catalog.instructions = Some(instructions.into());
        catalog.server_info = Some(json!({"name": "srv", "version": "1"}));
        catalog.prompts = Some(vec![json!({"name": "p"})].into());
        catalog
    }

    /// Ten seconds after now: every file written by a test has settled.
    fn later() -> SystemTime {
        SystemTime::now() + Duration::from_secs(10)
    }

    fn read(dir: &Path, known: Option<Record>, now: SystemTime) -> super::super::FiledRead {
        Catalog::read_server_filed(dir, "srv", known, now)
            .unwrap()
            .unwrap()
    }

    #[test]
    fn a_record_gives_the_catalog_the_file_gives() {
        let dir = tempfile::tempdir().unwrap();
        catalog("use it").write(dir.path()).unwrap();
        assert!(
            read(dir.path(), None, SystemTime::now()).record.is_none(),
            "a file just written has no record yet"
        );
        let from_file = read(dir.path(), None, later());
        let record = from_file.record.clone().unwrap();
        let (catalog, sum, tools) = record
            .recall(&Catalog::path(dir.path(), "srv"), "srv")
            .unwrap();
        assert_eq!(catalog, from_file.catalog);
        assert_eq!(sum, from_file.sum);
        assert_eq!(tools, from_file.tools);
        assert_eq!(tools[0].title.as_deref(), Some("Tool A"));
        assert_eq!(tools[1].title.as_deref(), Some("B"));
        assert_eq!(tools[2].description(), "café ☕ 東京", "read from the file");
        assert!(
            record
                .recall(&Catalog::path(dir.path(), "srv"), "other")
                .is_err(),
            "another server's record is not taken"
        );
    }

    #[test]
    fn a_file_with_the_records_stamp_is_not_read_and_a_changed_one_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = catalog("from the file").write(dir.path()).unwrap();
        let read_once = read(dir.path(), None, later());
        // A record of other instructions with the file's stamp: taken, so the file was not read.
        let stamp = Stamp::of(&std::fs::metadata(&path).unwrap()).unwrap();
        let other = Catalog {
            instructions: Some("from the record".into()),
            ..read_once.catalog.clone()
        };
        let record = Record::of(stamp, &read_once.sum, &other, &read_once.tools).unwrap();
        let taken = read(dir.path(), Some(record.clone()), later());
        assert_eq!(
            taken.catalog.instructions.as_deref(),
            Some("from the record")
        );
        assert!(taken.record.is_some_and(|r| r.bytes() == record.bytes()));

        // The file written again: its stamp changed, it is read.
        catalog("written again").write(dir.path()).unwrap();
        let read_again = read(dir.path(), Some(record.clone()), later());
        assert_eq!(
            read_again.catalog.instructions.as_deref(),
            Some("written again")
        );
        // Gone: no catalog, whatever the record says.
        std::fs::remove_file(&path).unwrap();
        assert!(
            Catalog::read_server_filed(dir.path(), "srv", Some(record), later())
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn a_tool_cleaned_of_hidden_characters_is_recalled_cleaned_and_a_skipped_one_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let mut written = catalog("x");
        written.tools.push(RawTool::from(
            json!({"name": "d", "description": "x\u{200B}y"}),
        ));
        written.tools.push(RawTool::from(
            json!({"name": "e", "description": "⚠\u{FE0F} careful"}),
        ));
        written.write(dir.path()).unwrap();
        let read_once = read(dir.path(), None, later());
        let path = Catalog::path(dir.path(), "srv");
        let (catalog, _, tools) = read_once.record.unwrap().recall(&path, "srv").unwrap();
        assert_eq!((catalog, &tools), (read_once.catalog, &read_once.tools));
        assert_eq!(
            (tools[3].hidden, tools[3].description()),
            (1, "xy".to_owned())
        );
        assert_eq!(
            tools[4].description(),
            "⚠ careful",
            "cleaned, though not counted"
        );

        written
            .tools
            .push(RawTool::from(json!({"description": "no name"})));
        written.write(dir.path()).unwrap();
        assert!(read(dir.path(), None, later()).record.is_none());
    }

    #[test]
    fn a_stamp_settles_two_seconds_after_its_last_change() {
        let at = |secs: u64| UNIX_EPOCH + Duration::from_secs(secs);
        let stamp = |mtime: u64, ctime: u64| Stamp([10, mtime, 0, ctime, 0, 1, 1]);
        assert!(stamp(100, 100).settled(at(102)));
        assert!(!stamp(100, 100).settled(at(101)));
        assert!(
            !stamp(90, 100).settled(at(101)),
            "changed (ctime) later than modified"
        );
        assert!(!stamp(u64::MAX, 100).settled(at(200)), "before 1970: never");
    }

    #[test]
    fn saved_records_load_back_and_damaged_ones_are_none() {
        let dir = tempfile::tempdir().unwrap();
        catalog("x").write(dir.path()).unwrap();
        let record = read(dir.path(), None, later()).record.unwrap();
        let records = BTreeMap::from([("srv".to_owned(), record.clone())]);
        Known::save(dir.path(), &records).unwrap();
        let known = Known::load(dir.path());
        assert_eq!(known.len(), 1);
        let loaded = known.get("srv").unwrap();
        assert!(loaded.is_saved() && !record.is_saved());
        assert_eq!(loaded.bytes(), record.bytes());
        assert!(known.get("other").is_none());

        let path = Known::path(dir.path());
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert!(Known::load(dir.path()).is_empty(), "a changed byte");
        std::fs::write(&path, &bytes[..20]).unwrap();
        assert!(Known::load(dir.path()).is_empty(), "truncated");
        bytes[last] ^= 1;
        bytes.push(0);
        std::fs::write(&path, &bytes).unwrap();
        assert!(
            Known::load(dir.path()).is_empty(),
            "a byte after the records"
        );
        bytes.pop();
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(Known::load(dir.path()).len(), 1, "as saved again");
        std::fs::remove_file(&path).unwrap();
        assert!(Known::load(dir.path()).is_empty(), "none");
    }
}
