//! `meta-server index` and `search` on the command line.

use serde_json::{Value, json};

use std::path::Path;

use crate::support::{
    SHIPPED, Session, everything_entry, fails, meta_server, repo, succeeds, time_entry,
    unstartable, wait_until, write_config,
};

#[test]
fn index_writes_catalogs_and_reports_failures_without_stopping() {
    let dir = tempfile::tempdir().unwrap();
    let mut servers = unstartable(&["broken"]);
    servers["everything"] = everything_entry();
    servers["time"] = time_entry();
    let config = write_config(dir.path(), servers, json!({"catalogDir": "cat"}));
    let out = meta_server(&["--config", config.to_str().unwrap(), "index", "--json"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "some failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let by_name = |n: &str| summary.iter().find(|o| o["server"] == n).unwrap().clone();
    assert_eq!(by_name("broken")["ok"], false);
    assert!(
        by_name("broken")["error"]
            .as_str()
            .unwrap()
            .contains("not found")
    );
    // 13, plus the 4 it lists to a client that offers sampling, elicitation and roots.
    assert_eq!(by_name("everything")["tools"], 17);
    assert_eq!(by_name("time")["tools"], 2);

    let catalog: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("cat/time.json")).unwrap())
            .unwrap();
    assert_eq!(catalog["format"], 1);
    assert_eq!(catalog["server"], "time");
    // time is dual-era: it answers `server/discover`, so it is spoken to at 2026-07-28.
    assert_eq!(catalog["protocolVersion"], "2026-07-28");
    assert_eq!(catalog["tools"][0]["name"], "get_current_time");
    assert!(catalog["configFingerprint"].as_str().unwrap().len() == 64);
    assert!(!dir.path().join("cat/broken.json").exists());

    // Only the chosen server, and an unknown name is a clear error.
    let out = succeeds(&mut meta_server(&[
        "--config",
        config.to_str().unwrap(),
        "index",
        "--server",
        "time",
    ]));
    assert!(String::from_utf8_lossy(&out.stdout).contains("1/1 servers indexed"));
    let out = meta_server(&[
        "--config",
        config.to_str().unwrap(),
        "index",
        "--server",
        "nope",
    ])
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("configured: broken, everything, time"));
}

#[test]
fn search_answers_from_catalogs_with_nothing_started() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), unstartable(&SHIPPED), json!({}));
    let catalogs = repo().join("catalogs");
    let args = [
        "--config",
        config.to_str().unwrap(),
        "--catalog-dir",
        catalogs.to_str().unwrap(),
        "search",
    ];
    let out = succeeds(&mut meta_server(
        &[
            &args[..],
            &[
                "create entities in the knowledge graph",
                "--json",
                "--limit",
                "2",
            ],
        ]
        .concat(),
    ));
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["hits"][0]["name"], "memory__create_entities");
    assert_eq!(result["hits"].as_array().unwrap().len(), 2);
    assert_eq!(result["confident"], true);

    // Only a common word matches: not confident, the hits come back as near misses.
    let out = meta_server(&[&args[..], &["zebra stripes directory", "--json"]].concat())
        .output()
        .unwrap();
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["confident"], false, "{result}");
    assert!(
        result["hits"][0]["name"]
            .as_str()
            .unwrap()
            .contains("directory")
    );
    let hint = result["hint"].as_str().unwrap();
    assert!(
        hint.contains("near misses") && hint.contains("server"),
        "{hint}"
    );

    let out = meta_server(&[&args[..], &["echo"]].concat())
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("everything__echo(message*: string) [read-only] - Echoes"),
        "{text}"
    );

    // Detail and grouping, as search_tools has them.
    let out = succeeds(&mut meta_server(
        &[
            &args[..],
            &[
                "read files and entities",
                "--detail",
                "name",
                "--group-by-server",
                "--json",
            ],
        ]
        .concat(),
    ));
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(result["hits"][0].get("description").is_none(), "{result}");
    assert!(result["groups"].as_array().unwrap().len() >= 2, "{result}");

    let stderr = fails(&mut meta_server(
        &[&args[..], &["x", "--server", "nope"]].concat(),
    ));
    assert!(stderr.contains("unknown server \"nope\""), "{stderr}");
}

