//! Which server answers what: the prompts, resources and resource templates of the catalogs,
//! in config order, as clients see them, and the server behind each prompt name and URI.
//!
//! Rules: a prompt is listed as `<server>__<prompt>`, or under its own name for a server with
//! `prefix: false` (found by both names; an own name another server's prompt has is left out). A resource URI is kept as its server
//! wrote it; a URI (or a template's `uriTemplate`) that several servers list belongs to the
//! first of them in config order, and the others' entries are left out and reported once. URIs
//! meta-server serves itself (skills, stored results) are never routed to a server. A URI no
//! server lists goes to the first server (config order, then its own order) with a template
//! that matches it ([`UriTemplate`]).

use std::collections::{BTreeMap, HashMap};

use rmcp::model::{Prompt, Resource, ResourceTemplate};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::template::UriTemplate;
use crate::catalog::Catalog;
use crate::config::ServerConfig;
use crate::library::qualified_name;

/// A server's entry left out because another one claims its URI first.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(in crate::server) struct Shadowed {
    /// The URI, `uriTemplate` or own prompt name claimed twice.
    pub uri: String,
    /// The server whose entry is left out.
    pub server: String,
    /// Who keeps it: the first server in config order, or `meta-server` itself.
    pub by: String,
}

/// The pass-through surface of one library: built once per library, immutable.
#[derive(Default)]
pub(in crate::server) struct Routes {
    prompts: Vec<Prompt>,
    /// Qualified prompt name -> (server, the prompt's own name).
    by_prompt: HashMap<String, (String, String)>,
    resources: Vec<Resource>,
    /// Resource URI -> server.
    by_uri: HashMap<String, String>,
    templates: Vec<ResourceTemplate>,
    /// Per listed template, in order: its server and its parsed pattern (if it can be matched).
    patterns: Vec<(String, Option<UriTemplate>)>,
}

impl Routes {
    /// The routes of `catalogs`, taken in the order of `servers` (config order); `own` says
    /// which URIs meta-server serves itself. Also what was left out, for the log.
    pub(in crate::server) fn build(
        servers: &[ServerConfig],
        catalogs: &BTreeMap<String, Catalog>,
        own: impl Fn(&str) -> bool,
    ) -> (Self, Vec<Shadowed>) {
        let mut routes = Self::default();
        let mut shadowed = Vec::new();
        let mut template_owner: HashMap<String, String> = HashMap::new();
        for server in servers {
            let Some(catalog) = catalogs.get(&server.name) else {
                continue;
            };
            let name = &server.name;
            for mut prompt in parsed::<Prompt>(name, "prompt", catalog.prompts.as_deref()) {
                let qualified = qualified_name(name, &prompt.name);
                let own_name = prompt.name.clone();
                let to = (name.clone(), own_name.clone());
                if server.prefix {
                    if routes.by_prompt.contains_key(&qualified) {
                        continue;
                    }
                    prompt.name = qualified.clone();
                    routes.by_prompt.insert(qualified, to);
                } else if let Some((by, _)) = routes.by_prompt.get(&own_name) {
                    shadowed.push(Shadowed {
                        uri: own_name,
                        server: name.clone(),
                        by: by.clone(),
                    });
                    continue;
                } else {
                    // Listed under its own name, and found under its qualified one too.
                    routes
                        .by_prompt
                        .entry(qualified)
                        .or_insert_with(|| to.clone());
                    routes.by_prompt.insert(own_name, to);
                }
                routes.prompts.push(prompt);
            }
            for resource in parsed::<Resource>(name, "resource", catalog.resources.as_deref()) {
                let uri = resource.uri.clone();
                let by = if own(&uri) {
                    Some("meta-server")
                } else {
                    routes.by_uri.get(&uri).map(String::as_str)
                };
                match by {
                    Some(by) if by == name => {}
                    Some(by) => shadowed.push(Shadowed {
                        uri,
                        server: name.clone(),
                        by: by.to_owned(),
                    }),
                    None => {
                        routes.by_uri.insert(uri, name.clone());
                        routes.resources.push(resource);
                    }
                }
            }
            let templates = catalog.resource_templates.as_deref();
            for template in parsed::<ResourceTemplate>(name, "resource template", templates) {
                let uri = template.uri_template.clone();
                match template_owner.get(&uri) {
                    Some(by) if by == name => {}
                    Some(by) => shadowed.push(Shadowed {
                        uri,
                        server: name.clone(),
                        by: by.clone(),
                    }),
                    None => {
                        template_owner.insert(uri.clone(), name.clone());
                        routes
                            .patterns
                            .push((name.clone(), UriTemplate::parse(&uri)));
                        routes.templates.push(template);
                    }
                }
            }
        }
        (routes, shadowed)
    }

