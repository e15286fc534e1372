//! What an adversarial probe found (issue 18), one test per finding: hostile configs, huge and
//! odd meta-tool arguments, result ids, logs, and process hygiene.

use serde_json::{Value, json};

use crate::support::{
    Session, everything_entry, fault_entry, fault_server, meta_server, processes_with, repo,
    succeeds, time_entry, unstartable, wait_until, write_config,
};

#[test]
fn a_bad_glob_is_caught_with_the_config_and_many_stars_do_not_hang() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        json!({"time": {"command": "/nonexistent", "allowTools": ["get_*", "[oops"]}}),
        json!({}),
    );
    // An entry meta-server cannot serve: skipped and reported, the rest keeps working.
    let out = succeeds(&mut meta_server(&[
        "--config",
        config.to_str().unwrap(),
        "--catalog-dir",
        repo().join("catalogs").to_str().unwrap(),
        "search",
        "current time",
    ]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(r#"server "time" skipped"#)
            && stderr.contains(r#"mcpServers."time".allowTools[1]"#)
            && stderr.contains("[oops"),
        "{stderr}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("time__get_current_time"));

    // A backtracking matcher takes exponential time on this glob against a name of many a's.
    let catalogs = dir.path().join("catalogs");
    std::fs::create_dir_all(&catalogs).unwrap();
    let tool = |name: &str| json!({"name": name, "description": "reads the aaa file", "inputSchema": {"type": "object"}});
    let catalog =
        json!({"format": 1, "server": "x", "tools": [tool(&"a".repeat(40)), tool("read_aaa")]});
    std::fs::write(catalogs.join("x.json"), catalog.to_string()).unwrap();
    let stars = format!("{}b", "*a".repeat(14));
    let config = write_config(
        dir.path(),
        json!({"x": {"command": "/nonexistent", "allowTools": [stars, "read_*"]}}),
        json!({}),
    );
    let out = succeeds(&mut meta_server(&[
        "--config",
        config.to_str().unwrap(),
        "--catalog-dir",
        catalogs.to_str().unwrap(),
        "search",
        "aaa",
        "--json",
    ]));
    let found: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = found["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["x__read_aaa"]);
}

#[test]
fn a_config_starting_with_a_byte_order_mark_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.json");
    let text = json!({"mcpServers": {"time": {"command": "/nonexistent"}}}).to_string();
    std::fs::write(&config, format!("\u{feff}{text}")).unwrap();
    let catalogs = repo().join("catalogs");
    let out = succeeds(&mut meta_server(&[
        "--config",
        config.to_str().unwrap(),
        "--catalog-dir",
        catalogs.to_str().unwrap(),
        "search",
        "current time",
    ]));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("time__get_current_time"));
}

#[test]
fn a_killed_meta_server_takes_its_upstreams_and_their_children_along() {
    let dir = tempfile::tempdir().unwrap();
    let tag = dir.path().join("fault").display().to_string();
    let fault = fault_server().display().to_string();
    let marker = format!("{}", 10_000_000 + std::process::id());
    let servers = json!({
        // Ignores the end of stdin: only a signal stops it.
        "stubborn": {"command": fault, "args": ["--ignore-eof", "--tag", tag]},
        // Leaves a child of its own in its process group.
        "wrapped": {"command": "sh", "args": ["-c", format!("sleep {marker} & exec {fault} --tag {tag}")]},
    });
    let config = write_config(dir.path(), servers, json!({}));
    let catalogs = dir.path().join("catalogs");
    let c = |p: &std::path::Path| p.to_str().unwrap().to_owned();
    succeeds(&mut meta_server(&[
        "--config",
        &c(&config),
        "--catalog-dir",
        &c(&catalogs),
        "index",
    ]));
    let sleepers = || processes_with(&format!("sleep {marker}"));
    wait_until("index to stop what it started", || {
        (processes_with(&tag).is_empty() && sleepers().is_empty()).then_some(())
    });

    let mut s = Session::start(&config, &catalogs);
    s.initialize();
    for (id, tool) in [(2, "stubborn__pid"), (3, "wrapped__pid")] {
        let r = s.call(id, "call_tool", json!({"name": tool, "arguments": {}}));
        assert_eq!(r["result"]["isError"], false, "{r}");
    }
    let upstreams = processes_with(&tag);
    assert_eq!(upstreams.len(), 2, "both upstreams run");
    assert_eq!(sleepers().len(), 1, "the wrapped server's child runs");

    drop(s); // SIGKILL: no shutdown code runs in meta-server
    wait_until(
        "upstreams and their children to die with meta-server",
        || (processes_with(&tag).is_empty() && sleepers().is_empty()).then_some(()),
    );
}

/// A session over the shipped catalogs with the real `everything` server and a small budget,
/// holding one stored result; returns the session and the result's id.
fn session_with_a_stored_result(dir: &std::path::Path) -> (Session, String) {
    let config = write_config(
        dir,
        json!({"everything": everything_entry()}),
        json!({"maxResultTokens": 300}),
    );
    // A copy: the upstream really starts, and its catalog is re-listed and written.
    let catalogs = dir.join("catalogs");
    std::fs::create_dir_all(&catalogs).unwrap();
    std::fs::copy(
        repo().join("catalogs/everything.json"),
        catalogs.join("everything.json"),
    )
    .unwrap();
    let mut s = Session::start(&config, &catalogs);
    s.initialize();
    let message: String = (0..400).map(|i| format!("line {i} says ab\n")).collect();
    let r = s.call(
        100,
        "call_tool",
        json!({"name": "everything__echo", "arguments": {"message": message}}),
    );
    let id = notice_of(&r)["resourceId"].as_str().unwrap().to_owned();
    (s, id)
}

/// The truncation notice of a `tools/call` response.
fn notice_of(response: &Value) -> Value {
    let blocks = response["result"]["content"].as_array().unwrap();
    let notice = blocks
        .iter()
        .filter_map(|b| b["text"].as_str())
        .find_map(|t| t.strip_prefix("--- TRUNCATION NOTICE ---\n"))
        .unwrap_or_else(|| panic!("no notice in {response}"));
    serde_json::from_str(notice).unwrap()
}

#[test]
fn a_huge_search_pattern_gets_an_error_result_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, id) = session_with_a_stored_result(dir.path());
    let search = |pattern: String| json!({"name": "meta__search_full_content", "arguments": {"resource_id": id, "pattern": pattern}});
    let r = s.call(2, "call_tool", search(format!("({}", "ab".repeat(250_000))));
    assert_eq!(r["result"]["isError"], true, "{}", &r.to_string()[..300]);
    let r = s.call(3, "call_tool", search("says ab".into()));
    assert_eq!(
        r["result"]["structuredContent"]["totalMatches"], 400,
        "still serving"
    );
}

