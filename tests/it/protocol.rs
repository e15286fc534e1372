//! The MCP surface of `meta-server serve`: golden `tools/list` bytes in both revisions,
//! `server/discover` and unknown methods, and the meta-tools answering from shipped catalogs
//! without starting anything (not even the guardian).

use serde_json::{Value, json};

use crate::support::{SHIPPED, Session, processes, repo, unstartable, write_config};

const GOLDEN: &str = "tests/golden/tools_list.json";

fn tools_list_bytes(servers: Value) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut session = Session::on_shipped_catalogs(dir.path(), servers);
    session.initialize();
    let line = session.request_raw(2, "tools/list", json!({}));
    assert!(session.finish().success());
    line
}

#[test]
fn tools_list_is_byte_identical_across_configs_and_matches_golden() {
    let four = tools_list_bytes(unstartable(&SHIPPED));
    let one = tools_list_bytes(unstartable(&["time"]));
    let none = tools_list_bytes(json!({}));
    assert_eq!(four, one);
    assert_eq!(four, none);
    let golden_path = repo().join(GOLDEN);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden_path, format!("{four}\n")).unwrap();
    }
    let golden =
        std::fs::read_to_string(&golden_path).expect("golden file (UPDATE_GOLDEN=1 writes it)");
    assert_eq!(
        four,
        golden.trim_end(),
        "tools/list bytes changed; if intended, rerun with UPDATE_GOLDEN=1"
    );
}

/// The `_meta` of a 2026-07-28 request, as the Python SDK sends it.
fn meta_2026() -> Value {
    json!({"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "probe", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    }})
}

/// The bytes of the `tools` array in a `tools/list` answer line (the result's last member).
fn tools_array(line: &str) -> &str {
    let start = line.find("\"tools\":[").expect(line);
    line[start..].strip_suffix("}}").expect(line)
}

#[test]
fn tools_list_of_2026_07_28_has_the_golden_tools_and_cache_hints() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = Session::on_shipped_catalogs(dir.path(), unstartable(&SHIPPED));
    // No initialize: the request's `_meta` names the revision.
    let line = session.request_raw(2, "tools/list", meta_2026());
    assert!(session.finish().success());
    let golden = std::fs::read_to_string(repo().join(GOLDEN)).unwrap();
    assert_eq!(tools_array(&line), tools_array(golden.trim_end()));
    let result = &serde_json::from_str::<Value>(&line).unwrap()["result"];
    assert_eq!(result["ttlMs"], 86_400_000, "{result}");
    assert_eq!(result["cacheScope"], "public", "{result}");
}

#[test]
fn discover_answers_both_revisions_and_initialize_still_starts_a_session() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), json!({}), json!({}));
    let mut s = Session::start(&config, dir.path());
    let discover = s.request(10, "server/discover", meta_2026());
    let found = &discover["result"];
    assert_eq!(found["supportedVersions"][3], "2025-11-25", "{discover}");
    assert_eq!(found["supportedVersions"][4], "2026-07-28", "{discover}");
    assert_eq!(
        found["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "meta-server"
    );
    assert!(found["capabilities"]["tools"].is_object(), "{discover}");
    // Without its `_meta` a discover is malformed (2026-07-28 requires it).
    let bare = s.request(11, "server/discover", json!({}));
    assert_eq!(bare["error"]["code"], -32602, "{bare}");
    let ping = s.request(13, "ping", json!({}));
    assert_eq!(ping["result"], json!({}), "{ping}");

    // A discover leaves the choice open: this client goes on with a 2025-11-25 session.
    let init = s.initialize();
    assert_eq!(init["protocolVersion"], "2025-11-25");
    assert_eq!(init["serverInfo"]["name"], "meta-server");
    assert_eq!(
        init["instructions"], found["instructions"],
        "the same overview"
    );
    assert_eq!(
        init["capabilities"]["tools"]["listChanged"], true,
        "tools/list changes when a config change adds or removes an alwaysLoad server"
    );
    let after = s.request(14, "vendor/whatever", json!({}));
    assert_eq!(after["error"]["code"], -32601, "{after}");
    let listed = s.request(15, "tools/list", json!({}));
    assert!(listed["result"].get("ttlMs").is_none(), "{listed}");
    assert!(s.finish().success());
}

