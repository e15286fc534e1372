//! Learning from use in a serving process, against in-process upstreams: what a session's
//! search and call teach, what teaches nothing, what a limited token can teach, what a changed
//! tool loses, and that the model never reads what was learned.

use std::sync::Arc;

use rmcp::model::{CallToolResult, JsonObject, Tool};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::config::{Settings, TokenConfig, ToolFilter};
use crate::learning::Evidence;
use crate::server::State;
use crate::server::access::Access;
use crate::server::caller::{Caller, Teacher, Who};
use crate::server::tools::request::Request;
use crate::upstream::in_process::TestUpstream;

/// An upstream whose `echo` answers and whose `broken` fails.
fn upstream() -> TestUpstream {
    let upstream = TestUpstream::default();
    let schema = Arc::new(json!({"type": "object"}).as_object().cloned().unwrap());
    *upstream.tools.lock() = [
        ("echo", "Repeats the text it is given"),
        ("broken", "Repeats nothing at all"),
        ("sleep", "Waits a while before answering"),
    ]
    .into_iter()
    .map(|(name, description)| Tool::new(name, description, schema.clone()))
    .collect();
    upstream
}

/// A serving state over the servers `up` and `other` (both `upstream`), catalogs in `dir`
/// (listed first), learning on or off.
async fn serving(dir: &std::path::Path, upstream: &TestUpstream, learning: bool) -> Arc<State> {
    let config = json!({
        "metaServer": {"skillsDirs": [], "learning": learning},
        "mcpServers": {"up": {"command": "/nonexistent"}, "other": {"command": "/nonexistent"}}
    });
    let mut settings = Settings::parse(&dir.join("config.json"), &config.to_string()).unwrap();
    settings.catalog_dir = dir.join("catalogs");
    let (library, _) = crate::server::load_library(&settings).unwrap();
    let state = State::with_manager(settings, library, |servers, events| {
        upstream.manager(servers, Some(events))
    });
    for server in ["up", "other"] {
        crate::server::catalogs::first_run::ensure(&state, server)
            .await
            .unwrap();
    }
    state
}

/// A caller in `session` of `principal`, seeing what `access` lets it.
fn caller(session: &str, principal: Option<&str>, access: Access) -> Caller {
    Caller {
        client_limit: None,
        owner: crate::result::Owner::session(),
        principal: principal.map(Into::into),
        cancelled: CancellationToken::new(),
        progress_to: None,
        origin: crate::upstream::Origin::Detached,
        introduced: Default::default(),
        who: Who {
            teacher: Teacher::of(Some(session), principal),
            access,
            ..Default::default()
        },
    }
}

async fn call(state: &Arc<State>, caller: &Caller, tool: &str, arguments: Value) -> CallToolResult {
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object")
    };
    let arguments: JsonObject = arguments;
    let request = Request::read(tool, arguments, crate::server::definitions()).unwrap();
    request
        .run(state, caller)
        .await
        .result
        .expect("a tool result, not a JSON-RPC error")
}

/// The names of the hits of a search for `query`.
async fn search(state: &Arc<State>, caller: &Caller, query: &str) -> Vec<String> {
    let found = call(state, caller, "search_tools", json!({"query": query})).await;
    super::names(&found, "hits")
}

