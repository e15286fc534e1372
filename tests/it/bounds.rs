//! What the fourth adversarial probe found unbounded (issue 38), one test per finding, against
//! `examples/fault_server.rs` made hostile: listings without end, template matching of huge
//! URIs, floods of completion values, prompts, elicitations and subscriptions. Memory and time
//! are the benches' (`scripts/bench-bounds`); these tests check the bounds and their errors.

use std::path::Path;

use serde_json::{Value, json};

use crate::faults::text;
use crate::support::{Session, fault_entry, meta_server, processes_with, wait_until, write_config};

/// The start of a reply, for a failed assertion's message.
fn brief(reply: &Value) -> String {
    reply.to_string().chars().take(400).collect()
}

/// A config of fault servers, each `(name, extra args, extra entry keys)`, tagged with the
/// temp dir so the test can tell its processes apart.
fn config(dir: &Path, servers: &[(&str, &[&str], Value)]) -> std::path::PathBuf {
    let tag = dir.join("fault");
    let events = dir.join("events.log");
    let entries: serde_json::Map<String, Value> = servers
        .iter()
        .map(|(name, extra, keys)| {
            let mut entry = fault_entry(&tag, &events, extra, 30);
            for (key, value) in keys.as_object().into_iter().flatten() {
                entry[key] = value.clone();
            }
            (name.to_string(), entry)
        })
        .collect();
    write_config(dir, entries.into(), json!({}))
}

#[test]
fn a_listing_without_end_fails_its_server_at_the_bound_and_the_others_index() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(
        dir.path(),
        &[
            // Empty pages, each with a new cursor: only the page bound stops it.
            (
                "pages",
                &["--endless", "tools", "--page-items", "0"],
                json!({}),
            ),
            // Full pages: the byte bound stops it first (1 MiB of tools here).
            (
                "bytes",
                &["--endless", "resources", "--page-items", "500"],
                json!({"maxListMb": 1}),
            ),
            (
                "cycle",
                &["--cycle", "templates", "--templates", "2"],
                json!({}),
            ),
            (
                "few",
                &["--endless", "prompts", "--page-items", "1"],
                json!({"maxListPages": 7}),
            ),
            ("healthy", &["--prompts", "3"], json!({})),
        ],
    );
    let catalogs = dir.path().join("catalogs");
    let out = meta_server(&[
        "--config",
        config.to_str().unwrap(),
        "--catalog-dir",
        catalogs.to_str().unwrap(),
        "index",
        "--json",
    ])
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2), "some servers failed");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let error = |server: &str| -> String {
        let outcome = (report.as_array().unwrap().iter())
            .find(|o| o["server"] == server)
            .unwrap_or_else(|| panic!("{server} missing from {report}"));
        outcome["error"].as_str().unwrap_or_default().to_owned()
    };
    let said = error("pages");
    assert!(
        said.starts_with("server \"pages\": tools/list went on past 1000 pages (maxListPages)")
            && said.contains("raise maxListPages for it in the config"),
        "{said}"
    );
    let said = error("bytes");
    assert!(
        said.starts_with("server \"bytes\": resources/list went past 1 MiB (maxListMb)")
            && said.contains("raise maxListMb"),
        "{said}"
    );
    let said = error("cycle");
    assert!(
        said.starts_with(
            "server \"cycle\": resources/templates/list gave on page 2 a cursor it had given before"
        ),
        "{said}"
    );
    assert!(
        error("few").contains("prompts/list went on past 7 pages"),
        "{}",
        error("few")
    );
    assert_eq!(error("healthy"), "", "{report}");
    let healthy: Value =
        serde_json::from_str(&std::fs::read_to_string(catalogs.join("healthy.json")).unwrap())
            .unwrap();
    assert_eq!(healthy["prompts"].as_array().unwrap().len(), 3);
    for failed in ["pages", "bytes", "cycle", "few"] {
        assert!(
            !catalogs.join(format!("{failed}.json")).exists(),
            "{failed}"
        );
    }
}

