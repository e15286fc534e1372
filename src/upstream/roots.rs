//! The roots an upstream server is given when it asks for them (`roots/list`). Servers take
//! roots as their sandbox (server-filesystem replaces the directories it was started with by
//! them), so a client's roots never widen what the config gave a server, and never outlive or
//! cross the client that sent them:
//! - a server whose entry has no `roots` key is told there are none, whoever asks;
//! - a server with `roots` is given those directories; where meta-server serves one client
//!   (over stdio), that client's own roots within them instead: each root inside one of them
//!   as it is, one that holds some of them narrowed to those, the others left out, and when
//!   none is left (or the client cannot be asked), the configured directories. A connection
//!   shared by the clients of `serve --http` is never given a client's roots.
//!
//! Paths are compared after symbolic links are resolved where they exist on this machine (a
//! link inside a root may lead out of it), and passed on resolved, as the server would read
//! them. The answer is made new at each request, so a server told its roots changed gets the
//! configured ones back when its client's are gone.

#![expect(deprecated, reason = "roots are relayed for 2025-11-25 servers")]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rmcp::model::{ListRootsResult, Root};

use crate::config::lexical_path;

/// What one connection answers when its server asks for roots.
#[derive(Clone, Debug)]
pub(super) struct Roots {
    /// The server's `roots`: the directories it may be given (`None`: none).
    allowed: Option<Arc<[PathBuf]>>,
    /// Whether one client is served, whose roots may narrow them.
    one_client: bool,
}

impl Roots {
    /// The roots of a server configured with `allowed`, on a connection of a process serving
    /// one client (`one_client`) or many.
    pub(super) fn new(allowed: Option<&[PathBuf]>, one_client: bool) -> Self {
        Self {
            allowed: allowed.filter(|dirs| !dirs.is_empty()).map(Arc::from),
            one_client,
        }
    }

    /// Whether the server is given any root (then its first call waits until it took them).
    pub(super) fn given(&self) -> bool {
        self.allowed.is_some()
    }

    /// Whether the calling client is asked for its roots, to narrow the configured ones.
    pub(super) fn asks_client(&self) -> bool {
        self.one_client && self.given()
    }

    /// The configured directories (none without `roots`).
    pub(super) fn configured(&self) -> ListRootsResult {
        let dirs = self.allowed.as_deref().unwrap_or_default();
        ListRootsResult::new(
            dirs.iter()
                .filter_map(|dir| root(&resolved(dir), None))
                .collect(),
        )
    }

    /// The client's roots within the configured directories; those directories when none is.
    pub(super) fn within(&self, client: ListRootsResult) -> ListRootsResult {
        let allowed: Vec<PathBuf> = (self.allowed.as_deref().unwrap_or_default().iter())
            .map(|dir| resolved(dir))
            .collect();
        let mut kept: Vec<(PathBuf, Option<String>)> = Vec::new();
        for given in client.roots {
            let Some(path) = local_path(&given.uri) else {
                continue;
            };
            let path = resolved(&path);
            if allowed.iter().any(|dir| path.starts_with(dir)) {
                kept.push((path, given.name));
            } else {
                // A root that holds configured directories gives the server those.
                let inside = allowed.iter().filter(|dir| dir.starts_with(&path));
                kept.extend(inside.map(|dir| (dir.clone(), None)));
            }
        }
        let mut seen = std::collections::HashSet::new();
        kept.retain(|(path, _)| seen.insert(path.clone()));
        if kept.is_empty() {
            return self.configured();
        }
        ListRootsResult::new(
            kept.into_iter()
                .filter_map(|(p, name)| root(&p, name))
                .collect(),
        )
    }
}

/// The local path a root's `file://` URI names; `None` for any other URI.
fn local_path(uri: &str) -> Option<PathBuf> {
    let url = url::Url::parse(uri).ok()?;
    (url.scheme() == "file").then_some(())?;
    url.to_file_path().ok()
}

/// `path` with its symbolic links resolved where it exists here, else by its text alone.
fn resolved(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| lexical_path(path))
}

fn root(path: &Path, name: Option<String>) -> Option<Root> {
    let uri = url::Url::from_file_path(path).ok()?;
    let mut root = Root::new(uri.to_string());
    root.name = name;
    Some(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uris(result: &ListRootsResult) -> Vec<String> {
        result.roots.iter().map(|r| r.uri.clone()).collect()
    }

    fn client(uris: &[String]) -> ListRootsResult {
        ListRootsResult::new(uris.iter().map(|u| Root::new(u.clone())).collect())
    }

    fn uri(path: &Path) -> String {
        url::Url::from_file_path(path).unwrap().to_string()
    }

    #[test]
    fn a_server_without_roots_is_told_there_are_none() {
        let roots = Roots::new(None, true);
        assert!(!roots.given() && !roots.asks_client());
        assert!(roots.configured().roots.is_empty());
        assert!(Roots::new(Some(&[]), true).configured().roots.is_empty());
    }

    #[test]
    fn client_roots_are_narrowed_to_the_configured_directories() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let (allowed, other) = (base.join("allowed"), base.join("other"));
        std::fs::create_dir_all(allowed.join("sub")).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        // A link inside the allowed directory that leads out of it.
        std::os::unix::fs::symlink(&other, allowed.join("out")).unwrap();
        let roots = Roots::new(Some(std::slice::from_ref(&allowed)), true);
        assert!(roots.asks_client());
        let narrowed = |given: &[String]| uris(&roots.within(client(given)));
        let sub = uri(&allowed.join("sub"));
        assert_eq!(
            narrowed(std::slice::from_ref(&sub)),
            [sub.as_str()],
            "inside: as it is"
        );
        assert_eq!(
            narrowed(&["file:///".into()]),
            [uri(&allowed)],
            "the whole disk: the allowed part"
        );
        assert_eq!(
            narrowed(&[uri(&other)]),
            [uri(&allowed)],
            "outside: left out"
        );
        assert_eq!(
            narrowed(&[uri(&allowed.join("out"))]),
            [uri(&allowed)],
            "a link out: left out"
        );
        assert_eq!(
            narrowed(&[
                format!("{}/../other", uri(&allowed)),
                "https://example.com/".into(),
                "/etc".into()
            ]),
            [uri(&allowed)],
            "climbing out, other schemes and plain paths: left out"
        );
        assert_eq!(narrowed(&[sub.clone(), sub.clone(), uri(&other)]), [sub]);
        assert_eq!(narrowed(&[]), [uri(&allowed)], "none: the configured ones");
        let shared = Roots::new(Some(std::slice::from_ref(&allowed)), false);
        assert!(shared.given() && !shared.asks_client());
        assert_eq!(uris(&shared.configured()), [uri(&allowed)]);
    }
}