/// Merges what was selected, as the learner's task does a moment later.
async fn merge(state: &Arc<State>) {
    let learner = state.learning.clone().expect("learning is on");
    let state = state.clone();
    tokio::task::spawn_blocking(move || learner.merge(&state))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_search_then_a_call_teaches_the_query_and_a_restart_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = upstream();
    let state = serving(dir.path(), &upstream, true).await;
    let me = caller("session-1", None, Access::default());
    assert!(search(&state, &me, "parrot my words").await.is_empty());

    let shown = search(&state, &me, "repeat parrot my words").await;
    assert!(shown.contains(&"up__echo".to_owned()), "{shown:?}");
    let called = call(
        &state,
        &me,
        "call_tool",
        json!({"name": "up__echo", "arguments": {"text": "hi"}}),
    )
    .await;
    assert_ne!(called.is_error, Some(true));
    merge(&state).await;
    let kept = Evidence::load(&state.settings().catalog_dir).unwrap();
    let taught: Vec<&str> = kept.tools["up__echo"]
        .queries
        .iter()
        .map(|q| q.text.as_str())
        .collect();
    assert_eq!(taught, ["repeat parrot my words"], "kept as typed");
    assert_eq!(kept.len(), 1, "only the tool called");
    assert_eq!(search(&state, &me, "parrot my words").await, ["up__echo"]);

    // What was learned moves rankings; the model never reads it.
    let other = caller("session-2", None, Access::default());
    for (tool, args) in [
        ("search_tools", json!({"query": "parrot", "detail": "full"})),
        ("search_tools", json!({"query": "zzz unknown"})),
        ("get_tool_details", json!({"names": ["up__echo"]})),
    ] {
        let shown = call(&state, &other, tool, args).await;
        let text = serde_json::to_string(&shown).unwrap();
        assert!(!text.contains("my words"), "{tool}: {text}");
    }
    let instructions = crate::server::overview(&state.settings(), &state.catalogs.library());
    assert!(!instructions.contains("parrot"), "{instructions}");
    drop(state);

    // A restart reads it back.
    let state = serving(dir.path(), &upstream, true).await;
    assert_eq!(search(&state, &me, "parrot my words").await, ["up__echo"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn no_search_a_failed_call_another_session_or_learning_off_teach_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = upstream();
    let state = serving(dir.path(), &upstream, true).await;
    let me = caller("session-1", None, Access::default());
    // A call without a search that showed it.
    call(
        &state,
        &me,
        "call_tool",
        json!({"name": "up__echo", "arguments": {}}),
    )
    .await;
    // A search that showed `broken`, then a failed call of it.
    assert!(
        search(&state, &me, "repeat nothing")
            .await
            .contains(&"up__broken".to_owned())
    );
    let failed = call(
        &state,
        &me,
        "call_tool",
        json!({"name": "up__broken", "arguments": {}}),
    )
    .await;
    assert_eq!(failed.is_error, Some(true));
    // Another session's search does not count for this one's call.
    let them = caller("session-2", None, Access::default());
    assert!(
        search(&state, &them, "waits a while")
            .await
            .contains(&"up__sleep".to_owned())
    );
    call(
        &state,
        &me,
        "call_tool",
        json!({"name": "up__sleep", "arguments": {"secs": 0}}),
    )
    .await;
    merge(&state).await;
    assert!(
        Evidence::load(&state.settings().catalog_dir)
            .unwrap()
            .is_empty()
    );

    // With learning off nothing is recorded, and search ranks as a library without it.
    let off_dir = tempfile::tempdir().unwrap();
    let off = serving(off_dir.path(), &upstream, false).await;
    assert!(off.learning.is_none());
    let before = search(&off, &me, "repeat the text").await;
    search(&off, &me, "parrot my words repeat").await;
    call(
        &off,
        &me,
        "call_tool",
        json!({"name": "up__echo", "arguments": {}}),
    )
    .await;
    assert!(
        !off.settings()
            .catalog_dir
            .join(crate::learning::DIR)
            .exists()
    );
    assert_eq!(search(&off, &me, "repeat the text").await, before);
    assert!(search(&off, &me, "parrot").await.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_limited_token_teaches_only_for_the_servers_it_sees() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = upstream();
    let state = serving(dir.path(), &upstream, true).await;
    let token = TokenConfig {
        name: "ci".into(),
        token: "${T}".into(),
        servers: Some(vec!["up".into()]),
        deny_tools: ToolFilter::new(Vec::new(), Vec::new()).unwrap(),
        admin: false,
    };
    let limited = caller("s", Some("ci"), Access::of(&token));
    let shown = search(&state, &limited, "repeat the text").await;
    assert!(shown.contains(&"up__echo".to_owned()), "{shown:?}");
    assert!(!shown.iter().any(|t| t.starts_with("other__")), "{shown:?}");
    let refused = call(
        &state,
        &limited,
        "call_tool",
        json!({"name": "other__echo", "arguments": {}}),
    )
    .await;
    assert_eq!(refused.is_error, Some(true));
    call(
        &state,
        &limited,
        "call_tool",
        json!({"name": "up__echo", "arguments": {}}),
    )
    .await;
    // Even a selection made on its behalf of a tool it cannot see teaches nothing.
    let library = state.catalogs.library();
    let learner = state.learning.clone().unwrap();
    let teacher = limited.who.teacher.clone().unwrap();
    learner.searched(&teacher, "repeat the text", &["other__echo".to_owned()]);
    let hidden = library.get("other__echo").unwrap();
    learner.selected(
        &teacher,
        &limited.who.access,
        hidden,
        crate::learning::Weight::Call,
    );
    merge(&state).await;
    let kept = Evidence::load(&state.settings().catalog_dir).unwrap();
    assert_eq!(kept.tools.keys().collect::<Vec<_>>(), ["up__echo"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_changed_tool_loses_what_it_learned() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = upstream();
    let state = serving(dir.path(), &upstream, true).await;
    let me = caller("s", None, Access::default());
    search(&state, &me, "repeat parrot my words").await;
    call(
        &state,
        &me,
        "call_tool",
        json!({"name": "up__echo", "arguments": {}}),
    )
    .await;
    search(&state, &me, "waits a while").await;
    call(
        &state,
        &me,
        "call_tool",
        json!({"name": "up__sleep", "arguments": {}}),
    )
    .await;
    merge(&state).await;
    assert_eq!(search(&state, &me, "parrot").await, ["up__echo"]);

    // `echo`'s description changes; the server is listed again.
    let schema = Arc::new(json!({"type": "object"}).as_object().cloned().unwrap());
    upstream.tools.lock()[0] = Tool::new("echo", "Says the text back", schema);
    let fresh = crate::catalog::fetch(&state.manager, state.settings().server("up").unwrap())
        .await
        .unwrap();
    state.catalogs.replace_catalog(fresh).unwrap();
    state.learning.as_ref().unwrap().recheck();
    merge(&state).await;
    assert!(
        search(&state, &me, "parrot").await.is_empty(),
        "echo must earn it again"
    );
    let kept = Evidence::load(&state.settings().catalog_dir).unwrap();
    assert_eq!(
        kept.tools.keys().collect::<Vec<_>>(),
        ["up__sleep"],
        "the unchanged tool keeps it"
    );
}
