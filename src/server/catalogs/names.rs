//! Own names: the tools and prompts of a server with `prefix: false` are listed and called
//! under the names their server gave them, and under their qualified names too.
//!
//! A name resolves to the tool of that qualified name, else to the tool of that own name of
//! the first server (by name) with `prefix: false` that has one. At start-up, an own name that
//! is also a meta-tool's, another tool's (own or qualified) or, for prompts, another prompt's
//! is a config error naming both ([`check`]), and a config reload that would make one is not
//! applied; a clash in a catalog listed later goes to the first server, as a URI two servers
//! list does.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::catalog::Catalog;
use crate::config::ServerConfig;
use crate::library::{Library, qualified_name};
use crate::server::State;
use crate::server::access::Access;

use super::first_run;

/// Two things that would be called by one name.
#[derive(Debug, thiserror::Error)]
#[error(
    "config {config}: {second} has the name of {first}; set \"prefix\": true on server \"{server}\"{or}"
)]
pub struct Clash {
    config: String,
    /// What claimed the name first (a meta-tool, a tool, a prompt).
    first: String,
    /// The own-named tool or prompt that claims it too.
    second: String,
    /// The server with `prefix: false` to change.
    server: String,
    /// Another way out, if there is one.
    or: &'static str,
}

/// The servers whose tools and prompts keep their own names, by name.
pub(in crate::server) fn unprefixed(servers: &[ServerConfig]) -> impl Iterator<Item = &str> {
    servers
        .iter()
        .filter(|s| !s.prefix)
        .map(|s| s.name.as_str())
}

/// The qualified name of the tool `name` names in `library`: `name` itself when it is
/// qualified, else the tool of that own name of a server with `prefix: false`.
pub(in crate::server) fn qualify(
    servers: &[ServerConfig],
    library: &Library,
    name: &str,
) -> Option<String> {
    if library.get(name).is_some() {
        return Some(name.to_owned());
    }
    unprefixed(servers).find_map(|server| {
        let entry = library.get(&qualified_name(server, name))?;
        (entry.def.name == name).then(|| entry.qualified.clone())
    })
}

/// Like [`qualify`] over `state`'s library; when no tool has the name, the servers with
/// `prefix: false` that `access` sees and that have no catalog yet are listed first (first
/// run) and the name looked up again. A name no tool has comes back as it is.
pub(in crate::server) async fn resolve(state: &Arc<State>, access: &Access, name: &str) -> String {
    let settings = state.settings();
    let servers = &settings.servers;
    let library = state.catalogs.library();
    if let Some(qualified) = qualify(servers, &library, name) {
        return qualified;
    }
    drop(library);
    if !list_unprefixed(state, access).await {
        return name.to_owned();
    }
    qualify(servers, &state.catalogs.library(), name).unwrap_or_else(|| name.to_owned())
}

/// Lists the servers with `prefix: false` that `access` sees and that have no catalog yet
/// (first run); whether there were any. A server that cannot be listed says why when it is
/// called by a qualified name.
pub(in crate::server) async fn list_unprefixed(state: &Arc<State>, access: &Access) -> bool {
    let (library, settings) = (state.catalogs.library(), state.settings());
    let missing: Vec<&str> = unprefixed(&settings.servers)
        .filter(|s| access.sees_server(s) && !library.catalogs.contains_key(*s))
        .collect();
    drop(library);
    futures::future::join_all(missing.iter().map(|s| first_run::ensure(state, s))).await;
    !missing.is_empty()
}

/// The names a check reads: per server, its tools' own and qualified names and its prompts'
/// own names.
#[derive(Default)]
pub(in crate::server) struct Listed {
    tools: BTreeMap<String, Vec<(String, String)>>,
    prompts: BTreeMap<String, Vec<String>>,
}

impl Listed {
    /// The names `library` has now.
    pub fn of(library: &Library) -> Self {
        let mut listed = Self::default();
        for entry in library.entries.values() {
            (listed.tools.entry(entry.server.clone()).or_default())
                .push((entry.def.name.clone(), entry.qualified.clone()));
        }
        for (server, catalog) in &library.catalogs {
            listed.prompts.insert(server.clone(), prompt_names(catalog));
        }
        listed
    }

    /// With `catalog`'s names in place of its server's.
    pub fn with_catalog(&mut self, catalog: &Catalog) {
        #[derive(serde::Deserialize)]
        struct Named {
            name: String,
        }
        let tools = (catalog.tools.iter())
            .filter_map(|t| serde_json::from_str::<Named>(&t.text()).ok())
            .map(|t| (qualified_name(&catalog.server, &t.name), t.name))
            .map(|(qualified, own)| (own, qualified))
            .collect();
        self.tools.insert(catalog.server.clone(), tools);
        (self.prompts).insert(catalog.server.clone(), prompt_names(catalog));
    }

    /// Without `server`'s names.
    pub fn without(&mut self, server: &str) {
        self.tools.remove(server);
        self.prompts.remove(server);
    }
}

