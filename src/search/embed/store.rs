//! Vectors keyed by name: the per-server vector files of format 1 (read to carry users' vectors
//! into the [`VectorTable`]) and the learned queries' file; and [`DocVectors`], the tool
//! vectors in search-index order searched at query time.
//!
//! File format v1 (little endian): `MSVEC\n`, u32 version, u32 length + model id, u32 dimension,
//! u32 count, then per tool: u32 length + key, u64 text hash, `dimension` f32.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::EmbedError;
use super::table::{QuantizedRow, VectorTable};
use crate::atomic_file::{self, Access};

const MAGIC: &[u8; 6] = b"MSVEC\n";
const VERSION: u32 = 1;

/// Vectors of one server's tools, keyed by qualified name, for one model.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct VectorFile {
    pub model: String,
    pub dim: usize,
    /// key -> (hash of the embedded text, vector).
    pub vectors: HashMap<String, (u64, Vec<f32>)>,
}

/// Hash of an embedded text: a changed description makes the stored vector stale.
pub fn text_hash(text: &str) -> u64 {
    let digest = Sha256::digest(text.as_bytes());
    u64::from_le_bytes(digest[..8].try_into().expect("8 bytes"))
}

impl VectorFile {
    /// Reads `path`; `None` if there is no file.
    pub fn load(path: &Path) -> Result<Option<Self>, EmbedError> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(EmbedError::Io {
                    path: path.to_owned(),
                    source,
                });
            }
        };
        let bad = |reason: &str| EmbedError::Format {
            path: path.to_owned(),
            reason: reason.to_owned(),
        };
        let mut r = Reader(&bytes);
        if r.take(MAGIC.len()).ok_or_else(|| bad("too short"))? != MAGIC {
            return Err(bad("not a meta-server vector file"));
        }
        let version = r.u32().ok_or_else(|| bad("too short"))?;
        if version != VERSION {
            return Err(bad(&format!(
                "format {version}; this meta-server reads format {VERSION}"
            )));
        }
        let truncated = || bad("truncated");
        let model = r.string().ok_or_else(truncated)?;
        let dim = r.u32().ok_or_else(truncated)? as usize;
        let count = r.u32().ok_or_else(truncated)? as usize;
        let mut vectors = HashMap::with_capacity(count.min(1 << 20));
        for _ in 0..count {
            let key = r.string().ok_or_else(truncated)?;
            let hash = r.u64().ok_or_else(truncated)?;
            let raw = r.take(dim * 4).ok_or_else(truncated)?;
            let v = raw
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
                .collect();
            vectors.insert(key, (hash, v));
        }
        if !r.0.is_empty() {
            return Err(bad("trailing bytes"));
        }
        Ok(Some(Self {
            model,
            dim,
            vectors,
        }))
    }

    /// Writes `path` atomically (a temporary file in the same directory, then a rename).
    pub fn save(&self, path: &Path) -> Result<(), EmbedError> {
        let io = |source| EmbedError::Io {
            path: path.to_owned(),
            source,
        };
        let mut out = Vec::with_capacity(32 + self.vectors.len() * (self.dim * 4 + 64));
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        put_str(&mut out, &self.model);
        out.extend_from_slice(&(self.dim as u32).to_le_bytes());
        out.extend_from_slice(&(self.vectors.len() as u32).to_le_bytes());
        let mut keys: Vec<&String> = self.vectors.keys().collect();
        keys.sort();
        for key in keys {
            let (hash, v) = &self.vectors[key];
            put_str(&mut out, key);
            out.extend_from_slice(&hash.to_le_bytes());
            for x in v {
                out.extend_from_slice(&x.to_le_bytes());
            }
        }
        atomic_file::write(path, &out, Access::OwnerOnly).map_err(io)
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn string(&mut self) -> Option<String> {
        let n = self.u32()? as usize;
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }
}

/// How many of `tools` (key, embedded text) [`update_vectors`] would embed: those without a
/// vector of `model` for their current text in `old`.
pub fn missing(old: Option<&VectorFile>, tools: &[(String, String)], model: &str) -> usize {
    let old = old.filter(|f| f.model == model);
    tools
        .iter()
        .filter(|(key, text)| {
            old.and_then(|f| f.vectors.get(key))
                .is_none_or(|(hash, _)| *hash != text_hash(text))
        })
        .count()
}

