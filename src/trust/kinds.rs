//! What is pinned of a server: its tools, prompts, resources, resource templates and
//! instructions, each item by its key in its kind (a tool's or prompt's name, a resource's
//! URI, a template's `uriTemplate`), and how the user names one to approve it.

use std::collections::BTreeMap;

use serde_json::Value;

use super::Quarantine;
use crate::catalog::{Catalog, offer_fingerprint, resource_fingerprint, tool_fingerprint};
use crate::library::{SEPARATOR, qualified_name};

/// A kind of pinned item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Tool,
    Prompt,
    Resource,
    ResourceTemplate,
    Instructions,
}

impl Kind {
    pub const ALL: [Kind; 5] = [
        Kind::Tool,
        Kind::Prompt,
        Kind::Resource,
        Kind::ResourceTemplate,
        Kind::Instructions,
    ];

    /// The kinds kept as a list of objects besides tools.
    pub const OFFERS: [Kind; 3] = [Kind::Prompt, Kind::Resource, Kind::ResourceTemplate];

    /// How `tools review` and messages name the kind.
    pub fn noun(self) -> &'static str {
        match self {
            Kind::Tool => "tool",
            Kind::Prompt => "prompt",
            Kind::Resource => "resource",
            Kind::ResourceTemplate => "resource template",
            Kind::Instructions => "instructions",
        }
    }

    /// The prefix of an item's name for `tools approve` (none for tools).
    fn prefix(self) -> &'static str {
        match self {
            Kind::Tool => "",
            Kind::Prompt => "prompt:",
            Kind::Resource => "resource:",
            Kind::ResourceTemplate => "template:",
            Kind::Instructions => "instructions:",
        }
    }

    /// The name `tools approve` takes for item `key` of `server`: `<server>__<tool>`,
    /// `prompt:<server>__<prompt>`, `resource:<server>__<uri>`, `template:<server>__<uriTemplate>`,
    /// `instructions:<server>`.
    /// Tools and prompts go by their qualified names, as clients see them.
    pub fn name(self, server: &str, key: &str) -> String {
        match self {
            Kind::Tool | Kind::Prompt => {
                format!("{}{}", self.prefix(), qualified_name(server, key))
            }
            Kind::Resource | Kind::ResourceTemplate => {
                format!("{}{server}{SEPARATOR}{key}", self.prefix())
            }
            Kind::Instructions => format!("{}{server}", self.prefix()),
        }
    }

    /// The kind, server and key `name` names (see [`Self::name`]); `None` when it names a
    /// server alone.
    pub fn parse(name: &str) -> Option<(Kind, &str, &str)> {
        for kind in Kind::ALL.into_iter().rev() {
            let Some(rest) = name
                .strip_prefix(kind.prefix())
                .filter(|_| kind != Kind::Tool)
            else {
                continue;
            };
            return match kind {
                Kind::Instructions => Some((kind, rest, "")),
                _ => rest
                    .split_once(SEPARATOR)
                    .map(|(server, key)| (kind, server, key)),
            };
        }
        let name = name.strip_prefix("tool:").unwrap_or(name);
        let (server, tool) = name.split_once(SEPARATOR)?;
        Some((Kind::Tool, server, tool))
    }

    /// The key of `item`, an object of this kind; `None` when it has none.
    pub fn key_of(self, item: &Value) -> Option<String> {
        let field = match self {
            Kind::Tool | Kind::Prompt => "name",
            Kind::Resource => "uri",
            Kind::ResourceTemplate => "uriTemplate",
            Kind::Instructions => return Some(String::new()),
        };
        item.get(field)?.as_str().map(str::to_owned)
    }

    /// The fingerprint of `item` (for instructions: the text, or null).
    pub fn fingerprint(self, item: &Value) -> String {
        match self {
            Kind::Tool => tool_fingerprint(&item.clone().into()),
            Kind::Resource => resource_fingerprint(item),
            _ => offer_fingerprint(item),
        }
    }

    /// The items of this kind in `catalog` as values; `None` when the catalog does not know
    /// them (a catalog made before they were recorded, or a listing that failed).
    pub fn items(self, catalog: &Catalog) -> Option<Vec<Value>> {
        match self {
            Kind::Tool => Some(catalog.tools.iter().map(|t| t.value()).collect()),
            Kind::Prompt => catalog.prompts.as_deref().map(<[_]>::to_vec),
            Kind::Resource => catalog.resources.as_deref().map(<[_]>::to_vec),
            Kind::ResourceTemplate => catalog.resource_templates.as_deref().map(<[_]>::to_vec),
            Kind::Instructions => Some(vec![instructions(catalog)]),
        }
    }
}

/// A catalog's instructions as pinned: the text, or null when the server gave none.
pub fn instructions(catalog: &Catalog) -> Value {
    catalog
        .instructions
        .as_deref()
        .map_or(Value::Null, Value::from)
}

/// What waits for approval in one catalog, by kind and key.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Holds(BTreeMap<Kind, BTreeMap<String, Quarantine>>);

impl Holds {
    /// The quarantine of item `key` of `kind`, if it waits.
    pub fn get(&self, kind: Kind, key: &str) -> Option<&Quarantine> {
        self.0.get(&kind)?.get(key)
    }

    /// Holds item `key` of `kind` (the first quarantine of a key stays).
    pub(super) fn hold(&mut self, kind: Kind, key: String, quarantine: Quarantine) {
        self.0
            .entry(kind)
            .or_default()
            .entry(key)
            .or_insert(quarantine);
    }

    pub fn is_empty(&self) -> bool {
        self.0.values().all(BTreeMap::is_empty)
    }

    /// Every held item: its kind, key and quarantine, by kind then key.
    pub fn iter(&self) -> impl Iterator<Item = (Kind, &str, &Quarantine)> {
        self.0
            .iter()
            .flat_map(|(kind, held)| held.iter().map(|(key, q)| (*kind, key.as_str(), q)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_back_to_its_kind_server_and_key() {
        for (kind, key) in [
            (Kind::Tool, "add"),
            (Kind::Prompt, "review"),
            (Kind::Resource, "demo://resource/static/a__b.md"),
            (Kind::ResourceTemplate, "demo://r/{id}"),
            (Kind::Instructions, ""),
        ] {
            let name = kind.name("everything", key);
            assert_eq!(
                Kind::parse(&name),
                Some((kind, "everything", key)),
                "{name}"
            );
        }
        assert_eq!(
            Kind::parse("tool:s__t"),
            Some((Kind::Tool, "s", "t")),
            "tool: may be written"
        );
        assert_eq!(Kind::parse("everything"), None, "a server alone");
        assert_eq!(Kind::name(Kind::Prompt, "s", "p"), "prompt:s__p");
    }
}