#[test]
fn config_errors_name_the_file_and_say_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bad.json");
    // One bad entry is reported and skipped; the rest of the config works.
    std::fs::write(
        &config,
        r#"{"mcpServers": {"gh": {"command": 42}, "ok": {"command": "true"}}}"#,
    )
    .unwrap();
    let out = meta_server(&["--config", config.to_str().unwrap(), "search", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.json")
            && err.contains(r#"mcpServers."gh".command"#)
            && err.contains("must be a string")
            && err.contains("the other servers work"),
        "{err}"
    );
    // A file that is wrong as a whole still stops the command.
    std::fs::write(&config, r#"{"mcpServers": [1]}"#).unwrap();
    let out = meta_server(&["--config", config.to_str().unwrap(), "search", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.json") && err.contains("mcpServers"),
        "{err}"
    );

    let out = meta_server(&["--config", "/nonexistent/c.json", "serve"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("META_SERVER_CONFIG"));
}

#[test]
fn help_explains_each_subcommand() {
    let out = meta_server(&["--help"]).output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    for word in [
        "serve",
        "index",
        "search",
        "--config",
        "META_SERVER_CONFIG",
        "search_tools",
    ] {
        assert!(help.contains(word), "--help lacks {word}:\n{help}");
    }
    let out = meta_server(&["index", "--help"]).output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(
        help.contains("atomically") && help.contains("Exit code"),
        "{help}"
    );
}

/// `measure --json` over the shipped catalogs, for a config of `servers` (none startable).
fn measure_shipped(servers: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), unstartable(servers), json!({}));
    let catalogs = repo().join("catalogs");
    let out = succeeds(&mut meta_server(&[
        "--config",
        config.to_str().unwrap(),
        "--catalog-dir",
        catalogs.to_str().unwrap(),
        "measure",
        "--json",
    ]));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn measure_counts_definition_tokens_from_catalogs() {
    let report = measure_shipped(&["everything", "filesystem", "memory", "time", "new"]);
    assert_eq!(report["tokenizer"], "o200k_base");
    let tools: Vec<u64> = report["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["tools"].as_u64().unwrap())
        .collect();
    assert_eq!(tools, [13, 14, 9, 2]);
    assert_eq!(report["missing"], json!(["new"]));
    let total = report["totalTokens"].as_u64().unwrap();
    let meta = report["metaTokens"].as_u64().unwrap();
    let sum: u64 = report["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["tokens"].as_u64().unwrap())
        .sum();
    assert_eq!(total, sum);
    assert!(
        meta > 300 && meta * 5 < total,
        "meta {meta} vs total {total}"
    );
    let saving = report["savingPercent"].as_f64().unwrap();
    assert!((saving - (100.0 * (1.0 - meta as f64 / total as f64))).abs() < 0.1);
}

/// README's figures of the meta surface are what `measure` says of the four reference servers.
#[test]
fn readme_surface_figures_are_measured() {
    let report = measure_shipped(&["everything", "filesystem", "memory", "time"]);
    let figure = |n: &Value| {
        let n = n.as_u64().unwrap();
        if n >= 1000 {
            format!("{},{:03}", n / 1000, n % 1000)
        } else {
            n.to_string()
        }
    };
    let said = format!(
        "the meta surface is {} tokens instead of {} tokens",
        figure(&report["metaTokens"]),
        figure(&report["totalTokens"])
    );
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let readme = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(readme.contains(&said), "README should say: {said}");
}

#[test]
fn index_stale_relists_catalogs_past_the_ttl_their_server_gave() {
    let dir = tempfile::tempdir().unwrap();
    let fault = crate::support::fault_server();
    let entry = |ttl: &str| json!({"command": fault, "args": ["--ttl-ms", ttl]});
    let servers = json!({"lapsed": entry("0"), "fresh": entry("3600000")});
    let config = write_config(dir.path(), servers, json!({"catalogDir": "cat"}));
    let config = config.to_str().unwrap();
    let indexed = |args: &[&str]| -> Vec<String> {
        let out = succeeds(&mut meta_server(
            &[&["--config", config, "index", "--json"], args].concat(),
        ));
        let summary: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
        summary
            .iter()
            .map(|o| o["server"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(indexed(&[]), ["fresh", "lapsed"]);
    let ttl = |server: &str| {
        let path = dir.path().join(format!("cat/{server}.json"));
        let catalog: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        catalog["ttlMs"].clone()
    };
    assert_eq!(ttl("lapsed"), 0);
    // What is left of the hour once every page is in (rmcp counts from the first page).
    let fresh = ttl("fresh").as_u64().unwrap();
    assert!((3_590_000..=3_600_000).contains(&fresh), "{fresh}");
    // ttlMs 0 is stale at once; an hour is not over yet.
    assert_eq!(indexed(&["--stale"]), ["lapsed"]);

    // While serving, connecting a server whose catalog has expired re-lists it.
    let mark = |server: &str| {
        let path = dir.path().join(format!("cat/{server}.json"));
        let mut catalog: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        catalog["instructions"] = json!("marked by the test");
        std::fs::write(&path, catalog.to_string()).unwrap();
    };
    let marked = |server: &str| {
        let path = dir.path().join(format!("cat/{server}.json"));
        std::fs::read_to_string(path)
            .unwrap()
            .contains("marked by the test")
    };
    mark("lapsed");
    mark("fresh");
    let mut session = Session::start(Path::new(config), &dir.path().join("cat"));
    session.initialize();
    // "fresh" connects first and sorts first: were it re-listed, that would be done before
    // "lapsed" is.
    for (id, server) in [(2, "fresh"), (3, "lapsed")] {
        let name = format!("{server}__echo");
        let reply = session.call(
            id,
            "call_tool",
            json!({"name": name, "arguments": {"text": "hi"}}),
        );
        assert_eq!(reply["result"]["isError"], false, "{reply}");
    }
    wait_until("the expired catalog to be re-listed", || {
        (!marked("lapsed")).then_some(())
    });
    assert!(marked("fresh"), "a fresh catalog is not re-listed");
}

#[test]
fn secrets_never_reach_errors_tables_or_logs() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        json!({
            // A secret in the URL's query (port 1: nothing listens).
            "leaky-url": {"type": "http", "url": "http://127.0.0.1:1/mcp?key=${LEAKY_KEY}"},
            // A secret in the command line.
            "leaky-cmd": {"command": "/nonexistent/${LEAKY_CMD}"},
            // An upstream that writes a token to stderr and dies.
            "chatty": {"command": "sh", "args": ["-c", "echo starting with token=abc123secret >&2; exit 3"]},
        }),
        json!({"catalogDir": "catalogs", "timeoutSecs": 5}),
    );
    let secrets = ["url-sekrit-4711", "cmd-sekrit-0815", "abc123secret"];
    let run = |args: &[&str]| {
        meta_server(&[&["--config", config.to_str().unwrap()], args].concat())
            .env("LEAKY_KEY", secrets[0])
            .env("LEAKY_CMD", secrets[1])
            .env("META_SERVER_LOG", "debug")
            .output()
            .unwrap()
    };
    let out = run(&["index", "--json"]);
    assert_eq!(out.status.code(), Some(2));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let rows: Vec<Value> = serde_json::from_str(&stdout).unwrap();
    assert_eq!(rows.len(), 3, "{stdout}");
    assert!(stdout.contains("[redacted]"), "{stdout}");
    for secret in secrets {
        assert!(!stdout.contains(secret), "{secret} in the table: {stdout}");
        assert!(!stderr.contains(secret), "{secret} in the log: {stderr}");
    }
    let chatty = rows.iter().find(|r| r["server"] == "chatty").unwrap();
    assert!(
        chatty["error"]
            .as_str()
            .unwrap()
            .contains("token=[redacted]"),
        "{chatty}"
    );
    for name in ["leaky-url__x", "leaky-cmd__x", "chatty__x"] {
        let out = run(&["call", name]);
        assert_eq!(out.status.code(), Some(1));
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        for secret in secrets {
            assert!(!all.contains(secret), "{secret} from `call {name}`: {all}");
        }
    }
}

/// A CLI call warns about the server it calls, not about every broken entry of the config.
#[test]
fn a_call_says_nothing_of_servers_it_does_not_touch() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        json!({
            "time": time_entry(),
            "ghost": {"command": "meta-server-test-not-installed"},
        }),
        json!({"catalogDir": dir.path().join("cat")}),
    );
    let call = |name: &str| {
        meta_server(&[
            "--config",
            config.to_str().unwrap(),
            "call",
            name,
            r#"{"timezone": "UTC"}"#,
        ])
        .output()
        .unwrap()
    };
    let out = call("time__get_current_time");
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("ghost"), "{stderr}");
    // The broken one, called, says why.
    let out = call("ghost__anything");
    assert!(!out.status.success());
    let all =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(all.contains("meta-server-test-not-installed"), "{all}");
}

/// After `index` failed for a server, later commands and the instructions say why, not "run
/// index" again.
#[test]
fn a_failed_index_is_named_where_the_server_is_mentioned() {
    let dir = tempfile::tempdir().unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let catalogs = dir.path().join("cat");
    let config = write_config(
        dir.path(),
        json!({
            "time": time_entry(),
            "down": {"url": format!("http://127.0.0.1:{closed}/mcp")},
        }),
        json!({"catalogDir": catalogs}),
    );
    let config = config.to_str().unwrap();
    let out = meta_server(&["--config", config, "index"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let note = stderr_of_success(&mut meta_server(&["--config", config, "search", "time"]));
    assert!(
        note.contains("down (index failed: server \"down\" failed to initialize: cannot connect")
            && !note.contains("run `meta-server index`"),
        "{note}"
    );
    let mut session = Session::start(std::path::Path::new(config), &catalogs);
    let init = session.initialize();
    let instructions = init["instructions"].as_str().unwrap();
    assert!(
        instructions.contains("- down (index failed: server \"down\" failed to initialize"),
        "{instructions}"
    );
    assert!(instructions.contains("- time (2 tools)"), "{instructions}");
}

/// Runs `cmd`, which must succeed; returns its stderr.
fn stderr_of_success(cmd: &mut std::process::Command) -> String {
    String::from_utf8_lossy(&succeeds(cmd).stderr).into_owned()
}
