//! A server's `allowTools` and `denyTools`: globs compiled once, when the config is read, so a
//! bad glob is caught with the config (its entry is skipped and reported) and matching a name
//! costs linear time whatever the pattern.

use globset::{Glob, GlobSet, GlobSetBuilder};

/// Which of a server's tools are offered: those an allow glob matches (all, without allow
/// globs) and no deny glob matches.
#[derive(Debug, Clone, Default)]
pub struct ToolFilter {
    allow: Vec<String>,
    deny: Vec<String>,
    allow_set: GlobSet,
    deny_set: GlobSet,
}

/// A glob that does not compile: which list, which entry, and why.
#[derive(Debug)]
pub struct GlobError {
    pub key: &'static str,
    pub index: usize,
    pub message: String,
}

impl ToolFilter {
    /// Compiles `allowTools` and `denyTools` (`*`, `?`, `[abc]`, `{a,b}`; case-sensitive).
    pub fn new(allow: Vec<String>, deny: Vec<String>) -> Result<Self, GlobError> {
        Ok(Self {
            allow_set: compile("allowTools", &allow)?,
            deny_set: compile("denyTools", &deny)?,
            allow,
            deny,
        })
    }

    /// The allow and deny globs as written.
    pub fn globs(&self) -> (&[String], &[String]) {
        (&self.allow, &self.deny)
    }

    /// Whether the tool named `tool` is offered.
    pub fn allows(&self, tool: &str) -> bool {
        (self.allow.is_empty() || self.allow_set.is_match(tool)) && !self.deny_set.is_match(tool)
    }
}

/// Equal when written the same: the compiled sets follow from the globs.
impl PartialEq for ToolFilter {
    fn eq(&self, other: &Self) -> bool {
        self.allow == other.allow && self.deny == other.deny
    }
}

fn compile(key: &'static str, globs: &[String]) -> Result<GlobSet, GlobError> {
    let mut set = GlobSetBuilder::new();
    for (index, glob) in globs.iter().enumerate() {
        let glob = Glob::new(glob).map_err(|e| GlobError {
            key,
            index,
            message: format!("\"{glob}\" is not a valid glob: {}", e.kind()),
        })?;
        set.add(glob);
    }
    set.build().map_err(|e| GlobError {
        key,
        index: 0,
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(allow: &[&str], deny: &[&str]) -> ToolFilter {
        let owned = |globs: &[&str]| globs.iter().map(|g| g.to_string()).collect();
        ToolFilter::new(owned(allow), owned(deny)).unwrap()
    }

    #[test]
    fn allow_then_deny() {
        let f = filter(&["read_*", "*file*", "get?sum"], &["*secret*"]);
        assert!(f.allows("read_text_file"));
        assert!(f.allows("write_file"));
        assert!(f.allows("get-sum"));
        assert!(!f.allows("delete_dir"));
        assert!(!f.allows("read_secret_key"));
        assert!(filter(&[], &[]).allows(""));
        assert!(filter(&["*"], &[]).allows(""));
        assert!(filter(&["{read,write}_*"], &[]).allows("write_x"));
    }

    #[test]
    fn many_stars_take_linear_time() {
        // The former backtracking matcher took exponential time on this pattern.
        let f = filter(&["*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b"], &[]);
        assert!(!f.allows(&"a".repeat(200)));
        assert!(f.allows(&format!("{}b", "a".repeat(200))));
    }

    #[test]
    fn a_bad_glob_names_its_list_and_entry() {
        let err = ToolFilter::new(vec![], vec!["ok_*".into(), "[unclosed".into()]).unwrap_err();
        assert_eq!((err.key, err.index), ("denyTools", 1));
        assert!(err.message.contains("[unclosed"), "{}", err.message);
    }
}
