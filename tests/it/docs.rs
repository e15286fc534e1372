//! The README is a front door and the guides are in `docs/`: its size, its links, and that the
//! guides reach every command and each other without a dead link.

use std::path::{Path, PathBuf};

use crate::support::{meta_server, repo, succeeds};

/// README.md and every docs/*.md file.
fn documents() -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    docs.sort();
    docs.insert(0, repo().join("README.md"));
    docs
}

/// The targets of the Markdown links of `text`, outside fenced code blocks.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            if let Some(end) = rest.find(')') {
                out.push(rest[..end].to_owned());
                rest = &rest[end..];
            }
        }
    }
    out
}

/// GitHub's anchor of a heading: lowercase, punctuation but `-` and `_` dropped, spaces as `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of the headings of a Markdown file, outside fenced code blocks.
fn anchors(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.push(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

#[test]
fn readme_is_a_front_door_linking_every_guide() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines < 250,
        "README.md has {lines} lines: keep it to the first ten minutes and move the rest to docs/"
    );
    for doc in documents().iter().skip(1) {
        let name = doc.file_name().unwrap().to_str().unwrap();
        assert!(
            readme.contains(&format!("](docs/{name})")),
            "README.md does not link docs/{name}"
        );
    }
}

#[test]
fn every_relative_link_of_the_readme_and_the_guides_resolves() {
    let mut dead = Vec::new();
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap();
        for link in links(&text) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            let (file, fragment) = link.split_once('#').unwrap_or((&link, ""));
            let target = if file.is_empty() {
                doc.clone()
            } else {
                doc.parent().unwrap().join(file)
            };
            let name = format!("{}: {link}", doc.strip_prefix(repo()).unwrap().display());
            if !target.exists() {
                dead.push(format!("{name} (no such file)"));
            } else if !fragment.is_empty() && !anchors(&target).iter().any(|a| a == fragment) {
                dead.push(format!("{name} (no such heading)"));
            }
        }
    }
    assert!(dead.is_empty(), "dead links:\n{}", dead.join("\n"));
}

/// docs/commands.md names every command `meta-server --help` lists.
#[test]
fn the_command_guide_names_every_command() {
    let out = succeeds(meta_server(&["--help"]).env("COLUMNS", "100"));
    let help = String::from_utf8(out.stdout).unwrap();
    let guide = std::fs::read_to_string(repo().join("docs/commands.md")).unwrap();
    let commands: Vec<&str> = help
        .split("Commands:\n")
        .nth(1)
        .unwrap()
        .lines()
        .take_while(|line| !line.trim().is_empty())
        .filter(|line| line.starts_with("  ") && !line.starts_with("   "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|command| *command != "help")
        .collect();
    assert!(commands.len() > 10, "{help}");
    for command in commands {
        assert!(
            guide.contains(&format!("`meta-server {command}"))
                || guide.contains(&format!("`{command}`"))
                || guide.contains(&format!("`{command} ")),
            "docs/commands.md does not name `meta-server {command}`"
        );
    }
}
