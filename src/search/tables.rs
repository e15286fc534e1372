//! What the search index knows besides tantivy's postings: each document's key, server and
//! distinct terms by ordinal (the `ord` fast field), exact names, and document frequencies
//! over all fields together, for coverage and IDF weights.

use std::collections::HashMap;

/// Side tables of a [`super::SearchIndex`], indexed by document ordinal. A removed document
/// keeps its ordinal with an empty key, so ordinals stored in tantivy stay valid.
#[derive(Clone, Default)]
pub(super) struct Tables {
    pub keys: Vec<String>,
    pub servers: Vec<String>,
    /// Lower-cased tool name and qualified name -> document ordinals, for exact-name lookups.
    pub names: HashMap<String, Vec<u32>>,
    /// The same names squashed (see [`squash`]) -> their [`letters`] and document ordinals,
    /// for did-you-mean.
    pub squashed: HashMap<String, (u64, Vec<u32>)>,
    /// Analyzed term -> term id. Ids are never reused.
    pub vocab: HashMap<String, u32>,
    /// Per term id: number of live tools containing the term in any field.
    pub df: Vec<u32>,
    /// Sorted term ids of each tool, all fields together.
    pub doc_terms: Vec<Vec<u32>>,
    /// Live documents.
    pub live: usize,
}

impl Tables {
    /// Records a document as the next ordinal, which it returns. `terms` are its analyzed
    /// words in any order, duplicates allowed; `names` its exact names.
    pub fn add<'a>(
        &mut self,
        key: &str,
        server: &str,
        names: impl IntoIterator<Item = &'a str>,
        terms: impl IntoIterator<Item = String>,
    ) -> u32 {
        let ord = self.keys.len() as u32;
        self.keys.push(key.to_owned());
        self.servers.push(server.to_owned());
        let add_ord = |ords: &mut Vec<u32>| {
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
                .or_insert((letters, Vec::new()));
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
        self.live += 1;
        ord
    }

    /// Ordinals of the live documents of `server`, ascending.
    pub fn ords_of(&self, server: &str) -> Vec<u32> {
        (0..self.keys.len() as u32)
            .filter(|&i| self.is_live(i) && self.servers[i as usize] == server)
            .collect()
    }

    /// Forgets every document of `server`; returns how many there were.
    pub fn remove_server(&mut self, server: &str) -> usize {
        let ords = self.ords_of(server);
        for &ord in &ords {
            let i = ord as usize;
            for &id in &self.doc_terms[i] {
                self.df[id as usize] -= 1;
            }
            self.doc_terms[i] = Vec::new();
            self.keys[i] = String::new();
            self.servers[i] = String::new();
        }
        let kept = |list: &mut Vec<u32>| {
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
        t.add("a__x", "a", ["x", "a__x"], words("read file file"));
        t.add("b__y", "b", ["y", "b__y"], words("read mail"));
        assert_eq!(t.df[t.vocab["read"] as usize], 2);
        assert_eq!(t.doc_terms[0].len(), 2, "duplicates counted once");

        assert_eq!(t.remove_server("a"), 1);
        assert_eq!((t.live, t.removed()), (1, 1));
        assert!(!t.is_live(0) && t.is_live(1));
        assert_eq!(t.df[t.vocab["read"] as usize], 1);
        assert_eq!(t.df[t.vocab["file"] as usize], 0);
        assert!(!t.names.contains_key("x") && !t.names.contains_key("a__x"));
        assert!(!t.squashed.contains_key("ax") && t.squashed["by"].1 == [1]);

        let ord = t.add("a__z", "a", ["z"], words("file"));
        assert_eq!(ord, 2, "a new document gets a new ordinal");
        assert_eq!(t.df[t.vocab["file"] as usize], 1);
        assert_eq!(t.names["z"], [2]);
    }
}
