//! What the search index knows besides tantivy's postings: each document's key, server and
//! distinct terms by ordinal (the `ord` fast field), exact names, and document frequencies
//! over all fields together, for coverage and IDF weights.

use foldhash::{HashMap, HashMapExt};

use crate::binary::{DecodeError, Reader, Writer};
use smallvec::SmallVec;

/// Document ordinals of a name: almost always one or two, kept inline (at 100k tools the
/// 400k names' lists were 22 MB as `Vec`s, a heap block each).
pub(super) type Ords = SmallVec<[u32; 2]>;

/// Side tables of a [`super::SearchIndex`], indexed by document ordinal. A removed document
/// keeps its ordinal with an empty key, so ordinals stored in tantivy stay valid.
#[derive(Clone, Default)]
pub(super) struct Tables {
    pub keys: Vec<String>,
    pub servers: Vec<String>,
    /// Lower-cased tool name and qualified name -> document ordinals, for exact-name lookups.
    pub names: HashMap<String, Ords>,
    /// The same names squashed (see [`squash`]) -> their [`letters`] and document ordinals,
    /// for did-you-mean.
    pub squashed: HashMap<String, (u64, Ords)>,
    /// Analyzed term -> term id. Ids are never reused.
    pub vocab: HashMap<String, u32>,
    /// Per term id: number of live tools containing the term in any field.
    pub df: Vec<u32>,
    /// Sorted term ids of each tool, all fields together (its learned queries included).
    pub doc_terms: Vec<Vec<u32>>,
    /// Whether each tool has learned queries (its `learned` field is not empty).
    pub learned: Vec<bool>,
    /// Live documents.
    pub live: usize,
}

