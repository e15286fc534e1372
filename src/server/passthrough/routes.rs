//! Which server answers what: the prompts, resources and resource templates of the catalogs
//! as clients see them, and the server behind each prompt name and URI.
//!
//! Rules (docs/access.md): a prompt is listed as `<server>__<prompt>`, or under its own name
//! for a server with `prefix: false` (found by both names; an own name another server's prompt
//! has is left out and reported once). A resource URI is kept as its server wrote it. A server
//! claims the URIs it lists and those its resource templates match, and a URI belongs to the
//! first server in the config file that claims it: a later server's entry for it (a listed
//! URI, or the same `uriTemplate`) is left out and reported once, and a later template is
//! never told it. A URI no server lists goes to the first server with a template that matches
//! it ([`UriTemplate`]). A template claims nothing unless it fixes the scheme of its URIs
//! (and, for web URLs, their host): a catch-all such as `{+uri}` is left out. URIs
//! meta-server serves itself (skills, stored results), and templates within them, are never a
//! server's.
//!
//! The routes are built over every configured server; a named token's view leaves out the
//! entries of the servers it does not see, while their claims still hold: a URI a hidden
//! server claims is unknown to the token, never handed to a server it sees.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::{Prompt, Resource, ResourceTemplate};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::template::{self, MatchError, UriTemplate};
use crate::catalog::{Catalog, screen};
use crate::config::ServerConfig;
use crate::library::qualified_name;
use crate::server::access::Access;

/// Schemes of web URLs: their templates must fix the host too, as such a URL names a place
/// outside any one server (and may carry a credential for it).
const WEB_SCHEMES: [&str; 4] = ["http", "https", "ws", "wss"];

/// The URI spaces meta-server serves itself: URIs starting with one of these prefixes.
#[derive(Clone, Copy)]
pub(in crate::server) struct OwnSpaces(pub &'static [&'static str]);

impl OwnSpaces {
    /// Whether meta-server serves `uri` itself.
    pub(in crate::server) fn holds(self, uri: &str) -> bool {
        self.0.iter().any(|space| uri.starts_with(space))
    }

    /// Whether a template with this literal start could describe a URI of an own space.
    fn overlaps(self, start: &str) -> bool {
        (self.0.iter()).any(|space| start.starts_with(space) || space.starts_with(start))
    }
}

/// An entry of a server's catalog left out of the lists, and why.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(in crate::server) struct LeftOut {
    /// The URI, `uriTemplate` or own prompt name.
    pub uri: String,
    /// The server whose entry is left out.
    pub server: String,
    pub why: Why,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(in crate::server) enum Why {
    /// A server earlier in the config file claims it.
    ClaimedBy(String),
    /// It is (or a template could describe) a URI meta-server serves itself.
    Own,
    /// A template that does not fix the scheme (or a web URL's host) of its URIs.
    CatchAll,
}

impl std::fmt::Display for LeftOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.why {
            Why::ClaimedBy(by) => write!(
                f,
                "{} is served by {by}, which comes first in the config file; this server's entry for it is left out",
                self.uri
            ),
            Why::Own => write!(
                f,
                "{} is within meta-server's own resources (skills, stored results); this server's entry for it is left out",
                self.uri
            ),
            Why::CatchAll => write!(
                f,
                "resource template {} does not fix the scheme of its URIs (nor, for a web URL, the host), so it would be sent URIs meant for others; it is left out",
                self.uri
            ),
        }
    }
}

/// Which server each resource URI belongs to, over every configured server.
#[derive(Default)]
struct Claims {
    /// Listed URI -> its server.
    by_uri: HashMap<String, String>,
    /// The templates that claim URIs, in file order: their server and pattern.
    patterns: Vec<(String, UriTemplate)>,
    /// Listed `uriTemplate` -> its server.
    by_template: HashMap<String, String>,
}

