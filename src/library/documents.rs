//! What search is given of each tool: entries keyed by qualified name, and the search documents
//! of configured servers' catalogs, the built-in tools and skills, with the checksums that tell
//! a saved index whether a source changed.

use std::collections::{BTreeMap, btree_map};
use std::sync::Arc;

use super::{Entry, qualified_name};
use crate::catalog::{Catalog, ToolDef};
use crate::checksum::{self, Checksum, hex};
use crate::config::{SKILL_SERVER, ServerConfig};
use crate::learning::Learned;
use crate::search::ToolDoc;
use crate::skills::Skill;

/// How the built-in tools' server is described to search.
const BUILTIN_ABOUT: &str = "meta-server built-in tools";

/// Entries of all tools, and the search documents of the sources asked for.
pub(super) struct Parts {
    pub(super) entries: BTreeMap<String, Arc<Entry>>,
    pub(super) docs: Vec<ToolDoc>,
}

impl Parts {
    /// The entries of the configured servers' catalogs, the built-in tools and the skills,
    /// with the search documents of the sources (server names) that `docs_of` accepts (with
    /// their tools' `learned` queries). A catalog's tools are taken from `defs` when they were
    /// read already.
    pub(super) fn assemble(
        servers: &[ServerConfig],
        catalogs: &BTreeMap<String, Catalog>,
        mut defs: BTreeMap<String, Vec<ToolDef>>,
        builtin: Option<&Catalog>,
        skills: &[Arc<Skill>],
        learned: &Learned,
        docs_of: impl Fn(&str) -> bool,
    ) -> Self {
        let mut entries = BTreeMap::new();
        let mut docs = Vec::new();
        for server in servers {
            if let Some(catalog) = catalogs.get(&server.name) {
                let tools = defs
                    .remove(&server.name)
                    .unwrap_or_else(|| catalog.tool_defs());
                let docs = docs_of(&server.name).then_some(&mut docs);
                add_catalog(&mut entries, docs, server, tools, learned);
            }
        }
        if let Some(builtin) = builtin {
            let tools = builtin.tool_defs().into_iter();
            let docs = docs_of(&builtin.server).then_some(&mut docs);
            let none = Learned::default();
            add(
                &mut entries,
                docs,
                &builtin.server,
                BUILTIN_ABOUT,
                tools,
                &none,
            );
        }
        let with_docs = docs_of(SKILL_SERVER);
        for skill in skills {
            let def = serde_json::json!({"name": skill.name, "description": skill.description, "inputSchema": {"type": "object"}});
            let Ok(def) = ToolDef::from_json(&def.into()) else {
                continue;
            };
            let about = format!("agent skill instructions {}", skill.servers.join(" "));
            let docs = with_docs.then_some(&mut docs);
            let qualified = qualified_name(SKILL_SERVER, &def.name);
            let new = !entries.contains_key(&qualified);
            add(
                &mut entries,
                docs,
                SKILL_SERVER,
                &about,
                std::iter::once(def),
                &Learned::default(),
            );
            if new && let Some(entry) = entries.get_mut(&qualified).and_then(Arc::get_mut) {
                entry.skill = Some(skill.clone());
            }
        }
        Self { entries, docs }
    }
}

/// How a server's search documents are described: its key and description.
fn about(server: &ServerConfig) -> String {
    format!(
        "{} {}",
        server.key,
        server.description.as_deref().unwrap_or_default()
    )
}

/// The checksum of what a server's documents are made of: its catalog file (`file`), its
/// description, its allow and deny lists, and its tools' learned queries (`learned`).
pub(super) fn server_source(server: &ServerConfig, file: &Checksum, learned: &Learned) -> String {
    let (allow, deny) = server.tools.globs();
    let learned = learned.source(&server.name);
    let inputs = serde_json::json!([server.name, about(server), allow, deny, hex(file), learned]);
    hex(&checksum::of(inputs.to_string().as_bytes()))
}

/// The checksum of the built-in tools as search sees them.
pub(super) fn builtin_source(builtin: &Catalog) -> String {
    let inputs = serde_json::json!([builtin.server, BUILTIN_ABOUT, builtin.tools]);
    hex(&checksum::of(inputs.to_string().as_bytes()))
}

