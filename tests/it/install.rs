//! `meta-server import`, `install` and `uninstall` on fixture files of every client, all in a
//! temp dir: nothing here reads or writes the real home.

use std::path::{Path, PathBuf};
use std::process::Output;

use meta_server::clients::{Client, ClientFile, ENTRY_NAME};
use serde_json::{Value, json};

use crate::support::{BIN, meta_server, repo, succeeds};

struct Case {
    client: &'static str,
    fixture: &'static str,
    /// Where the file sits in the temp dir, as the client names it.
    file: &'static str,
    /// Servers meta-server's config must have afterwards: name -> expected keys.
    expect: Value,
    /// Servers that must not be imported.
    absent: &'static [&'static str],
    /// Servers meta-server cannot serve: not imported, and kept in the client's file.
    left: &'static [&'static str],
    /// Text outside the servers section that must survive install.
    kept: &'static [&'static str],
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            client: "claude-desktop",
            fixture: "claude_desktop_config.json",
            file: "Claude/claude_desktop_config.json",
            expect: json!({
                "filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"]},
                "memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"], "env": {"MEMORY_FILE_PATH": "/Users/me/.memory.jsonl"}},
            }),
            absent: &[],
            left: &[],
            kept: &["  \"globalShortcut\": \"Alt+Space\"\n}\n"],
        },
        Case {
            client: "claude-code",
            fixture: "claude.json",
            file: ".claude.json",
            expect: json!({
                "context7": {"type": "http", "url": "https://mcp.context7.com/mcp", "headers": {"CONTEXT7_API_KEY": "${CONTEXT7_API_KEY}"}},
                "sequential-thinking": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-sequential-thinking"], "env": {}},
            }),
            absent: &["project-only"],
            left: &[],
            kept: &[
                "{\n  \"numStartups\": 42,\n  \"installMethod\": \"native\",\n",
                "      \"mcpServers\": {\n        \"project-only\": {\n",
                "  \"userID\": \"0f3c9a\"\n}\n",
            ],
        },
        Case {
            client: "cursor",
            fixture: "cursor_mcp.json",
            file: ".cursor/mcp.json",
            expect: json!({
                "time": {"command": "uvx", "args": ["mcp-server-time", "--local-timezone", "UTC"]},
                "browser": {"command": "npx", "env": {"BROWSER_TOKEN": "${BROWSER_TOKEN}"}},
                "legacy": {"type": "sse", "url": "http://localhost:3001/sse"},
            }),
            absent: &["meta-server", "socket"],
            left: &["socket"],
            kept: &[],
        },
        Case {
            client: "vscode",
            fixture: "vscode_mcp.json",
            file: "Code/User/mcp.json",
            expect: json!({
                "fetch": {"type": "stdio", "command": "uvx", "args": ["mcp-server-fetch"]},
                "perplexity": {"command": "npx", "env": {"PERPLEXITY_API_KEY": "${input:perplexity-key}"}},
                "github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/"},
            }),
            absent: &[],
            left: &[],
            kept: &[
                "{\n\t// Servers for every workspace.\n\t\"inputs\": [\n",
                "\t\t\t\"password\": true\n",
            ],
        },
        Case {
            client: "codex",
            fixture: "codex_config.toml",
            file: ".codex/config.toml",
            expect: json!({
                "filesystem": {"command": "npx"},
                "github": {"env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"}, "timeoutSecs": 90},
                "figma": {"url": "https://mcp.figma.com/mcp", "headers": {"Authorization": "Bearer ${FIGMA_TOKEN}"}},
                "linear": {"url": "https://mcp.linear.app/mcp"},
                "docs": {"command": "uvx", "disabled": true},
            }),
            absent: &[],
            left: &[],
            kept: &[
                "# Codex settings\nmodel = \"gpt-5-codex\"\n",
                "[tui]\nnotifications = true\n",
                "[profiles.fast]\nmodel = \"gpt-5-mini\"\n",
            ],
        },
    ]
}

fn run(args: &[&str]) -> Output {
    succeeds(&mut meta_server(args))
}