#[test]
fn a_corrupt_catalog_is_kept_aside_and_another_servers_catalog_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let catalogs = dir.path().join("catalogs");
    std::fs::create_dir_all(&catalogs).unwrap();
    let config = write_config(dir.path(), json!({"time": time_entry()}), json!({}));
    let cli = |args: &[&str]| {
        let mut all = vec![
            "--config",
            config.to_str().unwrap(),
            "--catalog-dir",
            catalogs.to_str().unwrap(),
        ];
        all.extend_from_slice(args);
        succeeds(&mut meta_server(&all))
    };

    // everything's catalog under time's name: a warning, and none of its tools become time's.
    std::fs::copy(
        repo().join("catalogs/everything.json"),
        catalogs.join("time.json"),
    )
    .unwrap();
    let out = cli(&["search", "echo", "--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(r#"catalog of server "everything", not of "time""#),
        "{stderr}"
    );
    let found: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        !found.to_string().contains("time__echo"),
        "another server's tools are not time's: {found}"
    );

    let corrupt = r#"{"format": 1, "server": "time", "tools": [{"na"#;
    std::fs::write(catalogs.join("time.json"), corrupt).unwrap();
    cli(&["index"]);
    let kept: Vec<_> = std::fs::read_dir(&catalogs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains("time.json.bad-"))
        .collect();
    assert_eq!(kept.len(), 1, "the corrupt file is kept aside");
    assert_eq!(std::fs::read_to_string(&kept[0]).unwrap(), corrupt);
    let fresh: Value =
        serde_json::from_str(&std::fs::read_to_string(catalogs.join("time.json")).unwrap())
            .unwrap();
    assert_eq!(fresh["server"], "time");
}

