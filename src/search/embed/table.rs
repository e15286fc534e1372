//! The tool vector table: one file per catalog directory holding each distinct embedded text's
//! vector once, keyed by the text's hash, quantized to i8 and read through a memory map.
//!
//! Keyed by content, so servers listing the same tools (copies of one server under other
//! names) share rows and are embedded once; i8 with a scale per row, so 100k tools of 384
//! dimensions are 38 MB of file rather than 150 MB of f32; mapped, so opening it reads nothing
//! and the pages a search touches are the kernel's page cache, shared between processes.
//!
//! A query reads every row's sign bits (48 bytes at 384 dimensions) and scores exactly, from the
//! i8 rows, only the [`RESCORED`] rows nearest by Hamming distance (and the rows the caller
//! names): at 100k tools one pass over the i8 rows reads 38 MB, which took 9-20 ms on the
//! 2-core machine of BENCHMARKS.md, the sign bits 4.8 MB in 0.2-1.4 ms.
//!
//! Format 2 (little endian): `MSVEC\n`, u32 version, u32 length + model id, u32 dimension,
//! u32 count, zero padding to a multiple of 8, then `count` u64 text hashes in ascending order,
//! `count` f32 scales, `count` sign-bit rows of ⌈dimension / 64⌉ u64 (bit j of word k: value
//! 64k + j > 0), and `count` rows of `dimension` i8 (value ≈ scale × i8). The magic and version
//! sit where format 1 (per-server files, [`super::VectorFile`]) has them.

use std::path::Path;

use memmap2::Mmap;

use super::EmbedError;
use crate::atomic_file::{self, Access};

const MAGIC: &[u8; 6] = b"MSVEC\n";
const VERSION: u32 = 2;

/// Rows scored exactly by a query when the table has more: the nearest by Hamming distance of
/// their sign bits (all rows at the distance reaching this number). About 15 times the most
/// tools fusion takes from the vector ranking (132), so the ones it takes are scored exactly.
pub const RESCORED: usize = 2048;

/// Quantized rows, in memory or mapped from a table file.
#[derive(Debug)]
enum Bytes {
    Owned(Vec<u8>),
    Mapped(Mmap),
}

/// Vectors of one model keyed by text hash, sorted by hash, each an i8 row with its scale.
#[derive(Debug)]
pub struct VectorTable {
    model: String,
    dim: usize,
    count: usize,
    bytes: Bytes,
    /// Offsets of the hashes, scales, sign bits and rows in `bytes`.
    hashes_at: usize,
    scales_at: usize,
    bits_at: usize,
    rows_at: usize,
}

/// One quantized vector: `scale` × `row` ≈ the vector.
#[derive(Debug, Clone, PartialEq)]
pub struct QuantizedRow {
    pub scale: f32,
    pub row: Vec<i8>,
}

impl QuantizedRow {
    /// `v` quantized: scale max |x| / 127, each x rounded to the nearest step. A zero or
    /// non-finite vector becomes a zero row.
    pub fn of(v: &[f32]) -> Self {
        let max = v.iter().fold(0.0_f32, |m, x| m.max(x.abs()));
        if max > 0.0 && max.is_finite() {
            let scale = max / 127.0;
            let row = v
                .iter()
                .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8)
                .collect();
            Self { scale, row }
        } else {
            Self {
                scale: 0.0,
                row: vec![0; v.len()],
            }
        }
    }
}

