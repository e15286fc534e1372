//! Where each client keeps its config by default, on Linux and macOS (and Windows where the
//! same rules hold).

use std::path::{Path, PathBuf};

use super::{Client, ClientError};

/// The directories default locations are built from; injectable so tests never touch `$HOME`.
#[derive(Debug, Clone, Default)]
pub struct Dirs {
    pub home: Option<PathBuf>,
    /// `~/.config` on Linux, `~/Library/Application Support` on macOS.
    pub config: Option<PathBuf>,
    /// `$CODEX_HOME`, if set.
    pub codex_home: Option<PathBuf>,
    pub cwd: Option<PathBuf>,
}

impl Dirs {
    /// The current user's directories.
    pub fn from_env() -> Self {
        Self {
            home: dirs::home_dir(),
            config: dirs::config_dir(),
            codex_home: std::env::var_os("CODEX_HOME").map(PathBuf::from),
            cwd: std::env::current_dir().ok(),
        }
    }
}

/// Default config files of `client`, most likely first: the user's file, then the project's.
pub fn candidates(client: Client, dirs: &Dirs) -> Vec<PathBuf> {
    let home = |rel: &str| dirs.home.as_ref().map(|h| h.join(rel));
    let config = |rel: &str| dirs.config.as_ref().map(|c| c.join(rel));
    let cwd = |rel: &str| dirs.cwd.as_ref().map(|c| c.join(rel));
    let list = match client {
        Client::ClaudeDesktop => vec![config("Claude/claude_desktop_config.json")],
        Client::ClaudeCode => vec![home(".claude.json"), cwd(".mcp.json")],
        Client::Cursor => vec![home(".cursor/mcp.json"), cwd(".cursor/mcp.json")],
        Client::VsCode => vec![config("Code/User/mcp.json"), cwd(".vscode/mcp.json")],
        Client::Codex => vec![
            dirs.codex_home
                .as_ref()
                .map(|c| c.join("config.toml"))
                .or_else(|| home(".codex/config.toml")),
        ],
    };
    list.into_iter().flatten().collect()
}

/// The client file to use: `explicit` if given, else the first default candidate that
/// `present` accepts (exists, or has a backup for `uninstall`).
pub fn locate(
    client: Client,
    explicit: Option<&Path>,
    dirs: &Dirs,
    present: impl Fn(&Path) -> bool,
) -> Result<PathBuf, ClientError> {
    if let Some(path) = explicit {
        return Ok(path.to_owned());
    }
    let tried = candidates(client, dirs);
    tried
        .iter()
        .find(|p| present(p))
        .cloned()
        .ok_or_else(|| ClientError::NotFound {
            client,
            tried: tried
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirs() -> Dirs {
        Dirs {
            home: Some("/home/me".into()),
            config: Some("/home/me/.config".into()),
            codex_home: None,
            cwd: Some("/src/app".into()),
        }
    }

    #[test]
    fn default_locations_per_client() {
        let d = dirs();
        let c = |client| candidates(client, &d);
        assert_eq!(
            c(Client::ClaudeDesktop),
            [PathBuf::from(
                "/home/me/.config/Claude/claude_desktop_config.json"
            )]
        );
        assert_eq!(
            c(Client::ClaudeCode),
            [
                PathBuf::from("/home/me/.claude.json"),
                "/src/app/.mcp.json".into()
            ]
        );
        assert_eq!(
            c(Client::Cursor)[0],
            PathBuf::from("/home/me/.cursor/mcp.json")
        );
        assert_eq!(
            c(Client::VsCode),
            [
                PathBuf::from("/home/me/.config/Code/User/mcp.json"),
                "/src/app/.vscode/mcp.json".into()
            ]
        );
        assert_eq!(
            c(Client::Codex),
            [PathBuf::from("/home/me/.codex/config.toml")]
        );
        let d = Dirs {
            codex_home: Some("/opt/codex".into()),
            ..dirs()
        };
        assert_eq!(
            candidates(Client::Codex, &d),
            [PathBuf::from("/opt/codex/config.toml")]
        );
        let mac = Dirs {
            config: Some("/Users/me/Library/Application Support".into()),
            ..dirs()
        };
        assert_eq!(
            candidates(Client::ClaudeDesktop, &mac),
            [PathBuf::from(
                "/Users/me/Library/Application Support/Claude/claude_desktop_config.json"
            )]
        );
    }

    #[test]
    fn first_present_candidate_wins_and_misses_name_every_path() {
        let d = dirs();
        let found = locate(Client::VsCode, None, &d, |p| p.starts_with("/src")).unwrap();
        assert_eq!(found, PathBuf::from("/src/app/.vscode/mcp.json"));
        let explicit = locate(Client::VsCode, Some(Path::new("x.json")), &d, |_| false).unwrap();
        assert_eq!(explicit, PathBuf::from("x.json"));
        let err = locate(Client::Cursor, None, &d, |_| false)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/home/me/.cursor/mcp.json")
                && err.contains("/src/app/.cursor/mcp.json")
                && err.contains("PATH"),
            "{err}"
        );
    }
}