    /// The prompts as clients see them (qualified names).
    pub(in crate::server) fn prompts(&self) -> &[Prompt] {
        &self.prompts
    }

    pub(in crate::server) fn resources(&self) -> &[Resource] {
        &self.resources
    }

    pub(in crate::server) fn templates(&self) -> &[ResourceTemplate] {
        &self.templates
    }

    /// The server and own name of the prompt listed as `qualified`.
    pub(in crate::server) fn prompt(&self, qualified: &str) -> Option<(&str, &str)> {
        let (server, name) = self.by_prompt.get(qualified)?;
        Some((server, name))
    }

    /// The server that answers for `uri`: the one that lists it, else the first whose template
    /// matches it.
    pub(in crate::server) fn resource(&self, uri: &str) -> Option<&str> {
        if let Some(server) = self.by_uri.get(uri) {
            return Some(server);
        }
        self.patterns
            .iter()
            .find(|(_, pattern)| pattern.as_ref().is_some_and(|p| p.matches(uri)))
            .map(|(server, _)| server.as_str())
    }

    /// The server that completes arguments of the resource `uri` of a `ref/resource`: the
    /// owner of that very template, else the server that answers for the URI.
    pub(in crate::server) fn completing(&self, uri: &str) -> Option<&str> {
        self.templates
            .iter()
            .position(|t| t.uri_template == uri)
            .map(|i| self.patterns[i].0.as_str())
            .or_else(|| self.resource(uri))
    }
}