impl VectorTable {
    /// A table of `rows` (text hash, row of `dim` values) for `model`, in memory; rows of
    /// another dimension are left out, and of equal hashes the first is kept.
    pub fn new(
        model: &str,
        dim: usize,
        rows: impl IntoIterator<Item = (u64, QuantizedRow)>,
    ) -> Self {
        let mut rows: Vec<(u64, QuantizedRow)> = rows
            .into_iter()
            .filter(|(_, r)| r.row.len() == dim)
            .collect();
        rows.sort_by_key(|(hash, _)| *hash);
        rows.dedup_by_key(|(hash, _)| *hash);
        let mut out = header(model, dim, rows.len());
        let hashes_at = out.len();
        for (hash, _) in &rows {
            out.extend_from_slice(&hash.to_le_bytes());
        }
        let scales_at = out.len();
        for (_, r) in &rows {
            out.extend_from_slice(&r.scale.to_le_bytes());
        }
        let bits_at = out.len();
        for (_, r) in &rows {
            for word in sign_bits(r.row.iter().map(|&q| q > 0)) {
                out.extend_from_slice(&word.to_le_bytes());
            }
        }
        let rows_at = out.len();
        for (_, r) in &rows {
            out.extend(r.row.iter().map(|&q| q as u8));
        }
        Self {
            model: model.to_owned(),
            dim,
            count: rows.len(),
            bytes: Bytes::Owned(out),
            hashes_at,
            scales_at,
            bits_at,
            rows_at,
        }
    }

