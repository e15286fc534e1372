//! `get_tool_details`: full definitions from the catalog, with did-you-mean for unknown names.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::reply::{self, Reply};
use crate::catalog::screen;
use crate::library::Library;
use crate::server::State;
use crate::server::access::Access;
use crate::server::caller::Introduced;
use crate::server::catalogs::names;
use crate::trust::Kind;

/// `get_tool_details` arguments.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(in crate::server) struct Args {
    pub names: Vec<String>,
    #[serde(default)]
    format: Format,
}

#[derive(Deserialize, Default, PartialEq)]
#[serde(rename_all = "lowercase")]
enum Format {
    #[default]
    Json,
    /// Also a TypeScript declaration per tool, which alone makes up the text.
    Typescript,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Output<'a> {
    tools: &'a [Value],
    not_found: &'a [NotFound],
    /// Tools found but left out to keep within the result budget.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    omitted: Vec<&'a str>,
    /// Each shown tool's server's own instructions, the first time the client meets them.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    server_instructions: BTreeMap<&'a str, &'a str>,
}

#[derive(Serialize)]
struct NotFound {
    name: String,
    suggestions: Vec<String>,
}

const MAX_NAMES: usize = 20;

/// Characters kept of one server's instructions (server-everything's are 1,574).
const INSTRUCTIONS_CHARS: usize = 3_000;

/// Full definitions of the named tools, within `soft` tokens: tools that do not fit are listed
/// as `omitted` (ask for them alone); one tool that alone does not fit is given in the text,
/// where result handling cuts it and keeps it whole for reading back. Tools `access` hides
/// are not found. With `introduced`, the instructions of a shown tool's server come with it the
/// first time (a script gets none).
pub(in crate::server) fn run(
    state: &State,
    access: &Access,
    soft: usize,
    args: Args,
    introduced: Option<&Introduced>,
) -> Reply {
    if args.names.is_empty() || args.names.len() > MAX_NAMES {
        return reply::error(format!(
            "names must hold 1 to {MAX_NAMES} qualified tool names, got {}",
            args.names.len()
        ));
    }
    let library = state.catalogs.library();
    let mut tools: Vec<(String, Value)> = Vec::new();
    let mut not_found = Vec::new();
    for name in args.names {
        let name = names::qualify(&state.settings().servers, &library, &name).unwrap_or(name);
        let Some(entry) = library.get(&name).filter(|_| access.sees(&name)) else {
            not_found.push(NotFound {
                suggestions: access.suggestions(&library, &name, 3),
                name: reply::echo(&name),
            });
            continue;
        };
        if let Some(skill) = &entry.skill {
            let mut details = super::skill::details(state, entry, skill, access);
            if args.format == Format::Typescript
                && let Some(fields) = details.as_object_mut()
            {
                fields.insert("typescript".into(), typescript(entry).into());
            }
            tools.push((entry.qualified.clone(), details));
            continue;
        }
        let mut tool = Map::new();
        tool.insert("name".into(), entry.qualified.clone().into());
        tool.insert("server".into(), entry.server.clone().into());
        tool.insert("tool".into(), entry.def.name.clone().into());
        if let Some(title) = &entry.def.title {
            tool.insert("title".into(), title.clone().into());
        }
        tool.insert("description".into(), entry.def.description().into());
        tool.insert(
            "inputSchema".into(),
            Value::Object(entry.def.input_schema()),
        );
        // Every other field as its server sent it (hidden characters removed), known or not:
        // the schema of its result and its annotations first.
        if let Value::Object(mut raw) = entry.def.value() {
            for key in ["outputSchema", "annotations"] {
                if let Some(v) = raw.shift_remove(key).filter(|v| !v.is_null()) {
                    tool.insert(key.into(), v);
                }
            }
            for (key, value) in raw {
                tool.entry(key).or_insert(value);
            }
        }
        let flags = super::search::flags(&library, &state.trust, entry);
        if !flags.is_empty() {
            tool.insert("flags".into(), flags.into());
        }
        if args.format == Format::Typescript {
            tool.insert("typescript".into(), typescript(entry).into());
        }
        tools.push((entry.qualified.clone(), Value::Object(tool)));
    }
    let defs: Vec<Value> = tools.iter().map(|(_, def)| def.clone()).collect();
    let instructions = introduced
        .map(|i| new_instructions(state, &library, &defs, i))
        .unwrap_or_default();
    let reply = reply::fitted(&state.results, soft, 0, defs.len(), |shown| {
        let out = Output {
            tools: &defs[..shown],
            not_found: &not_found,
            omitted: tools[shown..]
                .iter()
                .map(|(name, _)| name.as_str())
                .collect(),
            server_instructions: defs[..shown]
                .iter()
                .filter_map(|def| def["server"].as_str())
                .filter_map(|server| instructions.get_key_value(server))
                .map(|(server, text)| (server.as_str(), text.as_str()))
                .collect(),
        };
        let text = match defs.first() {
            Some(first) if shown == 0 => first.to_string(),
            _ if args.format == Format::Typescript => typescript_text(&out),
            _ => serde_json::to_string(&out).expect("details serialize"),
        };
        reply::structured(&out, text)
    });
    if let (Some(introduced), Some(Value::Object(out))) = (introduced, &reply.structured_content)
        && let Some(Value::Object(given)) = out.get("serverInstructions")
    {
        // Withheld instructions are given once approved.
        introduced.mark(
            given
                .iter()
                .filter(|(_, text)| !text.as_str().is_some_and(|t| t.starts_with(WITHHELD)))
                .map(|(server, _)| server.as_str()),
        );
    }
    reply
}