#[test]
fn a_listing_without_end_at_first_use_is_an_error_result_and_other_servers_answer() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(
        dir.path(),
        &[
            (
                "endless",
                &["--endless", "tools", "--page-items", "0"],
                json!({"maxListPages": 20}),
            ),
            ("healthy", &[], json!({})),
        ],
    );
    // No catalogs: serving lists each server in the background, and at its first use.
    let mut s = Session::start(&config, &dir.path().join("catalogs"));
    s.initialize();
    let r = s.call(
        2,
        "call_tool",
        json!({"name": "endless__echo", "arguments": {"text": "hi"}}),
    );
    let said = text(&r["result"]);
    assert!(
        said.contains("server \"endless\": tools/list went on past 20 pages (maxListPages)"),
        "{r}"
    );
    let r = s.call(
        3,
        "call_tool",
        json!({"name": "healthy__echo", "arguments": {"text": "hi"}}),
    );
    assert_eq!(text(&r["result"]), "hi", "{r}");
    assert!(s.finish().success());
    wait_until("the fault servers to exit", || {
        processes_with(&dir.path().join("fault").display().to_string())
            .is_empty()
            .then_some(())
    });
}

/// Indexes `servers` (see [`config`]) and serves them over stdio, initialized.
fn serve_indexed(dir: &Path, servers: &[(&str, &[&str], Value)]) -> Session {
    let config = config(dir, servers);
    let catalogs = dir.join("catalogs");
    crate::support::succeeds(&mut meta_server(&[
        "--config",
        config.to_str().unwrap(),
        "--catalog-dir",
        catalogs.to_str().unwrap(),
        "index",
    ]));
    let mut s = Session::start(&config, &catalogs);
    s.initialize();
    s
}

#[test]
fn a_huge_unlisted_uri_is_refused_before_template_matching_and_listed_ones_still_route() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = serve_indexed(
        dir.path(),
        &[
            // The probe's templates: 500 of 20 parts, each variable reachable everywhere.
            (
                "hostile",
                &["--templates", "500", "--template-parts", "20"],
                json!({}),
            ),
            ("plain", &["--templates", "2"], json!({})),
        ],
    );
    let huge = format!("{}/a", "a".repeat(1 << 20));
    let r = s.request(2, "resources/read", json!({"uri": huge}));
    let said = r["error"]["message"].as_str().unwrap_or_default();
    assert!(
        said.contains("is 1048578 bytes long and no server lists it; URIs over 8192 bytes are not matched against resource templates"),
        "{}",
        brief(&r)
    );
    // Within the limit, every template is tried: none matches this one.
    let long = format!("{}/a", "a".repeat(8_000));
    let r = s.request(3, "resources/read", json!({"uri": long}));
    assert!(r["error"].is_object(), "{}", brief(&r));
    let r = s.request(4, "resources/read", json!({"uri": "fault://t1/x"}));
    assert_eq!(r["result"]["contents"][0]["text"], "read 12", "{r}");
    let r = s.request(5, "tools/list", json!({}));
    assert_eq!(
        r["result"]["tools"].as_array().map(Vec::len),
        Some(3),
        "{r}"
    );
}

#[test]
fn a_completion_of_too_many_values_is_cut_to_mcps_hundred_and_says_how_many() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = serve_indexed(
        dir.path(),
        &[(
            "fault",
            &["--prompts", "1", "--completions", "200000"],
            json!({}),
        )],
    );
    let r = s.request(
        2,
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "fault__prompt-0"},
               "argument": {"name": "topic", "value": ""}}),
    );
    let completion = &r["result"]["completion"];
    assert_eq!(
        completion["values"].as_array().map(Vec::len),
        Some(100),
        "{}",
        brief(&r)
    );
    assert_eq!(completion["values"][99], "value-99");
    assert_eq!(completion["total"], 200_000);
    assert_eq!(completion["hasMore"], true);
}