impl Claims {
    /// The server `uri` belongs to: the one that lists it, else the first whose template
    /// matches it.
    fn owner(&self, uri: &str) -> Result<Option<&str>, MatchError> {
        if let Some(server) = self.by_uri.get(uri) {
            return Ok(Some(server));
        }
        let patterns = (self.patterns.iter()).map(|(server, p)| (server.as_str(), Some(p)));
        template::first_match(patterns, uri)
    }
}

/// The pass-through surface of one library, as one principal sees it: immutable.
#[derive(Default)]
pub(in crate::server) struct Routes {
    prompts: Vec<Prompt>,
    /// The server of each of `prompts`.
    prompt_servers: Vec<String>,
    /// Qualified prompt name -> (server, the prompt's own name).
    by_prompt: HashMap<String, (String, String)>,
    resources: Vec<Resource>,
    resource_servers: Vec<String>,
    templates: Vec<ResourceTemplate>,
    template_servers: Vec<String>,
    claims: Arc<Claims>,
    /// Whose view this is: a URI of a server it does not see has no server.
    access: Access,
}

impl Routes {
    /// The routes of `catalogs`, whose servers `servers` lists in config-file order; `own`
    /// are meta-server's own URIs. Also what was left out, for the log.
    pub(in crate::server) fn build(
        servers: &[&ServerConfig],
        catalogs: &BTreeMap<String, Catalog>,
        own: OwnSpaces,
    ) -> (Self, Vec<LeftOut>) {
        let mut routes = Self::default();
        let mut claims = Claims::default();
        let mut left_out = Vec::new();
        for server in servers {
            let Some(catalog) = catalogs.get(&server.name) else {
                continue;
            };
            let name = &server.name;
            let mut leave = |uri: &str, why| {
                left_out.push(LeftOut {
                    uri: uri.to_owned(),
                    server: name.clone(),
                    why,
                });
            };
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
                    leave(&own_name, Why::ClaimedBy(by.clone()));
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
                routes.prompt_servers.push(name.clone());
            }
            // This server's templates claim only after its own listed URIs are placed.
            let mut patterns = Vec::new();
            let templates = catalog.resource_templates.as_deref();
            for template in parsed::<ResourceTemplate>(name, "resource template", templates) {
                let uri = template.uri_template.clone();
                let start = &uri[..uri.find('{').unwrap_or(uri.len())];
                if !fixes_origin(start, start.len() == uri.len()) {
                    leave(&uri, Why::CatchAll);
                    continue;
                }
                if own.overlaps(start) {
                    leave(&uri, Why::Own);
                    continue;
                }
                match claims.by_template.get(&uri) {
                    Some(by) if by == name => {}
                    Some(by) => leave(&uri, Why::ClaimedBy(by.clone())),
                    None => {
                        claims.by_template.insert(uri.clone(), name.clone());
                        patterns.extend(UriTemplate::parse(&uri).map(|p| (name.clone(), p)));
                        routes.templates.push(template);
                        routes.template_servers.push(name.clone());
                    }
                }
            }
            for resource in parsed::<Resource>(name, "resource", catalog.resources.as_deref()) {
                let uri = resource.uri.clone();
                if own.holds(&uri) {
                    leave(&uri, Why::Own);
                    continue;
                }
                match claims.owner(&uri) {
                    Ok(Some(by)) if by == name => {}
                    Ok(Some(by)) => leave(&uri, Why::ClaimedBy(by.to_owned())),
                    // Too long or costly to match a template: a listed URI is its server's.
                    Ok(None) | Err(_) => {
                        claims.by_uri.insert(uri, name.clone());
                        routes.resources.push(resource);
                        routes.resource_servers.push(name.clone());
                    }
                }
            }
            claims.patterns.extend(patterns);
        }
        routes.claims = Arc::new(claims);
        (routes, left_out)
    }

    /// These routes as `access` sees them: the entries of the servers it sees, the same claims.
    pub(in crate::server) fn seen_by(&self, access: &Access) -> Self {
        fn keep<T: Clone>(
            items: &[T],
            servers: &[String],
            access: &Access,
        ) -> (Vec<T>, Vec<String>) {
            (items.iter().zip(servers))
                .filter(|(_, server)| access.sees_server(server))
                .map(|(item, server)| (item.clone(), server.clone()))
                .unzip()
        }
        let (prompts, prompt_servers) = keep(&self.prompts, &self.prompt_servers, access);
        let (resources, resource_servers) = keep(&self.resources, &self.resource_servers, access);
        let (templates, template_servers) = keep(&self.templates, &self.template_servers, access);
        let by_prompt = (self.by_prompt.iter())
            .filter(|(_, (server, _))| access.sees_server(server))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Self {
            prompts,
            prompt_servers,
            by_prompt,
            resources,
            resource_servers,
            templates,
            template_servers,
            claims: self.claims.clone(),
            access: access.clone(),
        }
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

    /// The server that answers for `uri` (see the module's rules), if this view sees it (a URI
    /// too long or too costly to match is an error, see `template.rs`).
    pub(in crate::server) fn resource(&self, uri: &str) -> Result<Option<&str>, MatchError> {
        let server = self.claims.owner(uri)?;
        Ok(server.filter(|server| self.access.sees_server(server)))
    }

    /// The server that completes arguments of the resource `uri` of a `ref/resource`: the
    /// owner of that very template, else the server that answers for the URI.
    pub(in crate::server) fn completing(&self, uri: &str) -> Result<Option<&str>, MatchError> {
        match self.claims.by_template.get(uri) {
            Some(server) => Ok(self.access.sees_server(server).then_some(server.as_str())),
            None => self.resource(uri),
        }
    }
}