/// How instructions waiting for approval start, in their place.
const WITHHELD: &str = "[meta-server: these instructions are withheld,";

/// The instructions of the servers of `defs` that `introduced` has not given yet, cleaned
/// of hidden characters, their flags said first, and cut to [`INSTRUCTIONS_CHARS`]; in the
/// place of those waiting for approval, why they are withheld.
fn new_instructions(
    state: &State,
    library: &Library,
    defs: &[Value],
    introduced: &Introduced,
) -> BTreeMap<String, String> {
    defs.iter()
        .filter_map(|def| def["server"].as_str())
        .filter(|server| introduced.is_new(server))
        .filter_map(|server| {
            let catalog = library.catalogs.get(server)?;
            let text = catalog.instructions.as_deref()?;
            let name = Kind::Instructions.name(server, "");
            if let Some(held) = state.trust.hold(catalog, Kind::Instructions, "") {
                return Some((
                    server.to_owned(),
                    format!("{WITHHELD} {}]", held.flag(&name)),
                ));
            }
            let text = screen::instructions(text);
            let text = match text.char_indices().nth(INSTRUCTIONS_CHARS) {
                Some((end, _)) => format!("{}… (cut)", &text[..end]),
                None => text,
            };
            (!text.is_empty()).then(|| (server.to_owned(), text))
        })
        .collect()
}

/// The text of a TypeScript answer: the servers' instructions and the declarations, then a
/// comment per unknown name.
fn typescript_text(out: &Output) -> String {
    let mut parts: Vec<String> = out
        .server_instructions
        .iter()
        .map(|(server, text)| {
            let text = text.replace("*/", "* /");
            format!("/* Instructions of server \"{server}\":\n{text}\n*/")
        })
        .collect();
    parts.extend(
        out.tools
            .iter()
            .filter_map(|t| t["typescript"].as_str().map(str::to_owned)),
    );
    for missing in out.not_found {
        parts.push(format!(
            "// unknown tool \"{}\"; did you mean: {}",
            missing.name,
            missing.suggestions.join(", ")
        ));
    }
    parts.join("\n\n")
}

/// The entry as a TypeScript declaration, for scripts.
fn typescript(entry: &crate::library::Entry) -> String {
    let raw = entry.def.value();
    crate::script::typescript::declaration(
        &entry.qualified,
        &entry.def.description(),
        &entry.def.input_schema(),
        raw.get("outputSchema").and_then(Value::as_object),
    )
}
