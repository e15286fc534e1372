//! Search that learns from use, through the real binary: a stdio session's search and call of a
//! real upstream are kept beside the catalogs, `learned list` shows them, `learned forget`
//! removes them; `eval --replay` measures learning, and scores the plain ranking when the
//! learned queries are not searched.

use serde_json::{Value, json};

use crate::support::{Session, meta_server, repo, succeeds, time_entry, write_config};

fn fixture(name: &str) -> String {
    let path = repo().join("tests/fixtures/eval").join(name);
    path.to_str().unwrap().to_owned()
}

/// `meta-server learned ...` on `config`, as JSON when asked.
fn learned(config: &std::path::Path, args: &[&str]) -> String {
    let mut all = vec!["--config", config.to_str().unwrap(), "learned"];
    all.extend(args);
    String::from_utf8(succeeds(&mut meta_server(&all)).stdout).unwrap()
}

#[test]
fn a_session_s_search_and_call_are_kept_listed_and_forgotten() {
    let dir = tempfile::tempdir().unwrap();
    let catalogs = dir.path().join("catalogs");
    std::fs::create_dir_all(&catalogs).unwrap();
    std::fs::copy(
        repo().join("catalogs/time.json"),
        catalogs.join("time.json"),
    )
    .unwrap();
    let config = write_config(
        dir.path(),
        json!({"time": time_entry()}),
        json!({"catalogDir": "catalogs", "skillsDirs": []}),
    );
    let mut session = Session::start_with(
        &config,
        &catalogs,
        &[("META_SERVER_LEARNING", "on")],
        std::process::Stdio::null(),
    );
    session.initialize();
    // One hit shown: the tool called next is taught, the other tool of the server is not.
    let found = session.call(
        2,
        "search_tools",
        json!({"query": "what time is it right now", "limit": 1}),
    );
    let shown = found["result"]["structuredContent"]["hits"][0]["name"].clone();
    let arguments = |tool: &str| match tool {
        "time__get_current_time" => json!({"timezone": "UTC"}),
        _ => json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
    };
    let (taught, other) = match shown.as_str() {
        Some("time__get_current_time") => ("time__get_current_time", "time__convert_time"),
        Some("time__convert_time") => ("time__convert_time", "time__get_current_time"),
        _ => panic!("{found}"),
    };
    for (id, tool) in [(3, taught), (4, other)] {
        let called = session.call(
            id,
            "call_tool",
            json!({"name": tool, "arguments": arguments(tool)}),
        );
        assert_ne!(called["result"]["isError"], json!(true), "{called}");
    }
    assert!(session.finish().success());

    let listed: Value = serde_json::from_str(&learned(&config, &["list", "--json"])).unwrap();
    assert_eq!(
        listed,
        json!([{"tool": taught, "queries": [{
            "query": "what time is it right now",
            "score": 1.0,
            "sessions": 1,
            "principals": 1,
            "lastUsed": listed[0]["queries"][0]["lastUsed"],
        }]}])
    );
    let text = learned(&config, &["list"]);
    assert!(
        text.contains(&format!(
            "{taught}\n  \"what time is it right now\"  score 1, 1 sessions"
        )),
        "{text}"
    );
    // This process has learning off (the tests' default): the list says so.
    assert!(text.contains("learning is off"), "{text}");

    let forgot = learned(&config, &["forget", other]);
    assert!(forgot.starts_with("forgot 0 learned queries"), "{forgot}");
    let forgot = learned(&config, &["forget", "time"]);
    assert!(
        forgot.starts_with("forgot 1 learned queries (the tools of time)"),
        "{forgot}"
    );
    assert_eq!(learned(&config, &["list", "--json"]).trim(), "[]");
    assert!(!catalogs.join(".learned/evidence.json").exists());
}

#[test]
fn eval_replay_scores_the_test_half_before_and_after_the_training_half() {
    let replay = |options: &[&str]| -> Vec<Value> {
        let queries = fixture("replay.jsonl");
        let tools = fixture("tools.jsonl");
        let mut args = vec![
            "eval",
            "--queries",
            &queries,
            "--tools",
            &tools,
            "--replay",
            "--json",
        ];
        args.extend(options);
        let out = succeeds(&mut meta_server(&args));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let rows = replay(&[]);
    let names: Vec<&str> = rows.iter().map(|r| r["set"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["replay (test half, plain)", "replay (test half, learned)"]
    );
    assert_eq!(
        rows[0]["queries"], 3,
        "r2, r3 and r4 are the test half of seed 1"
    );
    assert_eq!(
        rows[0]["metrics"]["recall@10"], 0.0,
        "no test query shares a word with its tool"
    );
    assert_eq!(
        rows[1]["metrics"]["recall@1"], 1.0,
        "each learned from its training twin"
    );
    // Learned queries not searched: exactly the plain ranking.
    let unsearched = replay(&["--option", "learned=0", "--option", "learned_vector=0"]);
    assert_eq!(unsearched[1]["metrics"], unsearched[0]["metrics"]);
    assert_eq!(unsearched[0]["metrics"], rows[0]["metrics"]);
}