/// Whether a template whose literal text before its first variable is `start` fixes the
/// scheme of its URIs and, for a web URL, the host (`whole`: the template has no variable).
fn fixes_origin(start: &str, whole: bool) -> bool {
    let Some((scheme, rest)) = start.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    let named = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !named {
        return false;
    }
    if !WEB_SCHEMES.contains(&scheme.to_ascii_lowercase().as_str()) {
        return true;
    }
    match rest.strip_prefix("//") {
        Some(authority) => whole || authority.contains(['/', '?', '#']),
        None => true,
    }
}

/// The entries of one kind in `server`'s catalog that parse, screened (cleaned of hidden
/// characters, their flags said in their descriptions, see [`crate::catalog::screen`]) and
/// each carrying its every field for the lists clients get (see [`crate::verbatim`]); the
/// others, and those whose name or URI hides characters, are skipped with a warning, as such
/// tools are.
fn parsed<T: DeserializeOwned>(server: &str, kind: &str, items: Option<&[Value]>) -> Vec<T> {
    let key = match kind {
        "prompt" => "name",
        "resource" => "uri",
        _ => "uriTemplate",
    };
    items
        .unwrap_or_default()
        .iter()
        .filter_map(|item| {
            let Some(screened) = screen::offer(kind, key, item) else {
                tracing::warn!(
                    server,
                    "skipping a {kind} in the catalog: its {key} hides characters"
                );
                return None;
            };
            let mut item = screened.item;
            crate::verbatim::carry(&mut item);
            match serde_json::from_value(item) {
                Ok(parsed) => Some(parsed),
                Err(e) => {
                    tracing::warn!(server, "skipping a {kind} in the catalog: {e}");
                    None
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{TokenConfig, ToolFilter};
    use serde_json::json;

    const OWN: OwnSpaces = OwnSpaces(&["skill://", "meta-server://results/"]);

    fn catalog(server: &str, prompts: Value, resources: Value, templates: Value) -> Catalog {
        let list = |v: Value| Some(v.as_array().unwrap().clone().into());
        Catalog {
            prompts: list(prompts),
            resources: list(resources),
            resource_templates: list(templates),
            ..Catalog::new(server, Vec::new())
        }
    }

    fn build(order: &[&str], catalogs: Vec<Catalog>) -> (Routes, Vec<LeftOut>) {
        let servers: Vec<ServerConfig> = order
            .iter()
            .map(|s| ServerConfig::catalog_only(s))
            .collect();
        let catalogs = catalogs
            .into_iter()
            .map(|c| (c.server.clone(), c))
            .collect();
        Routes::build(&servers.iter().collect::<Vec<_>>(), &catalogs, OWN)
    }

    fn left(uri: &str, server: &str, why: Why) -> LeftOut {
        LeftOut {
            uri: uri.into(),
            server: server.into(),
            why,
        }
    }

    fn sorted(mut left_out: Vec<LeftOut>) -> Vec<LeftOut> {
        left_out.sort();
        left_out
    }

    fn two_servers(order: &[&str]) -> (Routes, Vec<LeftOut>) {
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
        let servers: Vec<&ServerConfig> = servers.iter().collect();
        let (routes, left_out) = Routes::build(&servers, &catalogs, OWN);
        let names: Vec<&str> = routes.prompts().iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["alpha__review", "review", "mine"]);
        assert_eq!(routes.prompt("review"), Some(("own", "review")));
        assert_eq!(routes.prompt("own__review"), Some(("own", "review")));
        assert_eq!(routes.prompt("zeta__mine"), Some(("zeta", "mine")));
        assert_eq!(routes.prompt("alpha__review"), Some(("alpha", "review")));
        assert_eq!(
            left_out,
            [
                left("alpha__review", "own", Why::ClaimedBy("alpha".into())),
                left("review", "zeta", Why::ClaimedBy("own".into())),
            ]
        );
    }

    #[test]
    fn a_uri_two_servers_list_belongs_to_the_first_in_config_order() {
        for (order, first, second) in [
            (["zeta", "alpha"], "zeta", "alpha"),
            (["alpha", "zeta"], "alpha", "zeta"),
        ] {
            let (routes, left_out) = two_servers(&order);
            assert_eq!(routes.resource("shared://readme").unwrap(), Some(first));
            let readmes: Vec<&str> = routes
                .resources()
                .iter()
                .filter(|r| r.uri == "shared://readme")
                .map(|r| r.name.as_str())
                .collect();
            assert_eq!(readmes, [format!("readme from {first}")], "listed once");
            assert_eq!(routes.resource("shared://items/7"), Ok(Some(first)));
            assert_eq!(
                routes
                    .templates()
                    .iter()
                    .filter(|t| t.uri_template == "shared://items/{id}")
                    .count(),
                1
            );
            let expected = vec![
                left("shared://readme", second, Why::ClaimedBy(first.into())),
                left("shared://items/{id}", second, Why::ClaimedBy(first.into())),
                left("skill://mine", "zeta", Why::Own),
            ];
            assert_eq!(sorted(left_out), sorted(expected));
        }
    }

    #[test]
    fn a_uri_within_an_earlier_servers_template_is_that_servers() {
        let catalogs = || {
            vec![
                catalog(
                    "files",
                    json!([]),
                    json!([]),
                    json!([{"uriTemplate": "file:///{+path}", "name": "any file"}]),
                ),
                catalog(
                    "later",
                    json!([]),
                    json!([{"uri": "file:///home/u/.ssh/id_ed25519", "name": "a key"},
                           {"uri": "later://own", "name": "its own"}]),
                    json!([{"uriTemplate": "file:///home/{user}/.ssh/{name}", "name": "keys"}]),
                ),
            ]
        };
        let (routes, left_out) = build(&["files", "later"], catalogs());
        assert_eq!(
            routes.resource("file:///home/u/.ssh/id_ed25519").unwrap(),
            Some("files")
        );
        assert_eq!(
            routes.resource("file:///home/u/.ssh/other").unwrap(),
            Some("files")
        );
        assert_eq!(routes.resource("later://own").unwrap(), Some("later"));
        let listed: Vec<&str> = routes.resources().iter().map(|r| r.uri.as_str()).collect();
        assert_eq!(listed, ["later://own"]);
        assert_eq!(
            left_out,
            [left(
                "file:///home/u/.ssh/id_ed25519",
                "later",
                Why::ClaimedBy("files".into())
            )],
            "a more specific template of a later server is listed, and told only what no earlier server claims"
        );
        // The other way round, the listing is the first claim: the template is not told it.
        let (routes, _) = build(&["later", "files"], catalogs());
        assert_eq!(
            routes.resource("file:///home/u/.ssh/id_ed25519").unwrap(),
            Some("later")
        );
        assert_eq!(
            routes.resource("file:///home/u/.ssh/other").unwrap(),
            Some("later")
        );
        assert_eq!(
            routes.resource("file:///etc/passwd").unwrap(),
            Some("files")
        );
    }

    #[test]
    fn a_template_that_does_not_fix_scheme_and_web_host_is_left_out() {
        let templates = json!([
            {"uriTemplate": "{+anything}", "name": "catch-all"},
            {"uriTemplate": "{scheme}://x/{id}", "name": "any scheme"},
            {"uriTemplate": "https://{+url}", "name": "any site"},
            {"uriTemplate": "http://{host}/{+path}", "name": "any host"},
            {"uriTemplate": "users://{userId}/profile", "name": "profiles"},
            {"uriTemplate": "https://api.example.com/{+path}", "name": "one site"},
            {"uriTemplate": "https://api.example.com", "name": "one page"},
            {"uriTemplate": "urn:isbn:{isbn}", "name": "books"}
        ]);
        let (routes, left_out) = build(
            &["first", "hostile"],
            vec![
                catalog(
                    "first",
                    json!([]),
                    json!([{"uri": "file:///home/u/.ssh/id_rsa", "name": "k"}]),
                    json!([]),
                ),
                catalog("hostile", json!([]), json!([]), templates),
            ],
        );
        let kept: Vec<&str> = (routes.templates().iter())
            .map(|t| t.uri_template.as_str())
            .collect();
        assert_eq!(
            kept,
            [
                "users://{userId}/profile",
                "https://api.example.com/{+path}",
                "https://api.example.com",
                "urn:isbn:{isbn}"
            ]
        );
        let catch_alls: Vec<&str> = (left_out.iter())
            .filter(|l| l.why == Why::CatchAll)
            .map(|l| l.uri.as_str())
            .collect();
        assert_eq!(
            catch_alls,
            [
                "{+anything}",
                "{scheme}://x/{id}",
                "https://{+url}",
                "http://{host}/{+path}"
            ]
        );
        assert_eq!(
            routes.resource("file:///home/u/.ssh/id_rsa").unwrap(),
            Some("first")
        );
        for unlisted in [
            "file:///home/u/.ssh/id_ed25519",
            "https://bank.example/?token=secret",
            "x:y",
        ] {
            assert_eq!(routes.resource(unlisted).unwrap(), None, "{unlisted}");
        }
        assert_eq!(
            routes.resource("users://7/profile").unwrap(),
            Some("hostile")
        );
        assert_eq!(
            routes.resource("https://api.example.com/v1/x").unwrap(),
            Some("hostile")
        );
    }

    #[test]
    fn templates_within_meta_servers_own_uris_are_left_out() {
        let (routes, left_out) = build(
            &["up"],
            vec![catalog(
                "up",
                json!([]),
                json!([{"uri": "meta-server://results/r-1", "name": "fake"}]),
                json!([{"uriTemplate": "meta-server://results/{resourceId}", "name": "fake results"},
                       {"uriTemplate": "skill://{name}", "name": "fake skills"},
                       {"uriTemplate": "meta-server://{+rest}", "name": "wider"},
                       {"uriTemplate": "skills://{name}", "name": "its own"}]),
            )],
        );
        let kept: Vec<&str> = (routes.templates().iter())
            .map(|t| t.uri_template.as_str())
            .collect();
        assert_eq!(kept, ["skills://{name}"]);
        assert!(routes.resources().is_empty());
        let own: Vec<&str> = (left_out.iter())
            .filter(|l| l.why == Why::Own)
            .map(|l| l.uri.as_str())
            .collect();
        assert_eq!(own.len(), 4, "{left_out:?}");
        for uri in [
            "skill://x",
            "meta-server://results/r-1",
            "meta-server://other",
        ] {
            assert_eq!(routes.resource(uri).unwrap(), None, "{uri}");
        }
    }

    #[test]
    fn a_named_token_sees_its_servers_entries_and_hidden_claims_still_hold() {
        let (routes, _) = build(
            &["hidden", "seen"],
            vec![
                catalog(
                    "hidden",
                    json!([{"name": "p"}]),
                    json!([{"uri": "notes://secret", "name": "s"}]),
                    json!([{"uriTemplate": "notes://private/{id}", "name": "private notes"}]),
                ),
                catalog(
                    "seen",
                    json!([{"name": "q"}]),
                    json!([{"uri": "notes://mine", "name": "m"}]),
                    json!([{"uriTemplate": "notes://{+any}", "name": "all notes"}]),
                ),
            ],
        );
        let token = TokenConfig {
            name: "t".into(),
            token: "${T}".into(),
            servers: Some(vec!["seen".into()]),
            deny_tools: ToolFilter::default(),
        };
        let view = routes.seen_by(&Access::of(&token));
        let names: Vec<&str> = view.prompts().iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["seen__q"]);
        assert_eq!(view.prompt("hidden__p"), None);
        let uris: Vec<&str> = view.resources().iter().map(|r| r.uri.as_str()).collect();
        assert_eq!(uris, ["notes://mine"]);
        assert_eq!(view.templates().len(), 1);
        assert_eq!(view.resource("notes://mine").unwrap(), Some("seen"));
        assert_eq!(view.resource("notes://elsewhere").unwrap(), Some("seen"));
        // What the hidden server claims is not handed to the template of a server seen.
        assert_eq!(view.resource("notes://secret").unwrap(), None);
        assert_eq!(view.resource("notes://private/1").unwrap(), None);
        assert_eq!(view.completing("notes://private/{id}").unwrap(), None);
        assert_eq!(routes.resource("notes://secret").unwrap(), Some("hidden"));
    }

    #[test]
    fn listed_uris_win_over_templates_and_unknown_uris_have_no_server() {
        let (routes, _) = two_servers(&["zeta", "alpha"]);
        assert_eq!(routes.resource("zeta://only"), Ok(Some("zeta")));
        assert_eq!(
            routes.resource("alpha://a/b/c"),
            Ok(Some("alpha")),
            "{{+path}}"
        );
        assert_eq!(
            routes.resource("skill://mine"),
            Ok(None),
            "meta-server's own"
        );
        assert_eq!(routes.resource("shared://items/"), Ok(None));
        assert_eq!(routes.resource("nowhere://x"), Ok(None));
        assert!(!routes.resources().iter().any(|r| r.uri == "skill://mine"));
    }

    #[test]
    fn a_completion_reference_names_a_template_or_a_uri() {
        let (routes, _) = two_servers(&["alpha", "zeta"]);
        assert_eq!(routes.completing("alpha://{+path}"), Ok(Some("alpha")));
        assert_eq!(routes.completing("shared://items/{id}"), Ok(Some("alpha")));
        assert_eq!(routes.completing("zeta://only"), Ok(Some("zeta")));
        assert_eq!(routes.completing("nowhere://{x}"), Ok(None));
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
        let (routes, left_out) = build(
            &["none", "old"],
            vec![Catalog::new("old", Vec::new()), gone],
        );
        assert!(routes.prompts().is_empty() && routes.resources().is_empty());
        assert!(routes.templates().is_empty() && left_out.is_empty());
        assert_eq!(routes.resource("gone://r").unwrap(), None);
        assert_eq!(routes.prompt("gone__p"), None);
    }
}
