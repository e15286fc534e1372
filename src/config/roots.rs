//! A server's `roots` key: the directories it may be given as roots (see
//! `upstream/roots.rs`). Each is an absolute path, `~/...`, or a `file://` URI, kept as an
//! absolute path with `.` and `..` resolved, so that what a client sends can be compared with it.

use std::path::{Component, Path, PathBuf};

/// The directories of a `roots` list; the index (from 1) and message of the first bad one.
pub(super) fn directories(list: Vec<String>) -> Result<Vec<PathBuf>, (usize, String)> {
    list.into_iter()
        .enumerate()
        .map(|(i, entry)| directory(&entry).map_err(|message| (i + 1, message)))
        .collect()
}

fn directory(entry: &str) -> Result<PathBuf, String> {
    let path = if entry.starts_with("file:") {
        url::Url::parse(entry)
            .ok()
            .and_then(|url| url.to_file_path().ok())
            .ok_or("is not a file:// URI of a local directory; write an absolute path")?
    } else if entry == "~" || entry.starts_with("~/") {
        let home = dirs::home_dir().ok_or("starts with ~, but there is no home directory")?;
        home.join(entry.trim_start_matches('~').trim_start_matches('/'))
    } else {
        PathBuf::from(entry)
    };
    if !path.is_absolute() {
        return Err(format!(
            "\"{}\" is not an absolute directory; write it in full (or start it with ~/)",
            crate::echo::echo(entry)
        ));
    }
    Ok(lexical(&path))
}

/// `path` with `.` and `..` resolved by their text alone (a `..` at the root stays there).
pub fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_are_absolute_directories_however_written() {
        let home = dirs::home_dir().unwrap();
        let got = directories(vec![
            "/srv/data/".into(),
            "file:///srv/with%20space".into(),
            "~/projects".into(),
            "/srv/a/../b/./c".into(),
        ])
        .unwrap();
        assert_eq!(
            got,
            [
                PathBuf::from("/srv/data"),
                PathBuf::from("/srv/with space"),
                home.join("projects"),
                PathBuf::from("/srv/b/c"),
            ]
        );
        let (at, message) = directories(vec!["/ok".into(), "relative/dir".into()]).unwrap_err();
        assert_eq!(at, 2);
        assert!(
            message.contains("is not an absolute directory"),
            "{message}"
        );
        let (_, message) = directories(vec!["file://host.example/x".into()]).unwrap_err();
        assert!(
            message.contains("not a file:// URI of a local directory"),
            "{message}"
        );
        assert_eq!(lexical(Path::new("/../x")), PathBuf::from("/x"));
    }
}