/// Checks that no own name of a tool or prompt of a server with `prefix: false` is one of
/// `meta_tools` or the name of any other tool or prompt `listed` has (own or qualified).
pub(in crate::server) fn check(
    config: &std::path::Path,
    servers: &[ServerConfig],
    listed: &Listed,
    meta_tools: &[&str],
) -> Result<(), Clash> {
    let clash = |first: &str, second: String, server: &str, or| Clash {
        config: config.display().to_string(),
        first: first.to_owned(),
        second,
        server: server.to_owned(),
        or,
    };
    let mut tools: BTreeMap<String, String> = meta_tools
        .iter()
        .map(|t| (t.to_string(), format!("meta-server's meta-tool {t}")))
        .collect();
    for (server, names) in &listed.tools {
        for (own, qualified) in names {
            let who = format!("tool \"{own}\" of server \"{server}\"");
            tools.entry(qualified.clone()).or_insert(who);
        }
    }
    let mut prompts: BTreeMap<String, String> = BTreeMap::new();
    for server in servers {
        for prompt in listed.prompts.get(&server.name).into_iter().flatten() {
            let who = format!("prompt \"{prompt}\" of server \"{}\"", server.name);
            prompts.insert(qualified_name(&server.name, prompt), who);
        }
    }
    for server in unprefixed(servers) {
        for (name, _) in listed.tools.get(server).into_iter().flatten() {
            let who = format!("tool \"{name}\" of server \"{server}\" (prefix: false)");
            match tools.get(name) {
                Some(first) => {
                    return Err(clash(
                        first,
                        who,
                        server,
                        " or leave the tool out with \"denyTools\"",
                    ));
                }
                None => tools.insert(name.clone(), who),
            };
        }
        for name in listed.prompts.get(server).into_iter().flatten() {
            let who = format!("prompt \"{name}\" of server \"{server}\" (prefix: false)");
            match prompts.get(name) {
                Some(first) => return Err(clash(first, who, server, "")),
                None => prompts.insert(name.clone(), who),
            };
        }
    }
    Ok(())
}

/// The own names of the prompts in `catalog`.
fn prompt_names(catalog: &Catalog) -> Vec<String> {
    (catalog.prompts.iter())
        .flat_map(|p| p.iter())
        .filter_map(|p| p.get("name")?.as_str().map(str::to_owned))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::Path;

    fn server(name: &str, prefix: bool) -> ServerConfig {
        ServerConfig {
            prefix,
            ..ServerConfig::catalog_only(name)
        }
    }

    fn library(servers: &[ServerConfig], catalogs: Vec<(&str, Vec<&str>, Vec<&str>)>) -> Library {
        let catalogs = catalogs
            .into_iter()
            .map(|(server, tools, prompts)| {
                let tools = tools
                    .iter()
                    .map(|t| json!({"name": t, "inputSchema": {"type": "object"}}).into())
                    .collect();
                let prompts: Vec<_> = prompts.iter().map(|p| json!({"name": p})).collect();
                let catalog = Catalog {
                    prompts: Some(prompts.into()),
                    ..Catalog::new(server, tools)
                };
                (server.to_owned(), catalog)
            })
            .collect();
        Library::build(servers, catalogs).unwrap()
    }

    const META: [&str; 3] = ["search_tools", "get_tool_details", "call_tool"];

    #[test]
    fn own_names_resolve_to_the_first_unprefixed_server_and_qualified_names_to_themselves() {
        let servers = [server("a", true), server("b", false), server("c", false)];
        let library = library(
            &servers,
            vec![
                ("a", vec!["read"], vec![]),
                ("b", vec!["read", "write"], vec![]),
                ("c", vec!["write", "odd name"], vec![]),
            ],
        );
        let q = |name| qualify(&servers, &library, name);
        assert_eq!(q("read").as_deref(), Some("b__read"), "a is prefixed");
        assert_eq!(q("write").as_deref(), Some("b__write"), "b comes first");
        assert_eq!(q("c__write").as_deref(), Some("c__write"));
        assert_eq!(q("a__read").as_deref(), Some("a__read"));
        assert_eq!(q("odd name").as_deref(), Some("c__odd-name"));
        assert_eq!(
            q("odd-name"),
            None,
            "an own name is matched as the server wrote it"
        );
        assert_eq!(q("nothing"), None);
    }

    #[test]
    fn an_own_name_that_another_tool_or_prompt_has_is_an_error_naming_both() {
        let check = |servers: &[ServerConfig], lib: &Library| {
            check(Path::new("/c.json"), servers, &Listed::of(lib), &META).map_err(|e| e.to_string())
        };
        let servers = [server("a", true), server("b", false)];
        let fine = library(
            &servers,
            vec![
                ("a", vec!["read"], vec!["p"]),
                ("b", vec!["read"], vec!["p"]),
            ],
        );
        assert!(check(&servers, &fine).is_ok(), "a's are a__read and a__p");

        let meta = library(&servers, vec![("b", vec!["call_tool"], vec![])]);
        let e = check(&servers, &meta).unwrap_err();
        assert!(
            e.contains("meta-tool call_tool") && e.contains("\"call_tool\" of server \"b\""),
            "{e}"
        );
        assert!(
            e.contains("/c.json")
                && e.contains(
                    "\"prefix\": true on server \"b\" or leave the tool out with \"denyTools\""
                ),
            "{e}"
        );

        let both = [server("b", false), server("c", false)];
        let twice = library(
            &both,
            vec![("b", vec!["read"], vec![]), ("c", vec!["read"], vec![])],
        );
        let e = check(&both, &twice).unwrap_err();
        assert!(
            e.contains("server \"b\"") && e.contains("server \"c\""),
            "{e}"
        );

        let qualified = library(
            &servers,
            vec![("a", vec!["x"], vec![]), ("b", vec!["a__x"], vec![])],
        );
        let e = check(&servers, &qualified).unwrap_err();
        assert!(
            e.contains("\"x\" of server \"a\"") && e.contains("\"a__x\" of server \"b\""),
            "{e}"
        );

        let prompts = library(
            &both,
            vec![("b", vec![], vec!["p"]), ("c", vec![], vec!["p"])],
        );
        let e = check(&both, &prompts).unwrap_err();
        assert!(
            e.contains("prompt \"p\" of server \"b\"") && e.contains("prompt"),
            "{e}"
        );
        assert!(!e.contains("denyTools"), "{e}");
    }
}