impl Tables {
    /// Records a document as the next ordinal, which it returns. `terms` are its analyzed
    /// words in any order, duplicates allowed; `names` its exact names; `learned` whether it
    /// has learned queries.
    pub fn add<'a>(
        &mut self,
        key: &str,
        server: &str,
        names: impl IntoIterator<Item = &'a str>,
        terms: impl IntoIterator<Item = String>,
        learned: bool,
    ) -> u32 {
        let ord = self.keys.len() as u32;
        self.keys.push(key.to_owned());
        self.servers.push(server.to_owned());
        let add_ord = |ords: &mut Ords| {
            if !ords.contains(&ord) {
                ords.push(ord);
            }
        };
        for name in names {
            add_ord(self.names.entry(name.to_lowercase()).or_default());
            let squashed = squash(name);
            let letters = letters(&squashed);
            let (_, ords) = self
                .squashed
                .entry(squashed)
                .or_insert((letters, Ords::new()));
            add_ord(ords);
        }
        let mut ids: Vec<u32> = terms
            .into_iter()
            .map(|term| {
                let next = self.vocab.len() as u32;
                *self.vocab.entry(term).or_insert(next)
            })
            .collect();
        ids.sort_unstable();
        ids.dedup();
        self.df.resize(self.vocab.len(), 0);
        for &id in &ids {
            self.df[id as usize] += 1;
        }
        self.doc_terms.push(ids);
        self.learned.push(learned);
        self.live += 1;
        ord
    }

    /// Ordinals of the live documents of `server`, ascending.
    pub fn ords_of(&self, server: &str) -> Vec<u32> {
        (0..self.keys.len() as u32)
            .filter(|&i| self.is_live(i) && self.servers[i as usize] == server)
            .collect()
    }

    /// The ordinal of the live document `key`, if any.
    pub fn ord_of(&self, key: &str) -> Option<u32> {
        self.names
            .get(&key.to_lowercase())?
            .iter()
            .copied()
            .find(|&o| self.keys[o as usize] == key)
    }

    /// Live documents with learned queries.
    pub fn learned_live(&self) -> usize {
        (0..self.keys.len())
            .filter(|&i| self.learned[i] && self.is_live(i as u32))
            .count()
    }

    /// Forgets every document of `server`; returns how many there were.
    pub fn remove_server(&mut self, server: &str) -> usize {
        let ords = self.ords_of(server);
        self.remove(&ords)
    }

    /// Forgets the documents `keys` (those that are live); returns how many there were.
    pub fn remove_keys<'a>(&mut self, keys: impl IntoIterator<Item = &'a str>) -> usize {
        let mut ords: Vec<u32> = keys.into_iter().filter_map(|k| self.ord_of(k)).collect();
        ords.sort_unstable();
        ords.dedup();
        self.remove(&ords)
    }

    /// Forgets the documents at `ords` (sorted, live).
    fn remove(&mut self, ords: &[u32]) -> usize {
        for &ord in ords {
            let i = ord as usize;
            for &id in &self.doc_terms[i] {
                self.df[id as usize] -= 1;
            }
            self.doc_terms[i] = Vec::new();
            self.keys[i] = String::new();
            self.servers[i] = String::new();
            self.learned[i] = false;
        }
        let kept = |list: &mut Ords| {
            list.retain(|o| ords.binary_search(o).is_err());
            !list.is_empty()
        };
        self.names.retain(|_, list| kept(list));
        self.squashed.retain(|_, (_, list)| kept(list));
        self.live -= ords.len();
        ords.len()
    }

    pub fn is_live(&self, ord: u32) -> bool {
        !self.keys[ord as usize].is_empty()
    }

    /// Ordinals that no longer hold a document.
    pub fn removed(&self) -> usize {
        self.keys.len() - self.live
    }

    /// The tables in a compact binary form (little-endian counts, length-prefixed strings);
    /// maps in key order, so equal tables give equal bytes. Read back by [`Self::decode`].
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Writer(Vec::with_capacity(1 << 20));
        out.strings(&self.keys);
        out.strings(&self.servers);
        let mut names: Vec<_> = self.names.iter().collect();
        names.sort_unstable_by(|a, b| a.0.cmp(b.0));
        out.count(names.len());
        for (name, ords) in names {
            out.string(name);
            out.ords(ords);
        }
        let mut squashed: Vec<_> = self.squashed.iter().collect();
        squashed.sort_unstable_by(|a, b| a.0.cmp(b.0));
        out.count(squashed.len());
        for (name, (letters, ords)) in squashed {
            out.string(name);
            out.u64(*letters);
            out.ords(ords);
        }
        let mut vocab = vec![""; self.vocab.len()];
        for (term, &id) in &self.vocab {
            vocab[id as usize] = term;
        }
        out.count(vocab.len());
        for term in vocab {
            out.string(term);
        }
        out.ords(&self.df);
        out.count(self.doc_terms.len());
        for terms in &self.doc_terms {
            out.ords(terms);
        }
        out.count(self.learned.len());
        out.0.extend(self.learned.iter().map(|&l| u8::from(l)));
        out.count(self.live);
        out.0
    }

    /// Tables from [`Self::encode`]'s bytes; an error for bytes it did not write (truncated,
    /// a count past the end, an id out of range).
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader(bytes);
        let keys = r.strings()?;
        let servers = r.strings()?;
        let count = r.count()?;
        let mut names = HashMap::with_capacity(count.min(r.0.len()));
        for _ in 0..count {
            names.insert(r.string()?, r.ords()?.into());
        }
        let count = r.count()?;
        let mut squashed = HashMap::with_capacity(count.min(r.0.len()));
        for _ in 0..count {
            let name = r.string()?;
            let letters = r.u64()?;
            squashed.insert(name, (letters, r.ords()?.into()));
        }
        let terms = r.count()?;
        let mut vocab = HashMap::with_capacity(terms.min(r.0.len() / 4));
        for id in 0..terms as u32 {
            vocab.insert(r.string()?, id);
        }
        let df = r.ords()?;
        let mut doc_terms = Vec::new();
        for _ in 0..r.count()? {
            doc_terms.push(r.ords()?);
        }
        let flags = r.count()?;
        let learned: Vec<bool> = r.take(flags)?.iter().map(|&b| b == 1).collect();
        let live = r.count()?;
        let docs = keys.len();
        let ords_valid = names
            .values()
            .chain(squashed.values().map(|(_, ords)| ords))
            .flatten()
            .all(|&o| (o as usize) < docs);
        if !r.is_done()
            || servers.len() != docs
            || doc_terms.len() != docs
            || learned.len() != docs
            || df.len() != vocab.len()
            || vocab.len() != terms
            || live > docs
            || !ords_valid
            || doc_terms.iter().flatten().any(|&id| id as usize >= terms)
        {
            return Err(DecodeError::Inconsistent);
        }
        Ok(Self {
            keys,
            servers,
            names,
            squashed,
            vocab,
            df,
            doc_terms,
            learned,
            live,
        })
    }
}