#[test]
fn a_2026_07_28_client_gets_method_not_found_for_unknown_and_removed_methods() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), json!({}), json!({}));
    let mut s = Session::start(&config, dir.path());
    let unknown = s.request(10, "vendor/whatever", meta_2026());
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    let ping = s.request(11, "ping", meta_2026());
    assert_eq!(
        ping["error"]["code"], -32601,
        "ping is removed in 2026-07-28: {ping}"
    );
    assert!(s.finish().success());
}

#[test]
fn meta_tools_answer_from_shipped_catalogs_without_starting_servers() {
    let dir = tempfile::tempdir().unwrap();
    // Commands that cannot start: any attempt would turn into an error result.
    let mut s = Session::on_shipped_catalogs(dir.path(), unstartable(&SHIPPED));
    let init = s.initialize();
    let overview = init["instructions"].as_str().unwrap();
    assert!(
        overview.contains("- everything") && overview.contains("(14 tools)"),
        "{overview}"
    );

    let call =
        |s: &mut Session, id, name: &str, args: Value| s.call(id, name, args)["result"].clone();
    let found = call(
        &mut s,
        2,
        "search_tools",
        json!({"query": "list files in a directory", "limit": 3}),
    );
    assert_eq!(
        found["structuredContent"]["hits"][0]["name"], "filesystem__list_directory",
        "{found}"
    );
    // Embeddings are off in these tests: the result says the ranking is by words only.
    assert_eq!(found["structuredContent"]["mode"], "bm25", "{found}");
    assert_eq!(found["isError"], false);
    let names = call(
        &mut s,
        3,
        "search_tools",
        json!({"query": "time", "detail": "name"}),
    );
    let first = &names["structuredContent"]["hits"][0];
    assert!(
        first.get("description").is_none() && first.get("signature").is_none(),
        "{first}"
    );
    let full = call(
        &mut s,
        4,
        "search_tools",
        json!({"query": "get_current_time", "detail": "full", "limit": 1}),
    );
    assert_eq!(
        full["structuredContent"]["hits"][0]["inputSchema"]["required"],
        json!(["timezone"])
    );
    // A summary is one line of at most 160 characters; full gives the whole description.
    let description = |s: &mut Session, id, detail: &str| {
        let args =
            json!({"query": "filesystem__read_multiple_files", "detail": detail, "limit": 1});
        let r = call(s, id, "search_tools", args);
        r["structuredContent"]["hits"][0]["description"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    // A misspelt or misqualified name: the tool meant comes first, with a did-you-mean.
    for (id, query, meant) in [
        (42, "get_curent_time", "time__get_current_time"),
        (43, "memory__read_file", "filesystem__read_file"),
    ] {
        let r = call(&mut s, id, "search_tools", json!({"query": query}));
        let out = &r["structuredContent"];
        assert_eq!(out["hits"][0]["name"], meant, "{out}");
        let hint = out["hint"].as_str().unwrap();
        assert!(hint.contains(&format!("Did you mean {meant}")), "{hint}");
    }
    let summary = description(&mut s, 40, "summary");
    let whole = description(&mut s, 41, "full");
    assert!(
        summary.ends_with('…') && summary.chars().count() == 160,
        "{summary}"
    );
    assert!(
        whole.len() > 300 && whole.starts_with(summary.trim_end_matches('…')),
        "{whole}"
    );
    // A server filter returns hits of that server only; the built-in tools' server `meta` is a
    // server like any other.
    for (id, query, server) in [(5, "read", "memory"), (44, "full content", "meta")] {
        let args = json!({"query": query, "server": server});
        let scoped = call(&mut s, id, "search_tools", args);
        let hits = scoped["structuredContent"]["hits"].as_array().unwrap();
        assert!(
            !hits.is_empty() && hits.iter().all(|h| h["server"] == server),
            "{scoped}"
        );
    }
    let details = call(
        &mut s,
        6,
        "get_tool_details",
        json!({"names": ["filesystem__read_text_file"]}),
    );
    let tool = &details["structuredContent"]["tools"][0];
    assert!(
        tool["outputSchema"].is_object() && tool["annotations"]["readOnlyHint"] == true,
        "{tool}"
    );
    let bad = call(&mut s, 7, "search_tools", json!({"query": "x", "limit": 0}));
    assert_eq!(bad["isError"], true);
    let bad = call(
        &mut s,
        8,
        "get_tool_details",
        json!({"names": "not-a-list"}),
    );
    assert_eq!(bad["isError"], true);
    assert!(
        bad["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("get_tool_details")
    );

    // Nothing so far needed an upstream: no process was started, not even the guardian.
    let pid = s.pid();
    let children: Vec<String> = processes()
        .into_iter()
        .filter(|(_, ppid, _)| *ppid == pid)
        .map(|(_, _, cmd)| cmd)
        .collect();
    assert!(children.is_empty(), "{children:?}");

    // The one call that needs a server reports the failed start as an error result.
    let failed = call(
        &mut s,
        9,
        "call_tool",
        json!({"name": "time__get_current_time", "arguments": {"timezone": "UTC"}}),
    );
    assert_eq!(failed["isError"], true);
    let text = failed["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("cannot start server \"time\"") && text.contains("not found"),
        "{text}"
    );
    assert!(s.finish().success());
}

#[test]
fn allow_and_deny_globs_hold_in_search_details_and_calls() {
    let dir = tempfile::tempdir().unwrap();
    let mut servers = unstartable(&["filesystem", "time"]);
    servers["filesystem"]["denyTools"] = json!(["write_*", "edit_*", "move_*", "create_*"]);
    servers["time"]["allowTools"] = json!(["get_*"]);
    let mut s = Session::on_shipped_catalogs(dir.path(), servers);
    s.initialize();
    let call =
        |s: &mut Session, id, name: &str, args: Value| s.call(id, name, args)["result"].clone();
    let found = call(
        &mut s,
        2,
        "search_tools",
        json!({"query": "write a file", "limit": 20}),
    );
    let names: Vec<&str> = found["structuredContent"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["name"].as_str().unwrap())
        .collect();
    assert!(
        !names.is_empty()
            && !names
                .iter()
                .any(|n| n.contains("write") || n.contains("edit") || n.contains("move")),
        "{names:?}"
    );
    let read = names
        .iter()
        .position(|n| *n == "filesystem__read_text_file");
    assert!(read.is_some(), "allowed tools stay: {names:?}");
    let hits = found["structuredContent"]["hits"].as_array().unwrap();
    let read_hit = &hits[read.unwrap()];
    assert_eq!(
        read_hit["annotations"]["readOnlyHint"], true,
        "hints are shown in hits: {read_hit}"
    );

    let time = call(
        &mut s,
        3,
        "search_tools",
        json!({"query": "convert time zones", "server": "time"}),
    );
    let names: Vec<&str> = time["structuredContent"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["time__get_current_time"]);

    let details = call(
        &mut s,
        4,
        "get_tool_details",
        json!({"names": ["filesystem__write_file", "time__convert_time"]}),
    );
    assert_eq!(details["structuredContent"]["tools"], json!([]));
    assert_eq!(
        details["structuredContent"]["notFound"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let denied = call(
        &mut s,
        5,
        "call_tool",
        json!({"name": "filesystem__write_file", "arguments": {"path": "/tmp/x", "content": "y"}}),
    );
    assert_eq!(denied["isError"], true);
    assert!(
        denied["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("unknown tool")
    );
    assert!(s.finish().success());
}

#[test]
fn search_hits_can_be_grouped_by_server() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::on_shipped_catalogs(dir.path(), unstartable(&SHIPPED));
    s.initialize();
    let args = json!({"query": "read files and entities", "limit": 10, "group_by_server": true});
    let result = s.request(
        2,
        "tools/call",
        json!({"name": "search_tools", "arguments": args}),
    )["result"]
        .clone();
    let out = &result["structuredContent"];
    let groups = out["groups"].as_array().unwrap();
    assert!(groups.len() >= 2, "{out}");
    let order: Vec<&str> = out["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["server"].as_str().unwrap())
        .collect();
    let mut seen: Vec<&str> = Vec::new();
    for server in &order {
        if seen.last() != Some(server) {
            assert!(
                !seen.contains(server),
                "hits of one server are contiguous: {order:?}"
            );
            seen.push(server);
        }
    }
    let group_servers: Vec<&str> = groups
        .iter()
        .map(|g| g["server"].as_str().unwrap())
        .collect();
    assert_eq!(group_servers, seen);
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with(&format!("[{}]\n", seen[0])), "{text}");
    let plain = s.request(3, "tools/call", json!({"name": "search_tools", "arguments": {"query": "read files and entities", "limit": 10}}));
    assert!(plain["result"]["structuredContent"].get("groups").is_none());
    assert!(s.finish().success());
}

#[test]
fn hostile_meta_tool_arguments_get_clear_errors_and_the_server_stays_up() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::on_shipped_catalogs(dir.path(), unstartable(&["everything", "time"]));
    s.initialize();
    let call = |s: &mut Session, id, name: &str, args: Value| s.call(id, name, args);
    let huge_query = "echo the message please ".repeat(50_000);
    let r = call(&mut s, 2, "search_tools", json!({"query": huge_query}));
    assert_eq!(
        r["result"]["isError"],
        false,
        "a 1 MB query is answered: {}",
        &r.to_string()[..200]
    );
    let r = call(
        &mut s,
        3,
        "get_tool_details",
        json!({"names": vec!["x"; 21]}),
    );
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("1 to 20")
    );
    let r = call(&mut s, 4, "search_tools", json!({"query": 42}));
    assert_eq!(r["result"]["isError"], true);
    let r = call(
        &mut s,
        5,
        "search_tools",
        json!({"query": "x", "surprise": true}),
    );
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("surprise")
    );
    let r = call(
        &mut s,
        6,
        "call_tool",
        json!({"name": "everything__echo", "arguments": "not an object"}),
    );
    assert_eq!(r["result"]["isError"], true);
    // 10,000 levels of nesting: refused as malformed, not a crash.
    let nested = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let line = format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"call_tool","arguments":{{"name":"everything__echo","arguments":{{"message":{nested}}}}}}}}}"#
    );
    s.send_raw(&line);
    let r = call(&mut s, 8, "search_tools", json!({"query": "echo"}));
    assert_eq!(
        r["result"]["structuredContent"]["hits"][0]["name"], "everything__echo",
        "still serving"
    );
    assert!(s.finish().success());
}

#[test]
fn a_request_with_a_lone_surrogate_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::on_shipped_catalogs(dir.path(), unstartable(&SHIPPED));
    s.initialize();
    // What a JavaScript client writes for a string cut mid-emoji: serde rejects it as JSON.
    s.send_raw(
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search_tools","arguments":{"query":"current time \ud83d"}}}"#,
    );
    let reply: Value = serde_json::from_str(&s.recv_line()).unwrap();
    assert_eq!(reply["id"], 7, "{reply}");
    let found = &reply["result"]["structuredContent"];
    assert_eq!(
        found["hits"][0]["name"], "time__get_current_time",
        "{reply}"
    );
    assert_eq!(found["query"], "current time \u{FFFD}", "{reply}");
    assert!(s.finish().success());
}