/// The entries of one kind in `server`'s catalog that parse; the others are skipped with a
/// warning, as malformed tools are.
fn parsed<T: DeserializeOwned>(server: &str, kind: &str, items: Option<&[Value]>) -> Vec<T> {
    items
        .unwrap_or_default()
        .iter()
        .filter_map(|item| match serde_json::from_value(item.clone()) {
            Ok(parsed) => Some(parsed),
            Err(e) => {
                tracing::warn!(server, "skipping a {kind} in the catalog: {e}");
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn catalog(server: &str, prompts: Value, resources: Value, templates: Value) -> Catalog {
        let list = |v: Value| Some(v.as_array().unwrap().clone().into());
        Catalog {
            prompts: list(prompts),
            resources: list(resources),
            resource_templates: list(templates),
            ..Catalog::new(server, Vec::new())
        }
    }

    fn build(order: &[&str], catalogs: Vec<Catalog>) -> (Routes, Vec<Shadowed>) {
        let servers: Vec<ServerConfig> = order
            .iter()
            .map(|s| ServerConfig::catalog_only(s))
            .collect();
        let catalogs = catalogs
            .into_iter()
            .map(|c| (c.server.clone(), c))
            .collect();
        Routes::build(&servers, &catalogs, |uri| uri.starts_with("skill://"))
    }

    fn two_servers(order: &[&str]) -> (Routes, Vec<Shadowed>) {
        build(
            order,
            vec![
                catalog(
                    "zeta",
                    json!([{"name": "review", "arguments": [{"name": "code", "required": true}]}]),
                    json!([{"uri": "shared://readme", "name": "readme from zeta"},
                           {"uri": "zeta://only", "name": "z"},
                           {"uri": "skill://mine", "name": "not a skill"}]),
                    json!([{"uriTemplate": "shared://items/{id}", "name": "zeta items"}]),
                ),
                catalog(
                    "alpha",
                    json!([{"name": "review"}, {"bad": true}]),
                    json!([{"uri": "shared://readme", "name": "readme from alpha"}]),
                    json!([{"uriTemplate": "shared://items/{id}", "name": "alpha items"},
                           {"uriTemplate": "alpha://{+path}", "name": "files"}]),
                ),
            ],
        )
    }

    #[test]
    fn prompts_are_qualified_and_routed_to_their_server_in_config_order() {
        let (routes, _) = two_servers(&["zeta", "alpha"]);
        let names: Vec<&str> = routes.prompts().iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            ["zeta__review", "alpha__review"],
            "the malformed one skipped"
        );
        assert_eq!(routes.prompt("zeta__review"), Some(("zeta", "review")));
        assert_eq!(routes.prompt("alpha__review"), Some(("alpha", "review")));
        assert_eq!(routes.prompt("review"), None);
        assert_eq!(
            routes.prompts()[0].arguments.as_ref().unwrap()[0].name,
            "code"
        );
    }

    #[test]
    fn prompts_of_an_unprefixed_server_keep_their_own_names_and_answer_to_both() {
        let mut servers: Vec<ServerConfig> = ["alpha", "own", "zeta"]
            .iter()
            .map(|s| ServerConfig::catalog_only(s))
            .collect();
        servers[1].prefix = false;
        servers[2].prefix = false;
        let prompts = |server: &str, names: Value| catalog(server, names, json!([]), json!([]));
        let catalogs = [
            prompts("alpha", json!([{"name": "review"}])),
            prompts(
                "own",
                json!([{"name": "review"}, {"name": "alpha__review"}]),
            ),
            prompts("zeta", json!([{"name": "review"}, {"name": "mine"}])),
        ];
        let catalogs = catalogs
            .into_iter()
            .map(|c| (c.server.clone(), c))
            .collect();
        let (routes, shadowed) = Routes::build(&servers, &catalogs, |_| false);
        let names: Vec<&str> = routes.prompts().iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["alpha__review", "review", "mine"]);
        assert_eq!(routes.prompt("review"), Some(("own", "review")));
        assert_eq!(routes.prompt("own__review"), Some(("own", "review")));
        assert_eq!(routes.prompt("zeta__mine"), Some(("zeta", "mine")));
        assert_eq!(routes.prompt("alpha__review"), Some(("alpha", "review")));
        let left_out: Vec<(&str, &str, &str)> = (shadowed.iter())
            .map(|s| (s.uri.as_str(), s.server.as_str(), s.by.as_str()))
            .collect();
        assert_eq!(
            left_out,
            [("alpha__review", "own", "alpha"), ("review", "zeta", "own")]
        );
    }

    #[test]
    fn a_uri_two_servers_list_belongs_to_the_first_in_config_order() {
        for (order, first, second) in [
            (["zeta", "alpha"], "zeta", "alpha"),
            (["alpha", "zeta"], "alpha", "zeta"),
        ] {
            let (routes, shadowed) = two_servers(&order);
            assert_eq!(routes.resource("shared://readme"), Some(first));
            let readmes: Vec<&str> = routes
                .resources()
                .iter()
                .filter(|r| r.uri == "shared://readme")
                .map(|r| r.name.as_str())
                .collect();
            assert_eq!(readmes, [format!("readme from {first}")], "listed once");
            assert_eq!(routes.resource("shared://items/7"), Some(first));
            assert_eq!(
                routes
                    .templates()
                    .iter()
                    .filter(|t| t.uri_template == "shared://items/{id}")
                    .count(),
                1
            );
            let mut expected = vec![
                Shadowed {
                    uri: "shared://readme".into(),
                    server: second.into(),
                    by: first.into(),
                },
                Shadowed {
                    uri: "shared://items/{id}".into(),
                    server: second.into(),
                    by: first.into(),
                },
                Shadowed {
                    uri: "skill://mine".into(),
                    server: "zeta".into(),
                    by: "meta-server".into(),
                },
            ];
            let mut shadowed = shadowed;
            expected.sort();
            shadowed.sort();
            assert_eq!(shadowed, expected);
        }
    }

    #[test]
    fn listed_uris_win_over_templates_and_unknown_uris_have_no_server() {
        let (routes, _) = two_servers(&["zeta", "alpha"]);
        assert_eq!(routes.resource("zeta://only"), Some("zeta"));
        assert_eq!(routes.resource("alpha://a/b/c"), Some("alpha"), "{{+path}}");
        assert_eq!(routes.resource("skill://mine"), None, "meta-server's own");
        assert_eq!(routes.resource("shared://items/"), None);
        assert_eq!(routes.resource("nowhere://x"), None);
        assert!(!routes.resources().iter().any(|r| r.uri == "skill://mine"));
    }

    #[test]
    fn a_completion_reference_names_a_template_or_a_uri() {
        let (routes, _) = two_servers(&["alpha", "zeta"]);
        assert_eq!(routes.completing("alpha://{+path}"), Some("alpha"));
        assert_eq!(routes.completing("shared://items/{id}"), Some("alpha"));
        assert_eq!(routes.completing("zeta://only"), Some("zeta"));
        assert_eq!(routes.completing("nowhere://{x}"), None);
    }

    #[test]
    fn servers_without_a_catalog_or_without_offers_or_not_configured_add_nothing() {
        // "gone" has a catalog but is not configured (removed, or `"disabled": true`).
        let gone = catalog(
            "gone",
            json!([{"name": "p"}]),
            json!([{"uri": "gone://r", "name": "r"}]),
            json!([{"uriTemplate": "gone://{x}", "name": "t"}]),
        );
        let (routes, shadowed) = build(
            &["none", "old"],
            vec![Catalog::new("old", Vec::new()), gone],
        );
        assert!(routes.prompts().is_empty() && routes.resources().is_empty());
        assert!(routes.templates().is_empty() && shadowed.is_empty());
        assert_eq!(routes.resource("gone://r"), None);
        assert_eq!(routes.prompt("gone__p"), None);
    }
}