#[test]
fn debug_logs_redact_tool_arguments_unless_payloads_are_asked_for() {
    let secret = "hunter2-correct-horse-battery";
    for (level, payloads) in [(None, false), (Some("debug"), false), (Some("debug"), true)] {
        let dir = tempfile::tempdir().unwrap();
        let config = write_config(dir.path(), unstartable(&["time"]), json!({}));
        let log = dir.path().join("stderr.log");
        let mut env = vec![];
        if let Some(level) = level {
            env.push(("META_SERVER_LOG", level));
        }
        if payloads {
            env.push(("META_SERVER_LOG_PAYLOADS", "1"));
        }
        let mut s = Session::start_with(
            &config,
            &repo().join("catalogs"),
            &env,
            std::fs::File::create(&log).unwrap(),
        );
        s.initialize();
        let args = json!({"name": "time__get_current_time", "arguments": {"timezone": secret}});
        let r = s.call(2, "call_tool", args);
        assert_eq!(r["result"]["isError"], true, "the server cannot start: {r}");
        assert!(s.finish().success());
        let logged = std::fs::read_to_string(&log).unwrap();
        assert_eq!(
            logged.contains("DEBUG"),
            level.is_some(),
            "debug lines only when asked for: {logged}"
        );
        if level.is_none() {
            assert!(
                !logged.contains(" INFO "),
                "warnings only by default: {logged}"
            );
        }
        assert_eq!(
            logged.contains(secret),
            payloads,
            "payloads logged only with META_SERVER_LOG_PAYLOADS=1:\n{logged}"
        );
    }
}

#[test]
fn spilled_results_count_against_the_one_result_budget() {
    let dir = tempfile::tempdir().unwrap();
    let tag = dir.path().join("fault");
    let events = dir.path().join("events.log");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let servers = json!({"big": fault_entry(&tag, &events, &[], 30)});
    let config = write_config(
        dir.path(),
        servers,
        json!({"resultMemoryMb": 4, "maxResultTokens": 1000}),
    );
    let catalogs = dir.path().join("catalogs");
    succeeds(&mut meta_server(&[
        "--config",
        config.to_str().unwrap(),
        "--catalog-dir",
        catalogs.to_str().unwrap(),
        "index",
    ]));
    let tmp_dir = tmp.to_str().unwrap().to_owned();
    let mut s = Session::start_with(
        &config,
        &catalogs,
        &[("TMPDIR", &tmp_dir)],
        std::process::Stdio::null(),
    );
    s.initialize();
    let mut ids = Vec::new();
    for id in 0..6 {
        // 2 MB each: over the 1 MiB that stays in memory, so each is spilled to disk.
        let huge = json!({"name": "big__huge", "arguments": {"mb": 2}});
        let r = s.call(10 + id, "call_tool", huge);
        ids.push(notice_of(&r)["resourceId"].as_str().unwrap().to_owned());
    }
    let mut request = 100;
    let mut readable = |s: &mut Session, id: &str| {
        request += 1;
        let lookup = json!({"name": "meta__lookup_full_content", "arguments": {"resource_id": id}});
        s.call(request, "call_tool", lookup)["result"]["isError"] == false
    };
    wait_until("the oldest results to make room", || {
        (!readable(&mut s, &ids[0]) && readable(&mut s, &ids[5])).then_some(())
    });
    let on_disk = || -> u64 {
        std::fs::read_dir(&tmp)
            .unwrap()
            .flatten()
            .filter_map(|d| std::fs::read_dir(d.path()).ok())
            .flatten()
            .filter_map(|f| f.ok()?.metadata().ok())
            .map(|m| m.len())
            .sum()
    };
    wait_until("spilled results to fit resultMemoryMb", || {
        (on_disk() <= 4 << 20).then_some(())
    });
    assert!(s.finish().success());
}

/// The `_meta` of a 2026-07-28 request, as the Python SDK sends it.
fn meta_2026(params: Value) -> Value {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "probe", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    params
}

/// Issue 38 L12: over stdio, a request naming 2026-07-28 for a method that revision removed
/// gets -32601, whatever the method did in 2025-11-25 (over HTTP: `tests/e2e/test_hardening.py`).
#[test]
fn the_2026_07_28_path_answers_removed_methods_with_method_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), json!({}), json!({}));
    let mut s = Session::start(&config, dir.path());
    let listed = s.request(1, "tools/list", meta_2026(json!({})));
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    let init = json!({"protocolVersion": "2026-07-28", "capabilities": {},
                      "clientInfo": {"name": "probe", "version": "1"}});
    for (id, method, params) in [
        (2, "initialize", init),
        (3, "logging/setLevel", json!({"level": "info"})),
        (4, "resources/subscribe", json!({"uri": "x://y"})),
        (5, "ping", json!({})),
    ] {
        let answer = s.request(id, method, meta_2026(params));
        assert_eq!(answer["error"]["code"], -32601, "{method}: {answer}");
    }
    let listed = s.request(6, "tools/list", meta_2026(json!({})));
    assert!(
        listed["result"]["tools"].is_array(),
        "still serving: {listed}"
    );
    assert!(s.finish().success());
}