/// The vectors of `tools` (key, embedded text) for `model`: reused from `old` where its model
/// and the text hash match, computed by `embed` otherwise (one call for all stale texts).
/// Returns the new file (only these tools) and how many were embedded.
pub fn update_vectors(
    old: Option<VectorFile>,
    tools: &[(String, String)],
    model: &str,
    embed: impl FnOnce(&[String]) -> Result<Vec<Vec<f32>>, EmbedError>,
) -> Result<(VectorFile, usize), EmbedError> {
    let mut old = old.filter(|f| f.model == model).unwrap_or_default();
    let mut file = VectorFile {
        model: model.to_owned(),
        dim: old.dim,
        vectors: HashMap::with_capacity(tools.len()),
    };
    let mut todo: Vec<(&String, u64, String)> = Vec::new();
    for (key, text) in tools {
        let hash = text_hash(text);
        match old.vectors.remove(key) {
            Some((h, v)) if h == hash => {
                file.vectors.insert(key.clone(), (hash, v));
            }
            _ => todo.push((key, hash, text.clone())),
        }
    }
    let texts: Vec<String> = todo.iter().map(|(_, _, t)| t.clone()).collect();
    let fresh = if texts.is_empty() {
        Vec::new()
    } else {
        embed(&texts)?
    };
    for ((key, hash, _), v) in todo.iter().zip(fresh) {
        file.dim = v.len();
        file.vectors.insert((*key).clone(), (*hash, v));
    }
    Ok((file, texts.len()))
}

/// Tool vectors in search-index document order: document `i` has row `rows[i]` of a
/// [`VectorTable`] (shared: copies of one tool share a row). A document without a vector has
/// none (cosine 0 with any query).
///
/// Rows are i8 with one scale each (value ≈ scale × i8): scoring every tool with f32 rows was
/// bound by memory reads (15 MB at 10k tools); a quarter of the bytes took the cosine pass
/// from ~1.4 ms to ~0.9 ms per query. The error is about 0.001 on a cosine.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DocVectors {
    pub dim: usize,
    table: Arc<VectorTable>,
    /// Per document, its row in `table`, or [`NO_ROW`].
    rows: Vec<u32>,
}

/// The row of a document without a vector.
const NO_ROW: u32 = u32::MAX;

impl DocVectors {
    /// Rows for `keys` (in document order) looked up in `vectors`.
    pub fn new(dim: usize, keys: &[String], vectors: &HashMap<String, Vec<f32>>) -> Self {
        Self::of_rows(
            dim,
            keys.iter().map(|key| vectors.get(key).map(Vec::as_slice)),
        )
    }

