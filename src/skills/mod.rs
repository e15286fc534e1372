//! Agent Skills: `SKILL.md` files with YAML frontmatter, found in configured directories, and
//! the MCP servers each skill needs.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// A skill found on disk.
#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// Config names of the MCP servers the skill declares, sorted, without duplicates.
    pub servers: Vec<String>,
    /// The SKILL.md file.
    pub path: PathBuf,
    /// The whole file, frontmatter included.
    pub text: String,
    /// The instructions after the frontmatter.
    pub body: String,
}

#[derive(Deserialize)]
struct Frontmatter {
    name: Option<String>,
    description: Option<String>,
    #[serde(
        default,
        rename = "mcp-servers",
        alias = "mcpServers",
        alias = "mcp_servers"
    )]
    mcp_servers: Option<StringOrList>,
    #[serde(
        default,
        rename = "allowed-tools",
        alias = "allowedTools",
        alias = "allowed_tools"
    )]
    allowed_tools: Option<StringOrList>,
}

/// YAML lists, or one string of items separated by commas or spaces.
#[derive(Deserialize)]
#[serde(untagged)]
enum StringOrList {
    One(String),
    Many(Vec<String>),
}

impl StringOrList {
    fn items(self) -> Vec<String> {
        match self {
            StringOrList::Many(items) => items,
            StringOrList::One(text) => text
                .split([',', ' '])
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
        }
    }
}

/// Finds `<dir>/<skill>/SKILL.md` in every directory; unreadable or malformed skills are
/// skipped with a warning. Sorted by name; the first directory wins on duplicate names.
pub fn discover(dirs: &[PathBuf]) -> (Vec<Skill>, Vec<String>) {
    let mut skills: Vec<Skill> = Vec::new();
    let mut warnings = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path().join("SKILL.md"))
            .filter(|p| p.is_file())
            .collect();
        paths.sort();
        for path in paths {
            match load(&path) {
                Ok(skill) if skills.iter().any(|s| s.name == skill.name) => {
                    warnings.push(format!(
                        "skill \"{}\" in {} is shadowed by an earlier one",
                        skill.name,
                        path.display()
                    ));
                }
                Ok(skill) => skills.push(skill),
                Err(e) => warnings.push(format!("skipping skill {}: {e}", path.display())),
            }
        }
    }
    skills.sort_by(|a, b| a.name.cmp(&b.name));
    (skills, warnings)
}

/// Why a SKILL.md is skipped.
#[derive(Debug, thiserror::Error)]
pub enum SkillError {
    #[error("{0}")]
    Read(#[from] std::io::Error),
    #[error("it has no YAML frontmatter between --- lines")]
    NoFrontmatter,
    #[error("frontmatter: {0}")]
    Frontmatter(#[from] yaml_serde::Error),
    #[error("frontmatter has no \"description\"")]
    NoDescription,
}

/// Reads one SKILL.md.
pub fn load(path: &Path) -> Result<Skill, SkillError> {
    let text = std::fs::read_to_string(path)?;
    let (yaml, body) = split_frontmatter(&text).ok_or(SkillError::NoFrontmatter)?;
    let front: Frontmatter = yaml_serde::from_str(yaml)?;
    let dir_name = path
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = front
        .name
        .filter(|n| !n.trim().is_empty())
        .unwrap_or(dir_name);
    let description = front.description.ok_or(SkillError::NoDescription)?;
    let mut servers: Vec<String> = front
        .mcp_servers
        .map(StringOrList::items)
        .unwrap_or_default();
    for tool in front
        .allowed_tools
        .map(StringOrList::items)
        .unwrap_or_default()
    {
        if let Some(server) = server_of_allowed_tool(&tool) {
            servers.push(server.to_owned());
        }
    }
    servers.sort();
    servers.dedup();
    Ok(Skill {
        name,
        description: description.trim().to_owned(),
        servers,
        path: path.to_owned(),
        body: body.trim().to_owned(),
        text,
    })
}

/// `mcp__github__create_issue` or `mcp__github` -> `github`.
fn server_of_allowed_tool(entry: &str) -> Option<&str> {
    let rest = entry.trim().strip_prefix("mcp__")?;
    let server = rest.split("__").next()?;
    (!server.is_empty()).then_some(server)
}

fn split_frontmatter(text: &str) -> Option<(&str, &str)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text.strip_prefix("---")?.trim_start_matches([' ', '\t']);
    let rest = rest
        .strip_prefix("\r\n")
        .or_else(|| rest.strip_prefix('\n'))?;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Some((&rest[..offset], &rest[offset + line.len()..]));
        }
        offset += line.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) {
        std::fs::create_dir_all(dir.join(name)).unwrap();
        std::fs::write(dir.join(name).join("SKILL.md"), text).unwrap();
    }

    #[test]
    fn reads_frontmatter_servers_and_allowed_tools() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "triage",
            "---\nname: issue-triage\ndescription: Triage GitHub issues\nmcp-servers: [github]\nallowed-tools:\n  - mcp__linear__create_issue\n  - Read\n---\n# Triage\nLabel every issue.\n",
        );
        write(
            dir.path(),
            "clock",
            "---\ndescription: >\n  Tell the time\nallowed-tools: mcp__time__get_current_time, Bash\n---\nUse the clock.\n",
        );
        write(dir.path(), "broken", "no frontmatter here");
        let (skills, warnings) = discover(&[dir.path().to_owned(), PathBuf::from("/nonexistent")]);
        assert_eq!(skills.len(), 2);
        let clock = &skills[0];
        assert_eq!(
            (clock.name.as_str(), clock.description.as_str()),
            ("clock", "Tell the time")
        );
        assert_eq!(clock.servers, ["time"]);
        assert_eq!(clock.body, "Use the clock.");
        let triage = &skills[1];
        assert_eq!(triage.name, "issue-triage");
        assert_eq!(triage.servers, ["github", "linear"]);
        assert!(triage.body.starts_with("# Triage"));
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].contains("broken") && warnings[0].contains("frontmatter"),
            "{warnings:?}"
        );
    }

    #[test]
    fn allowed_tool_prefixes() {
        assert_eq!(
            server_of_allowed_tool("mcp__github__create_issue"),
            Some("github")
        );
        assert_eq!(server_of_allowed_tool("mcp__github"), Some("github"));
        assert_eq!(server_of_allowed_tool("Bash(git:*)"), None);
    }
}
