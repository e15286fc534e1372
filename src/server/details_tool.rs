//! `get_tool_details`: full definitions from the catalog, with did-you-mean for unknown names.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::State;
use super::reply::{self, Reply};

/// `get_tool_details` arguments.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Args {
    names: Vec<String>,
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

pub(super) fn run(state: &State, args: Args) -> Reply {
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
            out.tools
                .push(super::skill_tool::details(state, entry, skill));
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
        out.tools.push(Value::Object(tool));
    }
    let text = serde_json::to_string(&out).expect("details serialize");
    reply::structured(&out, text)
}
