//! `search_tools`: ranked hits from the catalog, without connecting anything.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::{RESERVED_SERVER, SKILL_SERVER};
use crate::library::{Entry, Library};
use crate::result::ResultHandler;
use crate::trust::Trust;

use super::reply::{self, Reply};
use crate::server::State;
use crate::server::access::Access;
use crate::server::caller::Who;
use crate::server::catalogs::unavailable_of;

/// `search_tools` arguments, as its input schema declares them.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    pub query: String,
    #[serde(default = "default_limit")]
    pub limit: usize,
    pub server: Option<String>,
    #[serde(default)]
    pub detail: Detail,
    #[serde(default)]
    pub group_by_server: bool,
}

fn default_limit() -> usize {
    8
}

/// How much of each hit to show.
#[derive(Deserialize, Default, Clone, Copy, PartialEq, Debug)]
#[serde(rename_all = "lowercase")]
pub enum Detail {
    Name,
    #[default]
    Summary,
    Full,
}

impl std::str::FromStr for Detail {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "name" => Ok(Self::Name),
            "summary" => Ok(Self::Summary),
            "full" => Ok(Self::Full),
            other => Err(format!(
                "\"{other}\" is not a detail level: name, summary or full"
            )),
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Output {
    query: String,
    confident: bool,
    /// `hybrid` when the hits were ranked with tool vectors, `bm25` otherwise (vectors off,
    /// not loaded yet, or the query could not be embedded).
    mode: &'static str,
    hits: Vec<Hit>,
    #[serde(skip_serializing_if = "Option::is_none")]
    hint: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    indexing: Vec<String>,
    /// Configured servers that cannot be served now, and why (e.g. a login is needed).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    unavailable: Vec<Unavailable>,
    /// With `group_by_server`: servers in the order of their best hit, with their hits' names.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    groups: Vec<Group>,
}

#[derive(Serialize, Clone)]
struct Unavailable {
    server: String,
    reason: String,
}

#[derive(Serialize)]
struct Group {
    server: String,
    hits: Vec<String>,
}

#[derive(Serialize, Clone)]
#[serde(rename_all = "camelCase")]
struct Hit {
    name: String,
    server: String,
    tool: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    signature: Option<String>,
    score: f64,
    /// The tool's behaviour hints (`readOnlyHint`, `destructiveHint`, ...), when it has any.
    #[serde(skip_serializing_if = "Option::is_none")]
    annotations: Option<Value>,
    /// `"skill"` for skills; absent for tools.
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    input_schema: Option<Value>,
    /// Why the tool's texts deserve care (see [`crate::catalog::ToolDef::flags`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    flags: Vec<String>,
}

/// Length of the one-line description in a hit (`detail: "full"` gives all of it).
const SUMMARY_CHARS: usize = 160;
/// Servers listed as unavailable or still indexing in one result: those of the hits and the
/// `server` filter first. A config of hundreds of servers that cannot start would otherwise
/// fill every result (and make it slow to fit).
pub(in crate::server) const SERVERS_SHOWN: usize = 8;

/// Hits looked at when the caller does not see every tool, so that the best of those it sees
/// are among them.
const SCOPED_DEPTH: usize = 200;

/// Server names a message lists in full; of more, the first this many and how many remain.
const NAMES_SHOWN: usize = 20;

/// What `search_tools` answers from: the library, what the session knows around it, and
/// the budget its result must keep within.
pub struct Scope<'a> {
    pub library: &'a Library,
    /// Which tools wait for approval; they are flagged.
    pub trust: &'a Trust,
    /// Configured servers, with or without a catalog yet.
    pub servers: Vec<&'a str>,
    /// Servers whose tools rank higher because a skill that needs them was read.
    pub boosted: BTreeSet<String>,
    /// Servers being indexed in the background right now.
    pub indexing: Vec<String>,
    /// Configured servers that cannot be served now, with why.
    pub unavailable: Vec<(&'a str, &'a str)>,
    /// Measures replies against the budget.
    pub results: &'a ResultHandler,
    /// The result budget, in tokens.
    pub soft: usize,
    /// What the caller may see (a named token's servers and tools).
    pub(crate) access: &'a Access,
}