#[test]
fn meta_servers_own_lists_come_in_pages_that_add_up_to_the_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = serve_indexed(
        dir.path(),
        &[(
            "fault",
            &[
                "--prompts",
                "2500",
                "--resources",
                "1200",
                "--templates",
                "3",
            ],
            json!({}),
        )],
    );
    let mut id = 10;
    let mut all = |method: &str, key: &str, field: &str| -> (Vec<String>, Vec<usize>) {
        let (mut names, mut sizes, mut cursor) = (Vec::new(), Vec::new(), None::<String>);
        loop {
            id += 1;
            let params = cursor.map_or_else(|| json!({}), |c| json!({"cursor": c}));
            let r = s.request(id, method, params);
            let items = r["result"][key]
                .as_array()
                .unwrap_or_else(|| panic!("{}", brief(&r)));
            sizes.push(items.len());
            names.extend(items.iter().map(|i| i[field].as_str().unwrap().to_owned()));
            match r["result"]["nextCursor"].as_str() {
                Some(next) => cursor = Some(next.to_owned()),
                None => return (names, sizes),
            }
        }
    };
    let (prompts, sizes) = all("prompts/list", "prompts", "name");
    assert_eq!(sizes, [1000, 1000, 500]);
    let expected: Vec<String> = (0..2500).map(|i| format!("fault__prompt-{i}")).collect();
    assert_eq!(prompts, expected);
    let (resources, sizes) = all("resources/list", "resources", "uri");
    assert_eq!((sizes, resources.len()), (vec![1000, 200], 1200));
    let (templates, sizes) = all(
        "resources/templates/list",
        "resourceTemplates",
        "uriTemplate",
    );
    assert_eq!(sizes, [4], "meta-server's own and three: {templates:?}");
    let r = s.request(99, "prompts/list", json!({"cursor": "not-ours"}));
    let said = r["error"]["message"].as_str().unwrap_or_default();
    assert!(
        said.contains("list again without a cursor"),
        "{}",
        brief(&r)
    );
}

#[test]
fn a_server_asking_a_client_dozens_of_questions_at_once_gets_a_bounded_share_through() {
    let dir = tempfile::tempdir().unwrap();
    // A 2025-11-25 server: its questions are requests that meta-server relays as they come.
    let config = config(dir.path(), &[("fault", &["--legacy"], json!({}))]);
    let events = dir.path().join("events.log");
    let mut s = Session::start(&config, &dir.path().join("catalogs"));
    s.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"form": {}}},
               "clientInfo": {"name": "it", "version": "0"}}),
    );
    s.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    s.send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params":
        {"name": "call_tool", "arguments": {"name": "fault__elicit", "arguments": {"count": 40}}}}),
    );
    // The questions that reach the client, left unanswered until the server saw the rest refused.
    let mut asked = Vec::new();
    while asked.len() < 16 {
        let message: Value = serde_json::from_str(&s.recv_line()).unwrap();
        if message["method"] == "elicitation/create" {
            asked.push(message["id"].clone());
        }
    }
    wait_until("the server to see 24 questions refused", || {
        let seen = std::fs::read_to_string(&events).unwrap_or_default();
        (seen.lines().filter(|l| *l == "elicit refused").count() == 24).then_some(())
    });
    for id in asked {
        s.send(json!({"jsonrpc": "2.0", "id": id, "result": {"action": "decline"}}));
    }
    let result = loop {
        let message: Value = serde_json::from_str(&s.recv_line()).unwrap();
        assert_ne!(
            message["method"], "elicitation/create",
            "a 17th question reached the client"
        );
        if message["id"] == 2 {
            break message;
        }
    };
    let said = text(&result["result"]);
    assert!(
        said.starts_with("answered 16, refused 24:")
            && said.contains("while 16 requests of servers were already open at it"),
        "{said}"
    );
}

