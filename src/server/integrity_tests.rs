//! Whatever hidden characters an upstream puts in its texts (Unicode tags, zero-width
//! characters, bidi controls, variation selectors, soft hyphens, fillers, separators), none
//! reaches the model or the user: not through the three meta-tools (search hits at every
//! detail, details as JSON and TypeScript with the server's instructions, the errors
//! `call_tool` gives about the tool's arguments), nor through the pass-through lists (prompts,
//! resources, resource templates), where what had any says so first.

use proptest::prelude::*;
use rmcp::model::JsonObject;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::access::Access;
use super::caller::Caller;
use super::passthrough::Passthrough;
use super::tools::request::Request;
use super::{MetaServer, State, definitions};
use crate::config::Settings;
use crate::hidden::is_hidden;
use crate::result::Owner;

/// Upstream text: words search can find, other scripts, and hidden characters of every kind.
fn text() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "add",
        "numbers",
        "read",
        "file",
        " ",
        ".",
        "é",
        "漢字",
        "\u{E0041}",
        "\u{E0069}",
        "\u{E007F}",
        "\u{200B}",
        "\u{200D}",
        "\u{202E}",
        "\u{2066}",
        "\u{2069}",
        "\u{FEFF}",
        "\u{E0100}",
        "\u{061C}",
        "\u{180E}",
        "\u{2060}",
        "\u{200F}",
        "\u{00AD}",
        "\u{FE0F}",
        "\u{034F}",
        "\u{3164}",
        "\u{2028}",
        "\u{206A}",
        "\u{FFF9}",
        "\u{0007}",
    ]);
    prop::collection::vec(pieces, 1..24).prop_map(|v| v.concat())
}

/// Every string in `value`, and in the JSON any of them holds.
fn strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => {
            if let Ok(inner @ (Value::Object(_) | Value::Array(_))) = serde_json::from_str(s) {
                strings(&inner, out);
            }
            out.push(s.clone());
        }
        Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        Value::Object(map) => map.iter().for_each(|(k, v)| {
            out.push(k.clone());
            strings(v, out);
        }),
        _ => {}
    }
}

fn assert_clean(result: &impl serde::Serialize, what: &str) -> Result<(), TestCaseError> {
    let mut all = Vec::new();
    strings(&serde_json::to_value(result).unwrap(), &mut all);
    let found = all.iter().find(|s| s.chars().any(is_hidden));
    prop_assert!(found.is_none(), "{what}: {found:?}");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn hidden_characters_never_reach_the_model(
        description in text(),
        title in text(),
        param in text(),
        param_description in text(),
        choice in text(),
        instructions in text(),
        prompt in text(),
        argument in text(),
        resource in text(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let catalog = json!({
            "format": 1, "server": "calc", "instructions": instructions,
            "tools": [{
                "name": "add", "title": title, "description": description,
                "inputSchema": {"type": "object", "properties": {
                    param.clone(): {"type": "string", "description": param_description, "enum": [choice]},
                    "n": {"type": "integer", "description": description}
                }, "required": [param]},
                "outputSchema": {"type": "object", "properties": {"sum": {"description": title}}},
                "annotations": {"title": title}
            }],
            "prompts": [{"name": "sum", "title": title, "description": prompt,
                "arguments": [{"name": "a", "description": argument}]}],
            "resources": [{"uri": "calc://memory", "name": resource, "description": resource}],
            "resourceTemplates": [{"uriTemplate": "calc://m/{slot}", "name": "slot", "title": title, "description": resource}]
        });
        std::fs::write(dir.path().join("calc.json"), catalog.to_string()).unwrap();
        let config = json!({"metaServer": {"skillsDirs": []},
            "mcpServers": {"calc": {"command": "/nonexistent/never-started"}}});
        let mut settings = Settings::parse(&dir.path().join("config.json"), &config.to_string()).unwrap();
        settings.catalog_dir = dir.path().to_owned();
        let (library, _) = super::load_library(&settings).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let server = runtime.block_on(MetaServer::start(State::new(settings, library)));
        let caller = Caller {
            client_limit: None,
            owner: Owner::session(),
            principal: None,
            cancelled: CancellationToken::new(),
            progress_to: None,
            origin: crate::upstream::Origin::Detached,
            introduced: Default::default(),
            who: Default::default(),
        };
        let call = |name: &str, arguments: Value| {
            let Value::Object(arguments) = arguments else { unreachable!() };
            let arguments: JsonObject = arguments;
            let request = Request::read(name, arguments, definitions()).unwrap();
            runtime.block_on(request.run(&server.state, &caller)).result.expect("meta-tools answer with results")
        };
        for detail in ["name", "summary", "full"] {
            for query in ["add numbers", "read file", "calc"] {
                let found = call(definitions::SEARCH_TOOLS, json!({"query": query, "detail": detail}));
                assert_clean(&found, "search_tools")?;
            }
        }
        for format in ["json", "typescript"] {
            let details = call(definitions::GET_TOOL_DETAILS, json!({"names": ["calc__add"], "format": format}));
            prop_assert!(details.is_error != Some(true));
            assert_clean(&details, "get_tool_details")?;
        }
        for arguments in [json!({}), json!({"n": "x"}), json!({"zz": 1, "n": 1.5})] {
            let called = call(definitions::CALL_TOOL, json!({"name": "calc__add", "arguments": arguments}));
            prop_assert!(called.is_error == Some(true));
            assert_clean(&called, "call_tool")?;
        }
        let near = call(definitions::CALL_TOOL, json!({"name": "calc__ad", "arguments": {}}));
        assert_clean(&near, "call_tool of a near name")?;

        let passthrough = Passthrough::new(crate::server::passthrough::OwnSpaces(&[]));
        let routes = passthrough.routes(&server.state, &Access::default());
        let prompts = super::passthrough::prompts(&server.state, &routes);
        assert_clean(&prompts, "prompts/list")?;
        // Counted as `hidden::strip` counts (a lone emoji presentation selector is not).
        let hid = |texts: &[&String]| texts.iter().any(|t| crate::hidden::strip(t).1 > 0);
        let said = |d: &Option<String>| d.as_deref().is_some_and(|d| d.starts_with("[meta-server: "));
        prop_assert_eq!(said(&prompts[0].description), hid(&[&title, &prompt, &argument]));
        let resources = super::passthrough::resources(&server.state, &routes);
        assert_clean(&resources, "resources/list")?;
        prop_assert_eq!(said(&resources[0].description), hid(&[&resource]));
        let templates = super::passthrough::templates(&server.state, &routes);
        assert_clean(&templates, "resources/templates/list")?;
        prop_assert_eq!(said(&templates[0].description), hid(&[&title, &resource]));
    }
}