/// Runs a search for `who` (which sees what its access lets it) within `soft` tokens; what it
/// showed is remembered for what the session selects next (`learning.rs`).
pub(in crate::server) async fn run(state: &State, who: &Who, soft: usize, args: Args) -> Reply {
    let access = &who.access;
    let span = tracing::info_span!(
        target: crate::telemetry::TARGET,
        "search",
        "meta_server.search.mode" = tracing::field::Empty,
        "meta_server.search.hits" = tracing::field::Empty,
        "meta_server.search.query" = tracing::field::Empty,
    );
    let _in = span.enter();
    if !span.is_disabled() && crate::telemetry::payloads() {
        span.record("meta_server.search.query", args.query.as_str());
    }
    // Never waits for the model: until the tool vectors are attached, hits are BM25's.
    let library = state.catalogs.library();
    let settings = state.settings();
    let failed = state.catalogs.failed();
    let scope = Scope {
        library: &library,
        trust: &state.trust,
        servers: settings
            .servers
            .iter()
            .map(|s| s.name.as_str())
            .filter(|s| access.sees_server(s))
            .collect(),
        boosted: state.catalogs.boosted(),
        indexing: (state.catalogs.indexing().into_iter())
            .filter(|s| access.sees_server(s))
            .collect(),
        unavailable: unavailable_of(&settings, &failed)
            .filter(|(s, _)| access.sees_server(s))
            .collect(),
        results: &state.results,
        soft,
        access,
    };
    let query = args.query.clone();
    let reply = answer(&scope, args);
    if !span.is_disabled()
        && let Some(output) = &reply.structured_content
    {
        span.record("meta_server.search.mode", output["mode"].as_str());
        let hits = output["hits"].as_array().map_or(0, Vec::len);
        span.record("meta_server.search.hits", hits as i64);
    }
    crate::server::catalogs::learning::searched(state, who, &query, &reply);
    reply
}

/// `search_tools` over `scope`: the MCP server and the CLI's `search` both answer with it.
/// The result keeps within the budget by showing fewer hits (the hint says how many were left
/// out), and what it repeats of the query is capped.
pub fn answer(scope: &Scope, args: Args) -> Reply {
    let servers = match validate(scope, &args) {
        Ok(servers) => servers,
        Err(refused) => return *refused,
    };
    let library = scope.library;
    // A caller that does not see every tool gets the best of those it sees.
    let access = scope.access;
    let depth = if access.is_limited() {
        args.limit.max(SCOPED_DEPTH)
    } else {
        args.limit
    };
    let mut found =
        match library.search_boosted(&args.query, depth, args.server.as_deref(), &scope.boosted) {
            Ok(found) => found,
            Err(e) => return reply::error(e.to_string()),
        };
    found.retain(|h| {
        library
            .get(&h.key)
            .is_some_and(|e| access.sees(&e.qualified))
    });
    found.truncate(args.limit);
    let hits = project(library, scope.trust, &found, args.detail);
    let confident = crate::search::confident(&found);
    let close: Vec<&str> = found
        .iter()
        .filter(|h| h.close)
        .filter_map(|h| library.get(&h.key).map(|e| e.qualified.as_str()))
        .collect();
    let query = reply::echo(&args.query);
    let hint = if !close.is_empty() {
        Some(format!(
            "No tool is named \"{}\". Did you mean {}? Listed first.",
            reply::echo(args.query.trim()),
            close.join(" or ")
        ))
    } else if !confident && args.server.is_none() && !scope.indexing.is_empty() {
        Some(indexing_hint(&args.query, &scope.indexing))
    } else {
        (!confident).then(|| weak_hint(scope, &args.query, &hits, &servers))
    };
    // Servers that matter to this search first: the filter's and the hits'.
    let relevant = |server: &str| {
        args.server.as_deref() == Some(server) || hits.iter().any(|h| h.server == server)
    };
    let (unavailable, more_unavailable) = relevant_first(&scope.unavailable, |u| relevant(u.0));
    let unavailable: Vec<Unavailable> = unavailable
        .into_iter()
        .map(|(server, reason)| Unavailable {
            server: (*server).to_owned(),
            reason: (*reason).to_owned(),
        })
        .collect();
    let (indexing, more_indexing) = relevant_first(&scope.indexing, |s| relevant(s));
    let indexing: Vec<String> = indexing.into_iter().cloned().collect();
    let hint = match (more_unavailable + more_indexing, hint) {
        (0, hint) => hint,
        (more, hint) => {
            let note = format!(
                "{more} more servers are unavailable or still indexing; search with \"server\" set to one of them to see its state."
            );
            Some(hint.map_or(note.clone(), |h| format!("{h} {note}")))
        }
    };
    let hybrid = found
        .first()
        .map_or(library.is_hybrid(), |h| h.similarity.is_some());
    reply::fitted(scope.results, scope.soft, 0, hits.len(), |shown| {
        let mut hint = hint.clone();
        let left_out = hits.len() - shown;
        if left_out > 0 {
            let note = format!(
                "{left_out} more hits were left out to stay within the result budget; search again with a lower limit, detail \"name\" or one server."
            );
            hint = Some(hint.map_or(note.clone(), |h| format!("{h} {note}")));
        }
        let hits = hits[..shown].to_vec();
        let (hits, groups) = if args.group_by_server {
            group(hits)
        } else {
            (hits, Vec::new())
        };
        let output = Output {
            query: query.clone(),
            confident,
            mode: if hybrid { "hybrid" } else { "bm25" },
            hits,
            hint,
            indexing: indexing.clone(),
            unavailable: unavailable.clone(),
            groups,
        };
        let text = render(&output);
        reply::structured(&output, text)
    })
}

