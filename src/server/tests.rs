//! The meta-tools in process, over the shipped catalogs: whatever the arguments (huge, NUL,
//! mixed scripts, wrong types), every result keeps within its budget, and every result that
//! is not an error satisfies the tool's declared output schema.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use proptest::prelude::*;
use rmcp::model::{CallToolResult, JsonObject};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::caller::{Caller, Introduced};
use super::tools::builtin;
use super::tools::request::Request;
use super::{MetaServer, State, definitions};
use crate::budget::Route;
use crate::config::{RESERVED_SERVER, Settings};
use crate::result::{Owner, Stored};

/// The budget every route gets here: Codex's, the smallest a known client has.
const CLIENT_LIMIT: usize = 2_500;

struct Rig {
    runtime: tokio::runtime::Runtime,
    server: MetaServer,
    owner: Owner,
    /// A stored result of `owner`'s.
    stored: String,
}

/// One server over the shipped catalogs, their commands unstartable, built once.
fn rig() -> &'static Rig {
    static RIG: OnceLock<Rig> = OnceLock::new();
    RIG.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let servers: serde_json::Map<String, Value> =
            ["everything", "filesystem", "memory", "time"]
                .iter()
                .map(|s| {
                    (
                        s.to_string(),
                        json!({"command": "/nonexistent/never-started"}),
                    )
                })
                .collect();
        let config = json!({"metaServer": {"skillsDirs": []}, "mcpServers": servers});
        let mut settings =
            Settings::parse(&root.join("config.json"), &config.to_string()).expect("config");
        settings.catalog_dir = root.join("catalogs");
        let (library, _) = super::load_library(&settings).expect("library");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let state = State::new(settings, library);
        let server = runtime.block_on(MetaServer::start(state.clone()));
        let owner = Owner::session();
        let text: String = (0..3000)
            .map(|i| format!("{{\"line\": {i}, \"text\": \"ab ü 漢字 🙂\"}}\n"))
            .collect();
        let stored = runtime
            .block_on(
                state
                    .results
                    .store()
                    .put(&owner, Stored::text("x__y", "application/x-ndjson", text)),
            )
            .expect("stored");
        Rig {
            runtime,
            server,
            owner,
            stored,
        }
    })
}

/// Calls `name` of `tools/list` as a Codex session would.
fn call(name: &str, arguments: Value) -> CallToolResult {
    call_in(name, arguments, Default::default())
}

/// [`call`] in a session that remembers the servers it was `introduced` to.
fn call_in(name: &str, arguments: Value, introduced: Introduced) -> CallToolResult {
    let rig = rig();
    let caller = Caller {
        client_limit: Some(CLIENT_LIMIT),
        owner: rig.owner.clone(),
        principal: None,
        cancelled: CancellationToken::new(),
        progress_to: None,
        origin: crate::upstream::Origin::Detached,
        introduced,
        who: Default::default(),
    };
    let arguments: JsonObject = match arguments {
        Value::Object(map) => map,
        other => [("value".to_owned(), other)].into_iter().collect(),
    };
    let request = Request::read(name, arguments, crate::server::definitions())
        .expect("the three meta-tools are always listed");
    rig.runtime
        .block_on(request.run(&rig.server.state, &caller))
        .result
        .expect("meta-tools answer with results")
}

/// The output schema a successful result of `tool` (through `call_tool` for `meta__` tools)
/// must satisfy.
fn output_schema(tool: &str, arguments: &Value) -> Option<Arc<jsonschema::Validator>> {
    static SCHEMAS: OnceLock<Vec<(String, Arc<jsonschema::Validator>)>> = OnceLock::new();
    let schemas = SCHEMAS.get_or_init(|| {
        let meta = definitions::definitions().iter().filter_map(|t| {
            Some((
                t.name.to_string(),
                definitions::result_schema(&t.name)?.clone(),
            ))
        });
        let builtin = builtin::catalog().tools.iter().filter_map(|t| {
            let t = t.value();
            let name = format!("{RESERVED_SERVER}__{}", t["name"].as_str()?);
            Some((name, t.get("outputSchema")?.clone()))
        });
        meta.chain(builtin)
            .map(|(name, schema)| (name, Arc::new(jsonschema::validator_for(&schema).unwrap())))
            .collect()
    });
    let name = match tool {
        definitions::CALL_TOOL => arguments["name"].as_str()?,
        other => other,
    };
    schemas
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.clone())
}

