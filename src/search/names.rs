//! Names: did-you-mean for a misspelt or misqualified tool name, and the optional splitting
//! of run-together names by the catalog's vocabulary.

use std::collections::HashSet;

use super::tokenizer::split_words;
use super::{SearchIndex, ToolDoc, tables};

/// Whether `query` is written like an identifier: one word with `_`, `-`, `.` or a lower-case
/// letter followed by a capital (`get_time`, `getTime`).
pub(super) fn identifier_like(query: &str) -> bool {
    let query = query.trim();
    !query.contains(char::is_whitespace)
        && (query.contains(['_', '-', '.'])
            || query
                .chars()
                .zip(query.chars().skip(1))
                .any(|(a, b)| a.is_lowercase() && b.is_uppercase()))
}

impl SearchIndex {
    /// For a one-word query that is no tool's name: the tools whose name or qualified name is
    /// within a typo of it, compared [`tables::squash`]ed (1 edit from 4 letters, 2 from 9),
    /// or whose name is the tool part of a qualified query on another server.
    pub(super) fn close_names(&self, query: &str, server: Option<&str>) -> Vec<u32> {
        let query = query.trim();
        if query.is_empty() || query.contains(char::is_whitespace) || query.len() > 200 {
            return Vec::new();
        }
        let wanted = tables::squash(query);
        let length = wanted.chars().count();
        let typos = match length {
            0..4 => 0,
            4..=8 => 1,
            _ => 2,
        };
        let mut close: Vec<u32> = Vec::new();
        // Qualified names are `<server>__<tool>`; server names have no `__` of their own.
        if let Some((prefix, tool)) = query.split_once("__")
            && prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
            && let Some(ords) = self.tables.names.get(tool.to_lowercase().as_str())
        {
            close.extend(ords);
        }
        if typos > 0 {
            let letters = tables::letters(&wanted);
            let differ = |a: u64, b: u64| (a & !b).count_ones() as usize;
            for (name, (name_letters, ords)) in &self.tables.squashed {
                if differ(letters, *name_letters) <= typos
                    && differ(*name_letters, letters) <= typos
                    && name.chars().count().abs_diff(length) <= typos
                    && strsim::osa_distance(name, &wanted) <= typos
                {
                    close.extend(ords);
                }
            }
        }
        close.retain(|&i| server.is_none_or(|s| self.tables.servers[i as usize] == s));
        close.sort_unstable();
        close.dedup();
        close
    }
}

/// Per tool, its run-together name words split into words of at least 3 letters that the
/// catalog's texts use as words of their own: `keywordexplorer` gives `keyword explorer`.
pub(super) fn decompound_names(docs: &[ToolDoc]) -> Vec<String> {
    let mut vocab = HashSet::new();
    for d in docs.iter() {
        for text in [&d.name, &d.title, &d.description, &d.params] {
            for (s, e) in split_words(text) {
                let w = text[s..e].to_lowercase();
                if w.len() >= 3 && w.chars().all(|c| c.is_ascii_alphabetic()) {
                    vocab.insert(w);
                }
            }
        }
    }
    let mut out = Vec::with_capacity(docs.len());
    for d in docs {
        let mut extra = Vec::new();
        for (s, e) in split_words(&d.name) {
            let w = d.name[s..e].to_lowercase();
            if w.len() >= 6
                && w.chars().all(|c| c.is_ascii_alphabetic())
                && let Some(parts) = segment(&w, &vocab)
            {
                extra.extend(parts);
            }
        }
        out.push(extra.join(" "));
    }
    out
}

/// The split of `word` into the fewest `vocab` words (at least two), if there is one.
fn segment(word: &str, vocab: &HashSet<String>) -> Option<Vec<String>> {
    let n = word.len();
    // best[i]: fewest parts covering word[..i], with the start of the last part.
    let mut best: Vec<Option<(usize, usize)>> = vec![None; n + 1];
    best[0] = Some((0, 0));
    for end in 3..=n {
        for start in 0..=end - 3 {
            if let Some((parts, _)) = best[start]
                && (start, end) != (0, n)
                && vocab.contains(&word[start..end])
                && best[end].is_none_or(|(p, _)| parts + 1 < p)
            {
                best[end] = Some((parts + 1, start));
            }
        }
    }
    let (parts, _) = best[n]?;
    let mut out = Vec::with_capacity(parts);
    let mut end = n;
    while end > 0 {
        let (_, start) = best[end]?;
        out.push(word[start..end].to_owned());
        end = start;
    }
    out.reverse();
    Some(out)
}