/// The servers a search may name (configured ones, then the built-in ones that have tools),
/// or the error result for a limit out of range or a `server` that is not one of them.
fn validate<'a>(scope: &Scope<'a>, args: &Args) -> Result<Vec<&'a str>, Box<Reply>> {
    if !(1..=50).contains(&args.limit) {
        return Err(Box::new(reply::error(format!(
            "limit must be between 1 and 50, got {}",
            args.limit
        ))));
    }
    let mut servers = scope.servers.clone();
    for builtin in [RESERVED_SERVER, SKILL_SERVER] {
        if scope.library.has_server(builtin) {
            servers.push(builtin);
        }
    }
    let Some(server) = args.server.as_deref().filter(|s| !servers.contains(s)) else {
        return Ok(servers);
    };
    if let Some((_, reason)) = scope.unavailable.iter().find(|(s, _)| *s == server) {
        return Err(Box::new(reply::error(format!(
            "server \"{}\" cannot be used: {reason}",
            reply::echo(server)
        ))));
    }
    let closest = crate::search::closest(server, &servers);
    let which = if servers.len() > NAMES_SHOWN {
        format!("the closest of the {} servers", servers.len())
    } else {
        "servers are".to_owned()
    };
    Err(Box::new(reply::error(format!(
        "unknown server \"{}\"; {which}: {}",
        reply::echo(server),
        name_list(&closest)
    ))))
}

/// The hits as the result shows them, at the asked `detail`.
fn project(
    library: &Library,
    trust: &Trust,
    found: &[crate::search::Hit],
    detail: Detail,
) -> Vec<Hit> {
    found
        .iter()
        .filter_map(|h| library.get(&h.key).map(|e| (h, e)))
        .map(|(h, e)| Hit {
            name: e.qualified.clone(),
            server: e.server.clone(),
            tool: e.def.name.clone(),
            description: match detail {
                Detail::Name => None,
                Detail::Summary => Some(e.def.summary(SUMMARY_CHARS)),
                Detail::Full => Some(e.def.description().trim().to_owned()),
            },
            signature: (detail != Detail::Name).then(|| e.def.signature()),
            score: (f64::from(h.score) * 1000.0).round() / 1000.0,
            kind: e.skill.as_ref().map(|_| "skill"),
            annotations: (detail != Detail::Name)
                .then(|| hints(&e.def.value()))
                .flatten(),
            input_schema: (detail == Detail::Full).then(|| Value::Object(e.def.input_schema())),
            flags: flags(library, trust, e),
        })
        .collect()
}

/// What the model should know before it trusts `entry`: its quarantine, if it waits for
/// approval, then what its texts show (see [`crate::catalog::ToolDef::flags`]).
pub(in crate::server) fn flags(library: &Library, trust: &Trust, entry: &Entry) -> Vec<String> {
    let held = trust.quarantine_of(library, entry);
    held.map(|q| q.flag(&entry.qualified))
        .into_iter()
        .chain(entry.def.flags())
        .collect()
}

/// At most [`SERVERS_SHOWN`] of `items`, those `relevant` says first (each group in its
/// order), and how many were left out.
fn relevant_first<T>(items: &[T], relevant: impl Fn(&T) -> bool) -> (Vec<&T>, usize) {
    let mut shown: Vec<&T> = (items.iter().filter(|i| relevant(i)))
        .take(SERVERS_SHOWN)
        .collect();
    let others = items.iter().filter(|i| !relevant(i));
    shown.extend(others.take(SERVERS_SHOWN - shown.len()));
    (shown, items.len().saturating_sub(SERVERS_SHOWN))
}

/// `names` for a message: all of them up to [`NAMES_SHOWN`], else the first ones and how many
/// more there are (a config of a thousand servers would otherwise fill the result alone).
fn name_list(names: &[&str]) -> String {
    match names.len().checked_sub(NAMES_SHOWN) {
        None | Some(0) => names.join(", "),
        Some(more) => format!("{} and {more} more", names[..NAMES_SHOWN].join(", ")),
    }
}

/// Orders hits server by server (servers by their best hit, hits by rank within a server).
fn group(hits: Vec<Hit>) -> (Vec<Hit>, Vec<Group>) {
    let mut groups: Vec<(String, Vec<Hit>)> = Vec::new();
    for hit in hits {
        match groups.iter_mut().find(|(server, _)| *server == hit.server) {
            Some((_, members)) => members.push(hit),
            None => groups.push((hit.server.clone(), vec![hit])),
        }
    }
    let summary = groups
        .iter()
        .map(|(server, members)| Group {
            server: server.clone(),
            hits: members.iter().map(|h| h.name.clone()).collect(),
        })
        .collect();
    (
        groups
            .into_iter()
            .flat_map(|(_, members)| members)
            .collect(),
        summary,
    )
}