fn check(tool: &str, arguments: Value) -> Result<(), TestCaseError> {
    let result = call(tool, arguments.clone());
    let rig = rig();
    let soft = rig
        .server
        .state
        .limits(&Route::SearchTools, Some(CLIENT_LIMIT))
        .soft;
    prop_assert!(
        rig.server.state.results.fits(&result, soft),
        "{tool}: over the {soft}-token budget: {}",
        truncated(&serde_json::to_string(&result).unwrap())
    );
    if result.is_error != Some(true)
        && let Some(schema) = output_schema(tool, &arguments)
    {
        let structured = result.structured_content.as_ref();
        prop_assert!(structured.is_some(), "{tool}: no structuredContent");
        let errors: Vec<String> = schema
            .iter_errors(structured.unwrap())
            .map(|e| truncated(&e.to_string()))
            .collect();
        prop_assert!(errors.is_empty(), "{tool}: {errors:?}");
    }
    Ok(())
}

fn truncated(text: &str) -> String {
    text.chars().take(400).collect()
}

/// Client text at its worst: short or over 100 KB, with NUL, controls, mixed scripts, quotes,
/// regex syntax and near-names of real tools.
fn hostile() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "a",
        "\0",
        "ü",
        "漢字",
        "🙂",
        "\u{202e}",
        "\n",
        "\"",
        "\\",
        "(",
        "[",
        "*",
        "ab",
        " ",
        "time",
        "get_current_time",
        "echo",
        "everything__echo",
        "__",
        "r-",
        "0f",
    ]);
    let word = prop::collection::vec(pieces, 1..12).prop_map(|v| v.concat());
    prop_oneof![
        3 => word.clone(),
        1 => "\\PC{0,40}",
        2 => (word, 1usize..4).prop_map(|(w, k)| w.repeat(100_000 * k / w.len().max(1) + 1)),
    ]
}

