//! Names: did-you-mean for a misspelt or misqualified tool or server name, and the optional
//! splitting of run-together names by the catalog's vocabulary.

use std::borrow::Cow;
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

/// Similarity (Jaro-Winkler, 0..=1) at which a name counts as close to the one asked for.
const CLOSE_NAME: f64 = 0.75;

/// `names` ordered by how close they are to `wanted` (Jaro-Winkler), closest first; ties keep
/// their order. What an unknown server name is answered with.
pub fn closest<'a>(wanted: &str, names: &[&'a str]) -> Vec<&'a str> {
    let mut scored: Vec<(f64, &str)> = names
        .iter()
        .map(|name| (strsim::jaro_winkler(wanted, name), *name))
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    scored.into_iter().map(|(_, name)| name).collect()
}

/// Of the qualified names (`<server><separator><tool>`), at most `max` close to the one-word
/// `wanted` as a whole or by their tool part (case-insensitive), closest first, ties by name.
/// A sentence is no misspelt name: it gets none.
pub fn close_qualified<'a>(
    wanted: &str,
    qualified: impl Iterator<Item = &'a String>,
    separator: &str,
    max: usize,
) -> Vec<&'a String> {
    let wanted = wanted.trim().to_lowercase();
    if wanted.contains(char::is_whitespace) {
        return Vec::new();
    }
    fn lower(s: &str) -> Cow<'_, str> {
        if s.chars().any(char::is_uppercase) {
            Cow::Owned(s.to_lowercase())
        } else {
            Cow::Borrowed(s)
        }
    }
    let mut scored: Vec<(f64, &String)> = qualified
        .map(|q| {
            let tool = q.split_once(separator).map_or(q.as_str(), |(_, t)| t);
            let full = strsim::jaro_winkler(&wanted, &lower(q));
            let tool = strsim::jaro_winkler(&wanted, &lower(tool));
            (full.max(tool), q)
        })
        .filter(|(score, _)| *score >= CLOSE_NAME)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    scored.into_iter().take(max).map(|(_, q)| q).collect()
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