    /// Maps the table file at `path`; `None` if there is none. The file is replaced whole by
    /// [`Self::save`] (a rename), never written in place, so a mapping stays valid.
    pub fn open(path: &Path) -> Result<Option<Self>, EmbedError> {
        let file = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(EmbedError::Io {
                    path: path.to_owned(),
                    source,
                });
            }
        };
        // SAFETY: meta-server replaces table files by renaming a new file over them and never
        // writes one in place; a file truncated by another program under the map is outside
        // that contract (as for tantivy's mapped index).
        let map = unsafe { Mmap::map(&file) }.map_err(|source| EmbedError::Io {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(Bytes::Mapped(map))
            .map(Some)
            .map_err(|reason| EmbedError::Format {
                path: path.to_owned(),
                reason,
            })
    }

    /// Writes the table to `path` atomically (a temporary file, then a rename); [`Self::open`]
    /// maps it.
    pub fn save(&self, path: &Path) -> Result<(), EmbedError> {
        atomic_file::write(path, self.as_bytes(), Access::OwnerOnly).map_err(|source| {
            EmbedError::Io {
                path: path.to_owned(),
                source,
            }
        })
    }

    fn as_bytes(&self) -> &[u8] {
        match &self.bytes {
            Bytes::Owned(b) => b,
            Bytes::Mapped(m) => m,
        }
    }

    fn parse(bytes: Bytes) -> Result<Self, String> {
        let b: &[u8] = match &bytes {
            Bytes::Owned(b) => b,
            Bytes::Mapped(m) => m,
        };
        let too_short = || "truncated".to_owned();
        if b.len() < MAGIC.len() + 4 {
            return Err("too short".into());
        }
        if &b[..MAGIC.len()] != MAGIC {
            return Err("not a meta-server vector file".into());
        }
        let u32_at = |at: usize| -> Option<u32> {
            Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
        };
        let version = u32_at(6).ok_or_else(too_short)?;
        if version != VERSION {
            return Err(format!(
                "format {version}; this meta-server reads format {VERSION} here"
            ));
        }
        let model_len = u32_at(10).ok_or_else(too_short)? as usize;
        let model = b
            .get(14..14 + model_len)
            .ok_or_else(too_short)
            .and_then(|m| String::from_utf8(m.to_vec()).map_err(|_| "model id not UTF-8".into()))?;
        let dim = u32_at(14 + model_len).ok_or_else(too_short)? as usize;
        let count = u32_at(18 + model_len).ok_or_else(too_short)? as usize;
        let hashes_at = (22 + model_len).next_multiple_of(8);
        let scales_at = hashes_at + count * 8;
        let bits_at = scales_at + count * 4;
        let rows_at = bits_at + count * words(dim) * 8;
        let end = rows_at + count * dim;
        if b.len() < end {
            return Err(too_short());
        }
        if b.len() > end {
            return Err("trailing bytes".into());
        }
        let table = Self {
            model,
            dim,
            count,
            bytes,
            hashes_at,
            scales_at,
            bits_at,
            rows_at,
        };
        if (1..count).any(|i| table.hash(i - 1) >= table.hash(i)) {
            return Err("hashes out of order".into());
        }
        Ok(table)
    }

    /// The model that computed these vectors.
    pub fn model(&self) -> &str {
        &self.model
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The text hash of row `i`.
    pub fn hash(&self, i: usize) -> u64 {
        let at = self.hashes_at + i * 8;
        u64::from_le_bytes(self.as_bytes()[at..at + 8].try_into().expect("8 bytes"))
    }

    /// The scale of row `i`.
    pub fn scale(&self, i: usize) -> f32 {
        let at = self.scales_at + i * 4;
        f32::from_le_bytes(self.as_bytes()[at..at + 4].try_into().expect("4 bytes"))
    }

    /// Every row, `dim` values each, back to back.
    pub fn rows(&self) -> &[i8] {
        let bytes = &self.as_bytes()[self.rows_at..self.rows_at + self.count * self.dim];
        // SAFETY: i8 and u8 have the same size and alignment, and every bit pattern is valid
        // for both.
        unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<i8>(), bytes.len()) }
    }

    /// Row `i` as stored.
    pub fn quantized(&self, i: usize) -> QuantizedRow {
        QuantizedRow {
            scale: self.scale(i),
            row: self.rows()[i * self.dim..(i + 1) * self.dim].to_vec(),
        }
    }

    /// The row of the text with hash `hash`, if the table has it (a binary search).
    pub fn find(&self, hash: u64) -> Option<u32> {
        let (mut lo, mut hi) = (0, self.count);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.hash(mid).cmp(&hash) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(mid as u32),
            }
        }
        None
    }

    /// The cosine of row `i` with `query`, from its i8 values.
    fn exact(&self, i: usize, query: &[f32]) -> f32 {
        self.scale(i) * super::dot(&self.rows()[i * self.dim..(i + 1) * self.dim], query)
    }

    /// The Hamming distance of row `i`'s sign bits to `query`'s.
    fn distance(&self, i: usize, query: &[u64]) -> u32 {
        let at = self.bits_at + i * query.len() * 8;
        self.as_bytes()[at..at + query.len() * 8]
            .chunks_exact(8)
            .zip(query)
            .map(|(word, q)| {
                (u64::from_le_bytes(word.try_into().expect("8 bytes")) ^ q).count_ones()
            })
            .sum()
    }

    /// The cosine of every row with `query` (both L2-normalised), by row; zeros for a query
    /// of another dimension. Exact (within 0.001) for the rows `exact` names and for the
    /// [`RESCORED`] rows nearest by sign bits; the others get cos(π × distance / dimension),
    /// the angle their sign bits suggest, capped at the lowest exact cosine of those, so none
    /// ranks above a row scored exactly. A table of at most [`RESCORED`] rows is scored
    /// exactly.
    pub fn scores(&self, query: &[f32], exact: &[u32]) -> Vec<f32> {
        if self.dim == 0 || query.len() != self.dim {
            return vec![0.0; self.count];
        }
        if self.count <= RESCORED {
            return (0..self.count).map(|i| self.exact(i, query)).collect();
        }
        let bits: Vec<u64> = sign_bits(query.iter().map(|&x| x > 0.0)).collect();
        let distances: Vec<u32> = (0..self.count).map(|i| self.distance(i, &bits)).collect();
        // The distance within which RESCORED rows lie, from a histogram: no sort.
        let mut histogram = vec![0_usize; self.dim + 1];
        for &d in &distances {
            histogram[d as usize] += 1;
        }
        let mut within = 0;
        let cut = histogram
            .iter()
            .position(|n| {
                within += n;
                within >= RESCORED
            })
            .unwrap_or(self.dim) as u32;
        let angle: Vec<f32> = (0..=self.dim)
            .map(|d| (std::f32::consts::PI * d as f32 / self.dim as f32).cos())
            .collect();
        let mut floor = f32::INFINITY;
        let mut scores: Vec<f32> = distances
            .iter()
            .enumerate()
            .map(|(i, &d)| {
                if d <= cut {
                    let s = self.exact(i, query);
                    floor = floor.min(s);
                    s
                } else {
                    f32::NAN
                }
            })
            .collect();
        for (s, &d) in scores.iter_mut().zip(&distances) {
            if d > cut {
                *s = angle[d as usize].min(floor);
            }
        }
        for &r in exact {
            if let Some(s) = scores.get_mut(r as usize) {
                *s = self.exact(r as usize, query);
            }
        }
        scores
    }
}