/// The behaviour hints of a raw tool, if it declares any.
fn hints(raw: &Value) -> Option<Value> {
    let annotations = raw.get("annotations")?.as_object()?;
    let hints: serde_json::Map<String, Value> = annotations
        .iter()
        .filter(|(k, v)| k.ends_with("Hint") && v.is_boolean())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (!hints.is_empty()).then_some(Value::Object(hints))
}

/// What to do when nothing matched well while servers are still being indexed: their tools
/// are the likeliest answer, so wait for them or search one of them (which waits for its
/// listing), rather than rephrase.
fn indexing_hint(query: &str, indexing: &[String]) -> String {
    let names: Vec<&str> = indexing.iter().map(String::as_str).collect();
    let (servers, which) = match names.as_slice() {
        [one] => (
            format!("server \"{one}\" is"),
            format!("\"server\": \"{one}\""),
        ),
        _ => (
            format!("servers {} are", name_list(&names)),
            "\"server\" set to one of them".to_owned(),
        ),
    };
    format!(
        "No tool matched \"{}\" well yet: {servers} still being indexed, and their tools are not searchable until then. Search again in a moment, or with {which} (that search waits for its tools).",
        reply::echo(query)
    )
}

/// What to do when nothing matched well. With weak hits they are the near misses; without,
/// tool names close to the query (did-you-mean) are.
fn weak_hint(scope: &Scope, query: &str, hits: &[Hit], servers: &[&str]) -> String {
    let shown = reply::echo(query);
    let mut hint = if hits.is_empty() {
        format!("No tool matched \"{shown}\".")
    } else {
        format!(
            "No tool matched \"{shown}\" well: the hits share few of its distinctive words, so treat them as near misses."
        )
    };
    // The hits' servers first: the likeliest places to look.
    let mut of_hits: Vec<&str> = Vec::new();
    for hit in hits {
        if !of_hits.contains(&hit.server.as_str()) {
            of_hits.push(&hit.server);
        }
    }
    let rest = servers.iter().filter(|s| !of_hits.contains(s));
    let ordered: Vec<&str> = of_hits.iter().chain(rest).copied().collect();
    hint.push_str(&format!(
        " Rephrase with what the tool does (e.g. \"read file\", \"create issue\"), or search one server only (servers: {}).",
        name_list(&ordered)
    ));
    let near: Vec<String> = (scope.access)
        .suggestions(scope.library, query, 3)
        .into_iter()
        .filter(|name| !hits.iter().any(|h| &h.name == name))
        .collect();
    if !near.is_empty() {
        hint.push_str(&format!(
            " {}: {}.",
            if hits.is_empty() {
                "Near misses"
            } else {
                "Other near misses"
            },
            near.join(", ")
        ));
    }
    hint
}

/// The compact text twin of the structured result, for clients that ignore structured output.
fn render(out: &Output) -> String {
    let mut text = String::new();
    let mut heading: Option<&str> = None;
    for hit in &out.hits {
        if !out.groups.is_empty() && heading != Some(hit.server.as_str()) {
            heading = Some(hit.server.as_str());
            text.push_str(&format!("[{}]\n", hit.server));
        }
        text.push_str(&hit.name);
        if let Some(sig) = &hit.signature {
            text.push_str(sig);
        }
        if let Some(hints) = &hit.annotations {
            for (flag, label) in [
                ("readOnlyHint", " [read-only]"),
                ("destructiveHint", " [destructive]"),
            ] {
                if hints.get(flag) == Some(&Value::Bool(true)) {
                    text.push_str(label);
                }
            }
        }
        if let Some(desc) = hit.description.as_deref().filter(|d| !d.is_empty()) {
            text.push_str(" - ");
            text.push_str(desc);
        }
        text.push('\n');
        for flag in &hit.flags {
            text.push_str("  flag: ");
            text.push_str(flag);
            text.push('\n');
        }
        if let Some(schema) = &hit.input_schema {
            text.push_str("  inputSchema: ");
            text.push_str(&schema.to_string());
            text.push('\n');
        }
    }
    if let Some(hint) = &out.hint {
        text.push_str(hint);
        text.push('\n');
    }
    if !out.indexing.is_empty() {
        text.push_str(&format!(
            "Still indexing: {} (their tools may be missing; search again shortly).\n",
            out.indexing.join(", ")
        ));
    }
    for u in &out.unavailable {
        text.push_str(&format!("Unavailable: {}: {}\n", u.server, u.reason));
    }
    text
}