    /// One row per item of `rows` (none for `None` or a vector of another dimension), in a
    /// table of their own in memory.
    pub fn of_rows<'a>(dim: usize, rows: impl ExactSizeIterator<Item = Option<&'a [f32]>>) -> Self {
        let mut quantized = Vec::with_capacity(rows.len());
        let mut of = Vec::with_capacity(rows.len());
        for v in rows {
            match v.filter(|v| v.len() == dim) {
                Some(v) => {
                    of.push(quantized.len() as u32);
                    quantized.push((quantized.len() as u64, QuantizedRow::of(v)));
                }
                None => of.push(NO_ROW),
            }
        }
        Self {
            dim,
            table: Arc::new(VectorTable::new("", dim, quantized)),
            rows: of,
        }
    }

    /// Document `i` has row `rows[i]` of `table` (`None`: no vector).
    pub fn of_table(table: Arc<VectorTable>, rows: impl IntoIterator<Item = Option<u32>>) -> Self {
        let count = table.len() as u32;
        Self {
            dim: table.dim(),
            rows: rows
                .into_iter()
                .map(|r| r.filter(|&r| r < count).unwrap_or(NO_ROW))
                .collect(),
            table,
        }
    }

    /// The same vectors in the order of `new_keys`: each row found by its key in `old_keys`
    /// (this index's order), none for a key it does not have. Cheap (the table is shared): a
    /// library whose index re-ordered some tools keeps its vectors.
    pub fn reordered(&self, old_keys: &[String], new_keys: &[String]) -> Self {
        let at: HashMap<&str, usize> = old_keys
            .iter()
            .enumerate()
            .filter(|(_, k)| !k.is_empty())
            .map(|(i, k)| (k.as_str(), i))
            .collect();
        Self {
            dim: self.dim,
            table: self.table.clone(),
            rows: new_keys
                .iter()
                .map(|key| {
                    at.get(key.as_str())
                        .and_then(|&j| self.rows.get(j).copied())
                        .unwrap_or(NO_ROW)
                })
                .collect(),
        }
    }

    /// Number of documents.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Documents with a vector.
    pub fn with_vector(&self) -> usize {
        self.rows.iter().filter(|&&r| r != NO_ROW).count()
    }

    /// Row `i` as f32 (zeros for a document without a vector).
    pub fn row(&self, i: usize) -> impl Iterator<Item = f32> + '_ {
        let r = self.rows[i];
        let (scale, row) = if r == NO_ROW {
            (0.0, None)
        } else {
            let r = r as usize;
            let rows = self.table.rows();
            (
                self.table.scale(r),
                Some(&rows[r * self.dim..(r + 1) * self.dim]),
            )
        };
        (0..self.dim).map(move |j| row.map_or(0.0, |row| scale * f32::from(row[j])))
    }

    /// Cosine of every document with `query` (both L2-normalised): each row of the table
    /// scored once, whatever number of documents share it; exact for the documents `exact`
    /// names and the nearest ones, estimated from sign bits for the rest of a big table
    /// ([`VectorTable::scores`]).
    pub fn scores(&self, query: &[f32], exact: &[u32]) -> Vec<f32> {
        if self.dim == 0 || query.len() != self.dim {
            return vec![0.0; self.rows.len()];
        }
        let exact: Vec<u32> = exact
            .iter()
            .filter_map(|&i| self.rows.get(i as usize).copied())
            .filter(|&r| r != NO_ROW)
            .collect();
        let by_row = self.table.scores(query, &exact);
        self.rows
            .iter()
            .map(|&r| by_row.get(r as usize).copied().unwrap_or(0.0))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> VectorFile {
        let mut vectors = HashMap::new();
        vectors.insert("s__a".to_owned(), (text_hash("a"), vec![0.5, -1.25, 3.0]));
        vectors.insert(
            "s__b".to_owned(),
            (text_hash("b"), vec![0.0, 1.0, f32::MIN]),
        );
        VectorFile {
            model: "m".into(),
            dim: 3,
            vectors,
        }
    }

    #[test]
    fn vector_files_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("s.vectors");
        assert_eq!(VectorFile::load(&path).unwrap(), None);
        file().save(&path).unwrap();
        assert_eq!(VectorFile::load(&path).unwrap(), Some(file()));
        // Saving again replaces the file whole.
        let mut smaller = file();
        smaller.vectors.remove("s__b");
        smaller.save(&path).unwrap();
        assert_eq!(VectorFile::load(&path).unwrap(), Some(smaller));
    }

    #[test]
    fn damaged_or_newer_files_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.vectors");
        file().save(&path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        assert!(
            VectorFile::load(&path)
                .unwrap_err()
                .to_string()
                .contains("truncated")
        );
        let mut newer = bytes.clone();
        newer[6] = 2;
        std::fs::write(&path, &newer).unwrap();
        assert!(
            VectorFile::load(&path)
                .unwrap_err()
                .to_string()
                .contains("format 2")
        );
        std::fs::write(&path, b"{}").unwrap();
        assert!(VectorFile::load(&path).is_err());
    }

    #[test]
    fn only_new_or_changed_tools_are_embedded() {
        let tools = |b: &str| {
            vec![
                ("s__a".to_owned(), "a".to_owned()),
                ("s__b".to_owned(), b.to_owned()),
            ]
        };
        let fake = |texts: &[String]| -> Result<Vec<Vec<f32>>, EmbedError> {
            Ok(texts.iter().map(|t| vec![t.len() as f32; 3]).collect())
        };
        let (first, n) = update_vectors(None, &tools("b"), "m", fake).unwrap();
        assert_eq!(n, 2);
        let (same, n) = update_vectors(Some(first.clone()), &tools("b"), "m", |_: &[String]| {
            panic!("nothing is stale")
        })
        .unwrap();
        assert_eq!((n, &same), (0, &first));
        // A changed description is re-embedded; the unchanged tool keeps its vector.
        let (changed, n) =
            update_vectors(Some(first.clone()), &tools("b, longer"), "m", fake).unwrap();
        assert_eq!(n, 1);
        assert_eq!(changed.vectors["s__a"], first.vectors["s__a"]);
        assert_eq!(changed.vectors["s__b"].1, vec![9.0; 3]);
        // Another model makes every vector stale; removed tools are dropped.
        let (other, n) = update_vectors(Some(first), &tools("b")[..1], "m2", fake).unwrap();
        assert_eq!((n, other.model.as_str(), other.vectors.len()), (1, "m2", 1));
    }

    #[test]
    fn doc_vectors_follow_document_order_with_zero_rows_for_missing() {
        let mut v = HashMap::new();
        v.insert("b".to_owned(), vec![0.0, 1.0]);
        v.insert("a".to_owned(), vec![1.0, 0.0]);
        let keys = ["a".to_owned(), "b".to_owned(), "c".to_owned()];
        let docs = DocVectors::new(2, &keys, &v);
        let scores = docs.scores(&[0.6, 0.8], &[]);
        assert!((scores[0] - 0.6).abs() < 1e-6 && (scores[1] - 0.8).abs() < 1e-6);
        assert_eq!(scores[2], 0.0);
        assert_eq!(docs.scores(&[1.0], &[]), [0.0, 0.0, 0.0], "wrong dimension");
    }

    #[test]
    fn quantised_rows_keep_cosines_within_a_thousandth() {
        let dim = 384;
        let unit = |seed: f32| {
            let v: Vec<f32> = (0..dim).map(|i| (i as f32 * seed).sin()).collect();
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.into_iter().map(|x| x / norm).collect::<Vec<f32>>()
        };
        let (a, b, q) = (unit(0.37), unit(1.3), unit(0.41));
        let keys = ["a".to_owned(), "b".to_owned()];
        let map = HashMap::from([("a".to_owned(), a.clone()), ("b".to_owned(), b.clone())]);
        let scores = DocVectors::new(dim, &keys, &map).scores(&q, &[]);
        for (score, row) in scores.iter().zip([&a, &b]) {
            assert!((score - super::super::dot(row, &q)).abs() < 1e-3);
        }
    }
}
