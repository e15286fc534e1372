//! The meta-tools (`search_tools`, `get_tool_details`, `call_tool`) and the built-in `meta`
//! tools, with the one call path every tool call takes (`call`): the client's own calls and a
//! script's nested ones, which reach it through the dispatch handle `script` is given.

pub(in crate::server) mod builtin;
pub(in crate::server) mod call;
pub(in crate::server) mod definitions;
pub(in crate::server) mod details;
mod policy;
pub(in crate::server) mod reply;
pub(in crate::server) mod request;
pub(in crate::server) mod script;
pub(in crate::server) mod search;
mod skill;

use std::sync::Arc;

use crate::config::Settings;
use crate::library::{Library, LoadReport};
use crate::search::SearchError;
use crate::server::State;
use crate::server::caller::Caller;

pub use builtin::catalog as builtin_catalog;
pub use definitions::definitions;
pub use search::{Args as SearchArgs, Detail};

/// Runs `search_tools` with these arguments over `library`, as a session that has read no
/// skill and within the budget a client without a limit of its own gets: the CLI's `search`
/// answers with the very same code, without a server.
pub fn search_tools(
    library: &Library,
    settings: &Settings,
    args: SearchArgs,
) -> rmcp::model::CallToolResult {
    let results = crate::server::state::result_handler(settings, None);
    let trust = crate::trust::Trust::new(settings.trust, settings.catalog_dir.clone());
    let scope = search::Scope {
        library,
        trust: &trust,
        servers: settings.servers.iter().map(|s| s.name.as_str()).collect(),
        boosted: Default::default(),
        indexing: Vec::new(),
        unavailable: settings
            .skipped
            .iter()
            .map(|s| (s.key.as_str(), s.reason.as_str()))
            .collect(),
        results: &results,
        soft: crate::server::state::budgets(settings)
            .limits(&crate::budget::Route::SearchTools, None)
            .soft,
        access: &Default::default(),
    };
    search::answer(&scope, args)
}

/// The library of the configured servers' catalogs, skills and the built-in `meta` tools.
pub fn load_library(settings: &Settings) -> Result<(Library, LoadReport), SearchError> {
    Library::load(settings, Some(builtin::catalog()))
}

/// Runs one `call_tool` outside any session, as `meta-server call` does: the very path of
/// the meta-tool (first run, allow/deny, argument validation, lazy connect, result handling).
pub async fn call(
    state: &Arc<State>,
    name: &str,
    arguments: serde_json::Map<String, serde_json::Value>,
) -> rmcp::model::CallToolResult {
    let caller = Caller {
        client_limit: None,
        owner: crate::result::Owner::session(),
        principal: None,
        cancelled: tokio_util::sync::CancellationToken::new(),
        progress_to: None,
        origin: crate::upstream::Origin::Detached,
        introduced: Default::default(),
        who: Default::default(),
    };
    let args = call::Args {
        name: name.to_owned(),
        arguments: Some(arguments),
    };
    call::run(state, &caller, args).await.into_reply()
}
