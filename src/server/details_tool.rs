//! `get_tool_details`: full definitions from the catalog, with did-you-mean for unknown names.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::State;
use super::reply::{self, Reply};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    names: Vec<String>,
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
struct Output {
    tools: Vec<Value>,
    not_found: Vec<NotFound>,
}

#[derive(Serialize)]
struct NotFound {
    name: String,
    suggestions: Vec<String>,
}

const MAX_NAMES: usize = 20;

pub(super) fn run(state: &State, args: Value) -> Reply {
    let args: Args = match reply::parse_args(super::definitions::GET_TOOL_DETAILS, args) {
        Ok(args) => args,
        Err(e) => return reply::error(e),
    };
    if args.names.is_empty() || args.names.len() > MAX_NAMES {
        return reply::error(format!(
            "names must hold 1 to {MAX_NAMES} qualified tool names, got {}",
            args.names.len()
        ));
    }
    let library = state.library();
    let mut out = Output {
        tools: Vec::new(),
        not_found: Vec::new(),
    };
    for name in args.names {
        let Some(entry) = library.get(&name) else {
            out.not_found.push(NotFound {
                suggestions: library.suggestions(&name, 3),
                name,
            });
            continue;
        };
        if let Some(skill) = &entry.skill {
            let mut details = super::skill_tool::details(state, entry, skill);
            if args.format == Format::Typescript
                && let Some(fields) = details.as_object_mut()
            {
                fields.insert("typescript".into(), typescript(entry).into());
            }
            out.tools.push(details);
            continue;
        }
        let mut tool = Map::new();
        tool.insert("name".into(), entry.qualified.clone().into());
        tool.insert("server".into(), entry.server.clone().into());
        tool.insert("tool".into(), entry.def.name.clone().into());
        if let Some(title) = &entry.def.title {
            tool.insert("title".into(), title.clone().into());
        }
        tool.insert("description".into(), entry.def.description.clone().into());
        tool.insert(
            "inputSchema".into(),
            Value::Object(entry.def.input_schema().clone()),
        );
        for key in ["outputSchema", "annotations"] {
            if let Some(v) = entry.def.raw.get(key).filter(|v| !v.is_null()) {
                tool.insert(key.into(), v.clone());
            }
        }
        if args.format == Format::Typescript {
            tool.insert("typescript".into(), typescript(entry).into());
        }
        out.tools.push(Value::Object(tool));
    }
    let text = if args.format == Format::Typescript {
        let mut parts: Vec<String> = out
            .tools
            .iter()
            .filter_map(|t| t["typescript"].as_str().map(str::to_owned))
            .collect();
        for missing in &out.not_found {
            parts.push(format!(
                "// unknown tool \"{}\"; did you mean: {}",
                missing.name,
                missing.suggestions.join(", ")
            ));
        }
        parts.join("\n\n")
    } else {
        serde_json::to_string(&out).expect("details serialize")
    };
    reply::structured(&out, text)
}

/// The entry as a TypeScript declaration, for scripts.
fn typescript(entry: &super::library::Entry) -> String {
    crate::script::typescript::declaration(
        &entry.qualified,
        &entry.def.description,
        entry.def.input_schema(),
        entry.def.raw.get("outputSchema").and_then(Value::as_object),
    )
}
