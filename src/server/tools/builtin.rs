//! meta-server's own tools, under the reserved server name `meta`: reading stored full results.
//! Reached through `call_tool` and found by `search_tools` like any upstream tool.

use std::sync::LazyLock;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::reply::{self, Reply};
use crate::budget::Route;
use crate::catalog::Catalog;
use crate::config::RESERVED_SERVER;
use crate::server::State;
use crate::server::caller::Caller;

static CATALOG: LazyLock<Catalog> = LazyLock::new(|| {
    let tools = serde_json::from_str(include_str!("builtin.json")).expect("built-in tools parse");
    Catalog::new(RESERVED_SERVER, tools)
});

/// The built-in tools as a catalog of the `meta` server.
pub fn catalog() -> &'static Catalog {
    &CATALOG
}

/// Tokens of a lookup page's budget left for the continuation line.
const PAGE_RESERVE: usize = 300;

#[derive(Deserialize)]
struct LookupArgs {
    resource_id: String,
    #[serde(default)]
    offset: usize,
    limit: Option<usize>,
    pointer: Option<String>,
}

#[derive(Deserialize)]
struct SearchArgs {
    resource_id: String,
    pattern: String,
    #[serde(default)]
    context_lines: usize,
    #[serde(default = "default_matches")]
    max_matches: usize,
}

fn default_matches() -> usize {
    20
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SearchOutput<'a> {
    resource_id: &'a str,
    total_matches: usize,
    matches: &'a [crate::result::Match],
}

/// Runs built-in tool `tool` (arguments already checked against its schema).
pub(in crate::server) async fn run(
    state: &State,
    caller: &Caller,
    tool: &str,
    arguments: Map<String, Value>,
) -> Reply {
    let route = Route::CallTool {
        server: RESERVED_SERVER.to_owned(),
    };
    match tool {
        "lookup_full_content" => {
            let args: LookupArgs = match reply::parse_args(tool, arguments) {
                Ok(args) => args,
                Err(e) => return reply::error(e),
            };
            // Room for the continuation line and the structured copy of the page.
            let budget = state
                .limits(&route, caller.client_limit)
                .soft
                .saturating_sub(PAGE_RESERVE)
                .max(1);
            match state
                .results
                .page(
                    &args.resource_id,
                    &caller.owner,
                    args.offset,
                    args.limit,
                    args.pointer.as_deref(),
                    budget,
                )
                .await
            {
                Ok(page) => {
                    let mut text = page.content.clone();
                    if page.has_more {
                        text.push_str(&format!(
                            "\n[characters {}-{} of {}; continue with {}]",
                            page.offset,
                            page.next_offset,
                            page.total,
                            crate::result::notice::recovery_hint(
                                &page.resource_id,
                                page.next_offset
                            )
                        ));
                    }
                    reply::structured(&page, text)
                }
                Err(e) => reply::error(e.to_string()),
            }
        }
        "search_full_content" => {
            let args: SearchArgs = match reply::parse_args(tool, arguments) {
                Ok(args) => args,
                Err(e) => return reply::error(e),
            };
            match state
                .results
                .search(
                    &args.resource_id,
                    &caller.owner,
                    &args.pattern,
                    args.context_lines,
                    args.max_matches,
                )
                .await
            {
                Ok((matches, total_matches)) => {
                    // As many matches as fit the budget; totalMatches still counts them all.
                    let soft = state.limits(&route, caller.client_limit).soft;
                    reply::fitted(&state.results, soft, 0, matches.len(), |shown| {
                        let out = SearchOutput {
                            resource_id: &args.resource_id,
                            total_matches,
                            matches: &matches[..shown],
                        };
                        let mut text = format!("{total_matches} matches");
                        for m in out.matches {
                            text.push_str(&format!(
                                "\noffset {} line {}: {}",
                                m.offset, m.line, m.text
                            ));
                        }
                        if shown < matches.len() {
                            text.push_str(&format!(
                                "\n({} more matches left out to stay within the result budget; search with a narrower pattern or fewer context_lines)",
                                matches.len() - shown
                            ));
                        }
                        reply::structured(&out, text)
                    })
                }
                Err(e) => reply::error(e.to_string()),
            }
        }
        other => reply::error(format!("meta-server has no built-in tool \"{other}\"")),
    }
}