/// A name lower-cased without `_`, `-` and `.`: `getCurrentTime`, `get_current_time` and
/// `get-current.time` are all `getcurrenttime`.
pub(super) fn squash(name: &str) -> String {
    name.chars()
        .filter(|c| !matches!(c, '_' | '-' | '.'))
        .flat_map(char::to_lowercase)
        .collect()
}

/// Which characters `word` has, as bits (letters and digits each their own, the rest shared):
/// a word within k edits of another lacks at most k of its bits and has at most k others.
pub(super) fn letters(word: &str) -> u64 {
    word.chars().fold(0, |bits, c| {
        let bit = match c {
            'a'..='z' => c as u32 - 'a' as u32,
            '0'..='9' => 26 + c as u32 - '0' as u32,
            _ => 36 + c as u32 % 28,
        };
        bits | 1 << bit
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_owned).collect()
    }

    #[test]
    fn removing_a_server_forgets_its_names_and_frequencies_but_keeps_ordinals() {
        let mut t = Tables::default();
        t.add("a__x", "a", ["x", "a__x"], words("read file file"), true);
        t.add("b__y", "b", ["y", "b__y"], words("read mail"), false);
        assert_eq!(t.learned_live(), 1);
        assert_eq!(t.df[t.vocab["read"] as usize], 2);
        assert_eq!(t.doc_terms[0].len(), 2, "duplicates counted once");

        assert_eq!(t.remove_server("a"), 1);
        assert_eq!((t.live, t.removed()), (1, 1));
        assert!(!t.is_live(0) && t.is_live(1));
        assert_eq!(t.df[t.vocab["read"] as usize], 1);
        assert_eq!(t.df[t.vocab["file"] as usize], 0);
        assert!(!t.names.contains_key("x") && !t.names.contains_key("a__x"));
        assert!(!t.squashed.contains_key("ax") && t.squashed["by"].1[..] == [1]);

        assert_eq!(t.learned_live(), 0);
        let ord = t.add("a__z", "a", ["z", "a__z"], words("file"), false);
        assert_eq!(ord, 2, "a new document gets a new ordinal");
        assert_eq!(t.df[t.vocab["file"] as usize], 1);
        assert_eq!(t.names["z"][..], [2]);

        assert_eq!(t.ord_of("a__z"), Some(2));
        assert_eq!(t.remove_keys(["a__z", "a__gone"]), 1);
        assert_eq!(t.ord_of("a__z"), None);
        assert_eq!(t.df[t.vocab["file"] as usize], 0);
        let ord = t.add("a__z", "a", ["z", "a__z"], words("file"), false);
        assert_eq!(ord, 3);

        let bytes = t.encode();
        let back = Tables::decode(&bytes).unwrap();
        assert_eq!(back.encode(), bytes, "decoding loses nothing");
        assert_eq!(
            (back.keys, back.vocab, back.live),
            (t.keys, t.vocab, t.live)
        );
        for cut in [0, 1, bytes.len() / 2, bytes.len() - 1] {
            assert!(Tables::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
    }
}