/// 64-bit words of `bits` (bit j of word k: item 64k + j), the last one zero-padded.
fn sign_bits(bits: impl Iterator<Item = bool>) -> impl Iterator<Item = u64> {
    let bits: Vec<bool> = bits.collect();
    let words: Vec<u64> = bits
        .chunks(64)
        .map(|chunk| {
            chunk
                .iter()
                .enumerate()
                .fold(0_u64, |w, (j, &b)| w | (u64::from(b) << j))
        })
        .collect();
    words.into_iter()
}

/// Sign-bit words per row of `dim` values.
fn words(dim: usize) -> usize {
    dim.div_ceil(64)
}

impl Default for VectorTable {
    /// No rows, no model.
    fn default() -> Self {
        Self::new("", 0, [])
    }
}

impl PartialEq for VectorTable {
    /// Same bytes: same model, dimension, hashes and rows.
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

/// The header up to the hashes, padded to a multiple of 8.
fn header(model: &str, dim: usize, count: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + model.len() + count * (12 + words(dim) * 8 + dim));
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(model.len() as u32).to_le_bytes());
    out.extend_from_slice(model.as_bytes());
    out.extend_from_slice(&(dim as u32).to_le_bytes());
    out.extend_from_slice(&(count as u32).to_le_bytes());
    out.resize(out.len().next_multiple_of(8), 0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(dim: usize, seed: f32) -> Vec<f32> {
        let v: Vec<f32> = (0..dim).map(|i| (i as f32 * seed).sin()).collect();
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.into_iter().map(|x| x / norm).collect()
    }

    fn table() -> VectorTable {
        VectorTable::new(
            "m",
            3,
            [
                (9, QuantizedRow::of(&[0.5, -1.25, 3.0])),
                (2, QuantizedRow::of(&[0.0, 1.0, 0.0])),
                (5, QuantizedRow::of(&[0.0, 0.0, 0.0])),
                (7, QuantizedRow::of(&[1.0, 2.0])),
            ],
        )
    }

    #[test]
    fn tables_round_trip_through_a_mapped_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join(".tool-vectors");
        assert!(VectorTable::open(&path).unwrap().is_none());
        table().save(&path).unwrap();
        let read = VectorTable::open(&path).unwrap().unwrap();
        assert!(matches!(read.bytes, Bytes::Mapped(_)));
        assert_eq!((read.model(), read.dim(), read.len()), ("m", 3, 3));
        assert_eq!(read.as_bytes(), table().as_bytes());
        // Sorted by hash; the row of another dimension is left out.
        assert_eq!((read.hash(0), read.hash(1), read.hash(2)), (2, 5, 9));
        assert_eq!(read.find(9), Some(2));
        assert_eq!(read.find(7), None);
        assert_eq!(read.quantized(2), QuantizedRow::of(&[0.5, -1.25, 3.0]));
        assert_eq!(read.quantized(1).row, [0, 0, 0]);
        let scores = read.scores(&[0.0, 1.0, 0.0], &[]);
        assert!(
            (scores[0] - 1.0).abs() < 1e-6 && scores[1] == 0.0,
            "{scores:?}"
        );
        assert!((scores[2] + 1.25).abs() < 0.02, "{scores:?}");
    }

    #[test]
    fn quantized_cosines_are_within_a_thousandth_of_f32() {
        let (a, q) = (unit(384, 0.37), unit(384, 0.41));
        let t = VectorTable::new("m", 384, [(1, QuantizedRow::of(&a))]);
        let exact: f32 = a.iter().zip(&q).map(|(x, y)| x * y).sum();
        assert!((t.scores(&q, &[])[0] - exact).abs() < 1e-3);
    }

    #[test]
    fn a_big_table_scores_the_nearest_rows_exactly_and_ranks_them_first() {
        let (n, dim) = (3 * RESCORED, 384);
        // Seeded pseudo-random unit vectors (a 64-bit LCG).
        let mut state = 42_u64;
        let mut random = || {
            let v: Vec<f32> = (0..dim)
                .map(|_| {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (state >> 40) as f32 / (1_u64 << 24) as f32 - 0.5
                })
                .collect();
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.into_iter().map(|x| x / norm).collect::<Vec<f32>>()
        };
        // Like a model's vectors, a few tools are near the query (every 100th row: the
        // query plus noise, cosines 0.4-0.9), the rest unrelated to it.
        let query = random();
        let vectors: Vec<Vec<f32>> = (0..n)
            .map(|i| {
                let noise = random();
                if i % 100 != 0 {
                    return noise;
                }
                let k = 0.5 + (i / 100) as f32 / 30.0;
                let v: Vec<f32> = query.iter().zip(&noise).map(|(q, e)| q + k * e).collect();
                let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                v.into_iter().map(|x| x / norm).collect()
            })
            .collect();
        let t = VectorTable::new(
            "m",
            dim,
            vectors
                .iter()
                .enumerate()
                .map(|(i, v)| (i as u64, QuantizedRow::of(v))),
        );
        let cosine = |i: usize| {
            vectors[i]
                .iter()
                .zip(&query)
                .map(|(x, y)| x * y)
                .sum::<f32>()
        };
        let mut by_cosine: Vec<usize> = (0..n).collect();
        by_cosine.sort_by(|&a, &b| cosine(b).total_cmp(&cosine(a)));
        let far = by_cosine[n - 1];
        let scores = t.scores(&query, &[far as u32]);
        // The near tools are scored exactly and rank first.
        for &i in &by_cosine[..50] {
            assert!((scores[i] - cosine(i)).abs() < 1e-3, "row {i}");
        }
        let mut ranked: Vec<usize> = (0..n).collect();
        ranked.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
        let top = |order: &[usize]| {
            let mut top = order[..50].to_vec();
            top.sort_unstable();
            top
        };
        assert_eq!(top(&ranked), top(&by_cosine));
        // A row asked for is exact wherever it ranks.
        assert!((scores[far] - cosine(far)).abs() < 1e-3);
        // About RESCORED rows are scored exactly; the estimated ones rank below the near ones.
        let estimated: Vec<usize> = (0..n)
            .filter(|&i| (scores[i] - cosine(i)).abs() >= 1e-3)
            .collect();
        assert!(!estimated.is_empty() && n - estimated.len() >= RESCORED);
        let near = by_cosine[..50]
            .iter()
            .map(|&i| scores[i])
            .fold(f32::MAX, f32::min);
        assert!(estimated.iter().all(|&i| scores[i] <= near));
        // A table of at most RESCORED rows is scored exactly.
        let small = VectorTable::new(
            "m",
            dim,
            vectors[..RESCORED]
                .iter()
                .enumerate()
                .map(|(i, v)| (i as u64, QuantizedRow::of(v))),
        );
        let scores = small.scores(&query, &[]);
        assert!((0..RESCORED).all(|i| (scores[i] - cosine(i)).abs() < 1e-3));
    }

    #[test]
    fn damaged_or_other_format_tables_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".tool-vectors");
        let bytes = table().as_bytes().to_vec();
        let error = |bytes: &[u8]| {
            std::fs::write(&path, bytes).unwrap();
            VectorTable::open(&path).unwrap_err().to_string()
        };
        assert!(error(&bytes[..bytes.len() - 1]).contains("truncated"));
        assert!(error(&[&bytes[..], &[0]].concat()).contains("trailing bytes"));
        let mut v1 = bytes.clone();
        v1[6] = 1;
        assert!(error(&v1).contains("format 1"));
        assert!(error(b"{}").contains("too short"));
        // Two rows whose hashes are swapped cannot be searched.
        let mut swapped = bytes.clone();
        let at = VectorTable::parse(Bytes::Owned(bytes)).unwrap().hashes_at;
        swapped[at] = 200;
        assert!(error(&swapped).contains("out of order"));
    }
}
