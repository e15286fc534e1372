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