fn fail(args: &[&str]) -> String {
    let out = meta_server(args).output().unwrap();
    assert!(!out.status.success(), "meta-server {args:?} should fail");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Every key of `expected` has that value in `actual`.
fn assert_contains(actual: &Value, expected: &Value, at: &str) {
    match expected {
        Value::Object(map) => {
            for (k, v) in map {
                assert_contains(&actual[k], v, &format!("{at}.{k}"));
            }
        }
        _ => assert_eq!(actual, expected, "at {at}"),
    }
}

/// Sets up the client file of `case` in a fresh temp dir.
fn setup(case: &Case) -> (tempfile::TempDir, PathBuf, PathBuf, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let client_file = dir.path().join(case.file);
    std::fs::create_dir_all(client_file.parent().unwrap()).unwrap();
    let original = std::fs::read(repo().join("tests/fixtures/clients").join(case.fixture)).unwrap();
    std::fs::write(&client_file, &original).unwrap();
    let config = dir.path().join("meta/config.json");
    (dir, client_file, config, original)
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn import_install_uninstall_round_trip_for_every_client() {
    let exe = std::fs::canonicalize(BIN).unwrap();
    for case in cases() {
        let (_dir, client_file, config, original) = setup(&case);
        let (file, cfg) = (s(&client_file), s(&config));
        let backup = PathBuf::from(format!("{file}.meta-server-backup"));

        // Dry-run import: a diff, and nothing written.
        let out = run(&[
            "--config",
            cfg,
            "import",
            "--from",
            case.client,
            file,
            "--dry-run",
        ]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("+++ ") && stdout.contains("+  \"mcpServers\""),
            "{}: {stdout}",
            case.client
        );
        assert!(
            !config.exists(),
            "{}: dry run wrote the config",
            case.client
        );

        // Import creates meta-server's config with the client's servers.
        run(&["--config", cfg, "import", "--from", case.client, file]);
        let servers = read_json(&config)["mcpServers"].clone();
        let names: Vec<&String> = servers.as_object().unwrap().keys().collect();
        let expected: Vec<&String> = case.expect.as_object().unwrap().keys().collect();
        let mut sorted = (names.clone(), expected.clone());
        sorted.0.sort();
        sorted.1.sort();
        assert_eq!(sorted.0, sorted.1, "{}: imported servers", case.client);
        assert_contains(&servers, &case.expect, case.client);
        for name in case.absent {
            assert!(
                servers.get(name).is_none(),
                "{}: {name} was imported",
                case.client
            );
        }
        assert_eq!(
            std::fs::read(&client_file).unwrap(),
            original,
            "{}: import touched the client",
            case.client
        );

        // Dry-run install: diffs of the client file, nothing written.
        let out = run(&[
            "--config",
            cfg,
            "install",
            "--client",
            case.client,
            file,
            "--dry-run",
        ]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains(ENTRY_NAME) && stdout.contains("\n+"),
            "{}: {stdout}",
            case.client
        );
        assert_eq!(std::fs::read(&client_file).unwrap(), original);
        assert!(!backup.exists());

        // Install: one entry running this meta-server with this config; the backup is the original.
        let out = run(&["--config", cfg, "install", "--client", case.client, file]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains(&format!(
                "meta-server uninstall --client {} {file}",
                case.client
            )),
            "{stdout}"
        );
        assert_eq!(
            std::fs::read(&backup).unwrap(),
            original,
            "{}: backup",
            case.client
        );
        let installed = std::fs::read_to_string(&client_file).unwrap();
        let client: Client = case.client.parse().unwrap();
        let parsed = ClientFile::parse(client, &client_file, installed.clone()).unwrap();
        let names: Vec<&str> = parsed.servers.iter().map(|s| s.name.as_str()).collect();
        let expected: Vec<&str> = std::iter::once(ENTRY_NAME)
            .chain(case.left.iter().copied())
            .collect();
        assert_eq!(names, expected, "{}: {installed}", case.client);
        let before = ClientFile::parse(
            client,
            &client_file,
            String::from_utf8(original.clone()).unwrap(),
        )
        .unwrap();
        for name in case.left {
            let entry = |f: &ClientFile| {
                f.servers
                    .iter()
                    .find(|s| s.name == *name)
                    .unwrap()
                    .entry
                    .clone()
            };
            assert_eq!(
                entry(&parsed),
                entry(&before),
                "{}: {name} kept as it was",
                case.client
            );
        }
        if !case.left.is_empty() {
            assert!(
                stdout.contains("cannot serve it"),
                "{}: {stdout}",
                case.client
            );
        }
        let mut entry =
            json!({"command": exe.to_str().unwrap(), "args": ["--config", cfg, "serve"]});
        // Claude Code (2.1.121+) defers the tools of an entry without it behind its own tool
        // search; no other client gets the key.
        if case.client == "claude-code" {
            entry["alwaysLoad"] = json!(true);
        }
        assert_eq!(parsed.servers[0].entry, entry, "{}", case.client);
        for kept in case.kept {
            assert!(
                installed.contains(kept),
                "{}: lost {kept:?} in\n{installed}",
                case.client
            );
        }
        assert_eq!(
            read_json(&config)["mcpServers"],
            servers,
            "{}: the import within install found everything already there",
            case.client
        );

        // Installing again changes nothing, and says what stays beside meta-server.
        let out = run(&["--config", cfg, "install", "--client", case.client, file]);
        let again = String::from_utf8_lossy(&out.stdout);
        assert!(again.contains("nothing to change"), "{again}");
        assert_eq!(
            again.contains("already has only"),
            case.left.is_empty(),
            "{again}"
        );
        for left in case.left {
            assert!(again.contains(&format!("  {left}: ")), "{again}");
        }
        assert_eq!(std::fs::read_to_string(&client_file).unwrap(), installed);

        // With servers back in the file, install refuses to overwrite the backup.
        std::fs::write(&client_file, &original).unwrap();
        let err = fail(&["--config", cfg, "install", "--client", case.client, file]);
        assert!(err.contains("backup") && err.contains("uninstall"), "{err}");
        assert_eq!(std::fs::read(&client_file).unwrap(), original);
        assert_eq!(std::fs::read(&backup).unwrap(), original);
        std::fs::write(&client_file, &installed).unwrap();

        // Uninstall restores the original bytes and removes the backup.
        run(&["--config", cfg, "uninstall", "--client", case.client, file]);
        assert_eq!(
            std::fs::read(&client_file).unwrap(),
            original,
            "{}: restore",
            case.client
        );
        assert!(!backup.exists());
        let err = fail(&["uninstall", "--client", case.client, file]);
        assert!(err.contains("no backup"), "{err}");
    }
}

#[test]
fn install_alone_imports_first_and_keeps_existing_servers() {
    let case = &cases()[0];
    let (dir, client_file, config, original) = setup(case);
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    let before = "{\n  \"metaServer\": { \"timeoutSecs\": 30 },\n  \"mcpServers\": {\n    \"memory\": { \"command\": \"my-memory\" }\n  }\n}\n";
    std::fs::write(&config, before).unwrap();
    let (file, cfg) = (s(&client_file), s(&config));

    let out = run(&["--config", cfg, "install", "--client", case.client, file]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("memory") && stdout.contains("already has"),
        "{stdout}"
    );
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(
        text.starts_with("{\n  \"metaServer\": { \"timeoutSecs\": 30 },\n"),
        "{text}"
    );
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["mcpServers"]["memory"], json!({"command": "my-memory"}));
    assert_eq!(v["mcpServers"]["filesystem"]["command"], "npx");
    assert_ne!(std::fs::read(&client_file).unwrap(), original);
    drop(dir);
}

#[test]
fn files_starting_with_a_byte_order_mark_are_read_and_keep_it() {
    let case = &cases()[0];
    let (dir, client_file, config, original) = setup(case);
    std::fs::write(
        &client_file,
        [b"\xEF\xBB\xBF".as_slice(), &original].concat(),
    )
    .unwrap();
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    let before = "\u{feff}{\"mcpServers\": {\"memory\": {\"command\": \"my-memory\"}}}\n";
    std::fs::write(&config, before).unwrap();

    run(&[
        "--config",
        s(&config),
        "install",
        "--client",
        case.client,
        s(&client_file),
    ]);
    let [config, client]: [Value; 2] = [&config, &client_file].map(|file| {
        let text = std::fs::read_to_string(file).unwrap();
        let json = text.strip_prefix('\u{feff}');
        let json = json.unwrap_or_else(|| panic!("{} lost its byte order mark", file.display()));
        serde_json::from_str(json).unwrap()
    });
    assert_eq!(config["mcpServers"]["memory"]["command"], "my-memory");
    assert_eq!(config["mcpServers"]["filesystem"]["command"], "npx");
    assert!(client["mcpServers"].get(ENTRY_NAME).is_some(), "{client}");
    drop(dir);
}

#[test]
fn errors_name_the_file_and_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.json");
    let missing = dir.path().join("nope.json");
    let err = fail(&[
        "--config",
        s(&cfg),
        "import",
        "--from",
        "cursor",
        s(&missing),
    ]);
    assert!(err.contains(s(&missing)) && err.contains("PATH"), "{err}");

    let broken = dir.path().join("mcp.json");
    std::fs::write(
        &broken,
        "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",,}\n  }\n}\n",
    )
    .unwrap();
    let err = fail(&[
        "--config",
        s(&cfg),
        "install",
        "--client",
        "cursor",
        s(&broken),
    ]);
    assert!(
        err.contains(s(&broken)) && err.contains("line 3, column"),
        "{err}"
    );
    assert!(!cfg.exists() && !dir.path().join("mcp.json.meta-server-backup").exists());

    let toml = dir.path().join("config.toml");
    std::fs::write(&toml, "model = \"o3\"\n[mcp_servers.x\n").unwrap();
    let err = fail(&["--config", s(&cfg), "import", "--from", "codex", s(&toml)]);
    assert!(
        err.contains(s(&toml)) && err.contains("line 2, column"),
        "{err}"
    );

    let err = fail(&[
        "--config",
        s(&cfg),
        "uninstall",
        "--client",
        "cursor",
        s(&broken),
    ]);
    assert!(
        err.contains("no backup") && err.contains("install --client cursor"),
        "{err}"
    );
}

#[test]
fn import_output_writes_elsewhere_and_leaves_config_alone() {
    let case = &cases()[2];
    let (dir, client_file, config, _) = setup(case);
    let output = dir.path().join("out/merged.json");
    run(&[
        "--config",
        s(&config),
        "import",
        "--from",
        case.client,
        s(&client_file),
        "--output",
        s(&output),
    ]);
    assert!(!config.exists());
    let v = read_json(&output);
    assert_eq!(v["mcpServers"]["time"]["command"], "uvx");
    assert!(v["mcpServers"].get("meta-server").is_none());
}