/// The subscriptions the fault server got (`subscribed <uri>` events), once `n` arrived.
fn subscribed_upstream(dir: &Path, n: usize) -> usize {
    let events = dir.join("events.log");
    let count = || {
        let seen = std::fs::read_to_string(&events).unwrap_or_default();
        seen.lines()
            .filter(|l| l.starts_with("subscribed "))
            .count()
    };
    wait_until(&format!("{n} upstream subscriptions"), || {
        (count() >= n).then_some(())
    });
    count()
}

#[test]
fn a_session_holds_a_bounded_number_of_resource_subscriptions() {
    let dir = tempfile::tempdir().unwrap();
    // Resource subscriptions reach servers of the 2025-11-25 revision.
    let mut s = serve_indexed(
        dir.path(),
        &[("fault", &["--legacy", "--templates", "1"], json!({}))],
    );
    for i in 0..256 {
        let r = s.request(
            10 + i,
            "resources/subscribe",
            json!({"uri": format!("fault://t0/{i}")}),
        );
        assert!(r["error"].is_null(), "{}", brief(&r));
    }
    let r = s.request(
        9_999,
        "resources/subscribe",
        json!({"uri": "fault://t0/one-more"}),
    );
    let said = r["error"]["message"].as_str().unwrap_or_default();
    assert!(
        said.contains("this session already holds 256 resource subscriptions"),
        "{}",
        brief(&r)
    );
    // One given up makes room again.
    let r = s.request(
        10_000,
        "resources/unsubscribe",
        json!({"uri": "fault://t0/0"}),
    );
    assert!(r["error"].is_null(), "{}", brief(&r));
    let r = s.request(
        10_001,
        "resources/subscribe",
        json!({"uri": "fault://t0/one-more"}),
    );
    assert!(r["error"].is_null(), "{}", brief(&r));
    assert_eq!(subscribed_upstream(dir.path(), 257), 257);
}

/// A 2026-07-28 `subscriptions/listen` over stdio for `uris`: the messages up to its
/// acknowledgment, and with `to_end`, up to its final answer.
fn listen(s: &mut Session, id: u64, uris: Vec<String>, to_end: bool) -> Vec<Value> {
    s.send(
        json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientInfo": {"name": "it", "version": "0"},
                  "io.modelcontextprotocol/clientCapabilities": {}},
        "notifications": {"resourceSubscriptions": uris}}}),
    );
    let mut seen = Vec::new();
    loop {
        let message: Value = serde_json::from_str(&s.recv_line()).unwrap();
        let end = message["id"] == id
            || (!to_end && message["method"] == "notifications/subscriptions/acknowledged");
        seen.push(message);
        if end {
            return seen;
        }
    }
}

#[test]
fn a_listen_stream_asking_thousands_of_subscriptions_is_refused_and_none_is_made() {
    let dir = tempfile::tempdir().unwrap();
    // Resource subscriptions reach servers of the 2025-11-25 revision.
    let mut s = serve_indexed(
        dir.path(),
        &[("fault", &["--legacy", "--templates", "1"], json!({}))],
    );
    let uris = |n: usize| {
        (0..n)
            .map(|i| format!("fault://t0/{i}"))
            .collect::<Vec<_>>()
    };
    let seen = listen(&mut s, 11, uris(20_000), true);
    let end = seen.last().unwrap();
    let said = end["error"]["message"].as_str().unwrap_or_default();
    assert!(
        said.contains("subscriptions/listen asked for 20000 resource subscriptions; a stream takes at most 256"),
        "{}",
        brief(end)
    );
    // A stream within the cap stays open, its URIs subscribed upstream.
    let seen = listen(&mut s, 12, uris(10), false);
    let acknowledged = &seen.last().unwrap()["params"]["notifications"]["resourceSubscriptions"];
    assert_eq!(acknowledged.as_array().map(Vec::len), Some(10), "{seen:?}");
    assert_eq!(
        subscribed_upstream(dir.path(), 10),
        10,
        "none of the refused stream's"
    );
}