fn names() -> impl Strategy<Value = String> {
    prop_oneof![
        hostile(),
        prop::sample::select(vec![
            "time__get_current_time",
            "everything__echo",
            "filesystem__read_text_file",
            "memory__create_entities",
            "meta__lookup_full_content",
        ])
        .prop_map(str::to_owned),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn search_tools_results_fit_and_validate(
        query in hostile(),
        limit in prop::sample::select(vec![0i64, 1, 8, 50, 51, -1]),
        detail in prop::sample::select(vec!["name", "summary", "full", "everything"]),
        server in prop::option::of(names()),
        group in any::<bool>(),
    ) {
        let mut args = json!({"query": query, "limit": limit, "detail": detail, "group_by_server": group});
        if let Some(server) = server {
            args["server"] = server.into();
        }
        check(definitions::SEARCH_TOOLS, args)?;
        check(definitions::SEARCH_TOOLS, json!({"query": query, "limit": 50, "detail": "full"}))?;
    }

    #[test]
    fn get_tool_details_results_fit_and_validate(
        names in prop::collection::vec(names(), 0..22),
    ) {
        check(definitions::GET_TOOL_DETAILS, json!({"names": names}))?;
    }

    #[test]
    fn call_tool_results_fit_and_validate(
        name in names(),
        text in hostile(),
        offset in 0usize..400_000,
        numbers in (0i64..12, 0i64..120),
    ) {
        let stored = &rig().stored;
        check(definitions::CALL_TOOL, json!({"name": name, "arguments": {"message": text}}))?;
        check(definitions::CALL_TOOL, json!({"name": text, "arguments": {}}))?;
        check(definitions::CALL_TOOL, json!({"name": "meta__search_full_content", "arguments": {
            "resource_id": stored, "pattern": text, "context_lines": numbers.0, "max_matches": numbers.1}}))?;
        check(definitions::CALL_TOOL, json!({"name": "meta__search_full_content", "arguments": {
            "resource_id": text, "pattern": "a"}}))?;
        check(definitions::CALL_TOOL, json!({"name": "meta__lookup_full_content", "arguments": {
            "resource_id": stored, "offset": offset, "pointer": text}}))?;
        check(definitions::CALL_TOOL, json!({"name": "meta__lookup_full_content", "arguments": {
            "resource_id": stored, "offset": offset % 200_000}}))?;
        check(definitions::CALL_TOOL, json!({"name": "call_tool", "arguments": text}))?;
    }
}

#[test]
fn a_search_that_matches_many_tools_fits_the_budget_with_fewer_hits() {
    // Every hit in full detail is far over Codex's budget: hits are left out, and the hint says so.
    let result = call(
        definitions::SEARCH_TOOLS,
        json!({"query": "read files directories", "limit": 50, "detail": "full"}),
    );
    let out = result.structured_content.unwrap();
    let shown = out["hits"].as_array().unwrap().len();
    assert!((1..50).contains(&shown), "{shown} hits");
    assert!(
        out["hint"]
            .as_str()
            .unwrap()
            .contains("left out to stay within the result budget"),
        "{out}"
    );
}

#[test]
fn what_a_search_echoes_of_its_query_is_capped() {
    let query = "echo the message ".repeat(6_000);
    let result = call(definitions::SEARCH_TOOLS, json!({"query": query}));
    let echoed = result.structured_content.unwrap()["query"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(echoed.ends_with("… (102000 characters)"), "{echoed}");
    assert!(echoed.chars().count() < 250);
}

#[test]
fn details_of_a_huge_unknown_name_keep_not_found() {
    let result = call(
        definitions::GET_TOOL_DETAILS,
        json!({"names": ["x".repeat(1 << 20), "time__get_current_time"]}),
    );
    let out = result.structured_content.unwrap();
    assert_eq!(out["notFound"][0]["suggestions"], json!([]));
    assert!(out["notFound"][0]["name"].as_str().unwrap().len() < 300);
    assert_eq!(out["tools"][0]["name"], "time__get_current_time");
}

/// What the model reads of a result: its text blocks, then its structured content, with
/// stored-result ids (random) made stable.
fn model_view(result: &CallToolResult) -> String {
    let mut view = String::new();
    for block in &result.content {
        match block.as_text() {
            Some(text) => view.push_str(&text.text),
            None => view.push_str(&serde_json::to_string(block).unwrap()),
        }
        view.push_str("\n---\n");
    }
    if let Some(structured) = &result.structured_content {
        view.push_str(&serde_json::to_string_pretty(structured).unwrap());
    }
    regex::Regex::new("r-[0-9a-f]{32}")
        .unwrap()
        .replace_all(&view, "r-[id]")
        .into_owned()
}

macro_rules! snapshot {
    ($name:expr, $view:expr) => {
        insta::with_settings!({snapshot_path => "snapshots", prepend_module_to_snapshot => false}, {
            insta::assert_snapshot!($name, $view);
        })
    };
}

#[test]
fn snapshot_search_result() {
    let result = call(
        definitions::SEARCH_TOOLS,
        json!({"query": "current time in another timezone", "limit": 3}),
    );
    snapshot!("search_tools", model_view(&result));
}

#[test]
fn snapshot_details() {
    let result = call(
        definitions::GET_TOOL_DETAILS,
        json!({"names": ["time__convert_time", "time__get_curent_time"]}),
    );
    snapshot!("get_tool_details", model_view(&result));
}

#[test]
fn a_servers_own_instructions_come_with_its_first_details_in_a_session() {
    let session = Introduced::per_session();
    let details = |names: Value, introduced: &Introduced| {
        let result = call_in(
            definitions::GET_TOOL_DETAILS,
            json!({ "names": names }),
            introduced.clone(),
        );
        result.structured_content.expect("details")["serverInstructions"].clone()
    };
    // The time server has none; server-everything's come once, whole.
    assert_eq!(
        details(json!(["time__convert_time"]), &session),
        Value::Null
    );
    let first = details(json!(["everything__echo", "time__convert_time"]), &session);
    let everything = first["everything"]
        .as_str()
        .expect("everything's instructions");
    assert!(
        everything.starts_with("# Everything Server"),
        "{everything}"
    );
    assert_eq!(first.as_object().map(|o| o.len()), Some(1));
    assert_eq!(
        details(json!(["everything__get-sum"]), &session),
        Value::Null
    );
    // Where no session remembers (2026-07-28, the command line): every time.
    let stateless = Introduced::default();
    for _ in 0..2 {
        assert!(details(json!(["everything__echo"]), &stateless)["everything"].is_string());
    }
}

#[test]
fn snapshot_initialize_instructions() {
    use rmcp::ServerHandler;
    let info = rig().server.get_info();
    snapshot!(
        "initialize_instructions",
        info.instructions.unwrap_or_default()
    );
}

#[test]
fn snapshot_a_shaped_result_with_its_notice() {
    let rig = rig();
    let lines: String = (0..2_000)
        .map(|i| format!("{{\"id\": {i}, \"name\": \"item {i}\", \"tags\": [\"a\", \"b\"]}}\n"))
        .collect();
    let limits = crate::budget::Limits {
        soft: 300,
        hard: 1_000_000,
    };
    let route = Route::CallTool {
        server: "everything".into(),
    };
    let result = rig.runtime.block_on(rig.server.state.results.shape(
        "everything__echo",
        &route,
        limits,
        &rig.owner,
        CallToolResult::success(vec![rmcp::model::ContentBlock::text(lines)]),
    ));
    snapshot!("shaped_result", model_view(&result));
}

#[test]
fn hundreds_of_unavailable_servers_leave_room_for_the_hits_and_the_one_that_matters() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config =
        json!({"metaServer": {"skillsDirs": []}, "mcpServers": {"time": {"command": "x"}}});
    let mut settings =
        Settings::parse(&root.join("config.json"), &config.to_string()).expect("config");
    settings.catalog_dir = root.join("catalogs");
    settings.skipped = (0..300)
        .map(|i| format!("broken-{i:03}"))
        .chain(["time".to_owned()])
        .map(|key| crate::config::SkippedServer {
            key,
            reason: "its command is not installed".into(),
        })
        .collect();
    let (library, _) = super::load_library(&settings).expect("library");
    let args: super::SearchArgs =
        serde_json::from_value(json!({"query": "current time in a timezone"})).unwrap();
    let out = super::search_tools(&library, &settings, args)
        .structured_content
        .unwrap();
    let shown: Vec<&str> = out["unavailable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["server"].as_str().unwrap())
        .collect();
    assert_eq!(
        shown.len(),
        super::tools::search::SERVERS_SHOWN,
        "{shown:?}"
    );
    assert_eq!(shown[0], "time", "the hits' server comes first: {shown:?}");
    let hint = out["hint"].as_str().unwrap();
    assert!(hint.contains("293 more servers"), "{hint}");
    assert_eq!(out["hits"][0]["server"], "time");
    // The hint's way to the rest: a search with `server` set names the reason.
    let args: super::SearchArgs =
        serde_json::from_value(json!({"query": "x", "server": "broken-250"})).unwrap();
    let result = super::search_tools(&library, &settings, args);
    assert_eq!(result.is_error, Some(true));
    let text = &result.content[0].as_text().unwrap().text;
    assert!(
        text.contains("\"broken-250\" cannot be used: its command is not installed"),
        "{text}"
    );
}

#[test]
fn the_surface_stays_within_4000_characters_whatever_the_number_of_servers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tools = json!({"tools": definitions()}).to_string();
    let mut sizes = Vec::new();
    for count in [0, 4, 70, 1000] {
        let servers: serde_json::Map<String, Value> = (0..count)
            .map(|i| {
                let about =
                    "Reads, writes and searches the records of one team's service in detail";
                (
                    format!("team-service-{i:04}"),
                    json!({"command": "x", "description": about}),
                )
            })
            .collect();
        let config = json!({"metaServer": {"skillsDirs": []}, "mcpServers": servers});
        let settings =
            Settings::parse(&root.join("config.json"), &config.to_string()).expect("config");
        let (library, _) = super::load_library(&settings).expect("library");
        let overview = super::overview(&settings, &library);
        sizes.push(tools.chars().count() + overview.chars().count());
    }
    assert!(sizes.iter().all(|&n| n <= 4_000), "{sizes:?}");
    // Capped: from 70 to 1,000 servers only the count of the servers left out grows a digit.
    assert!(sizes[3] <= sizes[2] + 1, "{sizes:?}");
}

#[test]
fn a_weak_search_while_a_server_is_indexed_points_at_that_server_not_the_query() {
    let rig = rig();
    let state = &rig.server.state;
    let library = state.catalogs.library();
    let search = |indexing: &[&str], query: &str| {
        let scope = super::tools::search::Scope {
            library: &library,
            servers: vec!["time", "slow"],
            boosted: Default::default(),
            indexing: indexing.iter().map(|s| s.to_string()).collect(),
            unavailable: Vec::new(),
            results: &state.results,
            soft: CLIENT_LIMIT,
            trust: &state.trust,
            access: &Default::default(),
        };
        let args = serde_json::from_value(json!({ "query": query })).unwrap();
        let out = super::tools::search::answer(&scope, args)
            .structured_content
            .unwrap();
        out["hint"].as_str().unwrap_or_default().to_owned()
    };
    let hint = search(&["slow"], "zebra husbandry");
    assert!(
        hint.starts_with(
            "No tool matched \"zebra husbandry\" well yet: server \"slow\" is still being indexed"
        ) && hint.contains("with \"server\": \"slow\"")
            && !hint.contains("Rephrase"),
        "{hint}"
    );
    assert!(search(&["slow", "other"], "zebra husbandry").contains("servers slow, other are"));
    assert!(
        search(&[], "zebra husbandry").contains("Rephrase"),
        "nothing indexing: rephrase"
    );
}

#[test]
fn a_thousand_servers_are_named_by_the_few_that_matter_not_all() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut servers: serde_json::Map<String, Value> = (0..1000)
        .map(|i| (format!("team-{i:04}"), json!({"command": "x"})))
        .collect();
    servers.insert("time".into(), json!({"command": "x"}));
    let config = json!({"metaServer": {"skillsDirs": []}, "mcpServers": servers});
    let mut settings =
        Settings::parse(&root.join("config.json"), &config.to_string()).expect("config");
    settings.catalog_dir = root.join("catalogs");
    let (library, _) = super::load_library(&settings).expect("library");
    let search = |args: Value| {
        super::search_tools(&library, &settings, serde_json::from_value(args).unwrap())
    };

    // A weak match: the hint names the hits' servers first and counts the rest.
    let out = search(json!({"query": "timezone of a meeting"}))
        .structured_content
        .unwrap();
    assert_eq!(out["confident"], false, "{out}");
    let mut of_hits: Vec<&str> = Vec::new();
    for hit in out["hits"].as_array().unwrap() {
        let server = hit["server"].as_str().unwrap();
        if !of_hits.contains(&server) {
            of_hits.push(server);
        }
    }
    assert!(of_hits.contains(&"time"), "{out}");
    let hint = out["hint"].as_str().unwrap();
    let listed = hint.split("(servers: ").nth(1).expect(hint);
    let first = format!("{}, team-0000, ", of_hits.join(", "));
    assert!(listed.starts_with(&first), "{hint}");
    let last = format!("team-{:04} and ", 19 - of_hits.len());
    assert!(listed.contains(&last), "{hint}");
    assert!(listed.ends_with(" more)."), "{hint}");

    // An unknown server: the closest names, not a thousand.
    let result = search(json!({"query": "now", "server": "tme"}));
    assert_eq!(result.is_error, Some(true));
    let text = &result.content[0].as_text().unwrap().text;
    assert!(
        text.starts_with("unknown server \"tme\"; the closest of the 1002 servers: time, "),
        "{text}"
    );
    assert!(text.ends_with(" and 982 more"), "{text}");
}