/// The checksum of the skills as search sees them.
pub(super) fn skills_source(skills: &[Arc<Skill>]) -> String {
    let inputs: Vec<_> = skills
        .iter()
        .map(|s| serde_json::json!([s.name, s.description, s.servers]))
        .collect();
    hex(&checksum::of(
        serde_json::Value::from(inputs).to_string().as_bytes(),
    ))
}

/// Adds the tools of `server`'s catalog (`tools`) that its allow and deny lists let through.
pub(super) fn add_catalog(
    entries: &mut BTreeMap<String, Arc<Entry>>,
    docs: Option<&mut Vec<ToolDoc>>,
    server: &ServerConfig,
    tools: Vec<ToolDef>,
    learned: &Learned,
) {
    let tools = tools
        .into_iter()
        .filter(|def| server.tools.allows(&def.name));
    add(entries, docs, &server.name, &about(server), tools, learned);
}

/// Adds one server's tools as entries, and as search documents to `docs` if given, with the
/// queries each learned (if it is still the tool it learned them as).
fn add(
    entries: &mut BTreeMap<String, Arc<Entry>>,
    mut docs: Option<&mut Vec<ToolDoc>>,
    server: &str,
    about: &str,
    tools: impl Iterator<Item = ToolDef>,
    learned: &Learned,
) {
    for def in tools {
        let qualified = qualified_name(server, &def.name);
        let slot = match entries.entry(qualified) {
            btree_map::Entry::Vacant(slot) => slot,
            btree_map::Entry::Occupied(taken) => {
                tracing::warn!(server, tool = %def.name, "two tools map to {}; keeping the first", taken.key());
                continue;
            }
        };
        let qualified = slot.key();
        if let Some(docs) = docs.as_deref_mut() {
            docs.push(ToolDoc {
                key: qualified.clone(),
                server: server.to_owned(),
                name: def.name.clone(),
                title: def.title.clone().unwrap_or_default(),
                description: def.description(),
                // Example values are not what a tool does: "e.g. 'Asia/Tokyo'" in `convert_time`
                // made it the answer to "current time in Tokyo" (EVAL.md).
                params: def
                    .params()
                    .iter()
                    .map(|p| format!("{} {}", p.name, without_examples(&p.description)))
                    .collect::<Vec<_>>()
                    .join(" "),
                server_text: format!("{server} {about}"),
                learned: learned
                    .of_tool(qualified, || crate::learning::fingerprint(&def))
                    .map(|t| t.text())
                    .unwrap_or_default(),
            });
        }
        let entry = Entry::new(qualified.clone(), server.to_owned(), def);
        slot.insert(Arc::new(entry));
    }
}

/// `text` without the example values it gives: a parenthesised part that starts with "e.g.",
/// "eg", "for example", "example" or "such as", and such a phrase outside parentheses up to the
/// end of its sentence.
fn without_examples(text: &str) -> String {
    let starts = |rest: &str| {
        let lower = rest.trim_start().to_lowercase();
        ["e.g", "eg.", "eg,", "for example", "example:", "such as"]
            .iter()
            .any(|p| lower.starts_with(p))
    };
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if let Some(inner) = rest.strip_prefix('(')
            && starts(inner)
            && let Some(end) = inner.find(')')
        {
            rest = &inner[end + 1..];
            continue;
        }
        if (out.is_empty() || out.ends_with([' ', ',', ';', ':'])) && starts(rest) {
            // The marker itself may end in a dot ("e.g. main."): look past its first word.
            let skip = rest.trim_start().find(' ').map_or(rest.len(), |i| i + 1);
            let tail = &rest[skip.min(rest.len())..];
            rest = tail.find(". ").map_or("", |i| &tail[i + 1..]);
            continue;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::without_examples;

    #[test]
    fn example_values_are_cut_from_parameter_text() {
        assert_eq!(
            without_examples("IANA timezone name (e.g., 'Asia/Tokyo', 'UTC'). Use 'UTC' if unsure"),
            "IANA timezone name . Use 'UTC' if unsure"
        );
        assert_eq!(
            without_examples("Branch name, e.g. main. Defaults to the default branch"),
            "Branch name, Defaults to the default branch"
        );
        assert_eq!(without_examples("First number"), "First number");
        assert_eq!(
            without_examples("an (optional) count"),
            "an (optional) count"
        );
    }
}
