//! The embedding path with the real model (feature `embeddings`; assets from
//! `scripts/fetch-embed-assets`, in `$META_SERVER_EMBED_DIR` or meta-server's default place).

use std::path::PathBuf;
use std::sync::Arc;

use std::collections::BTreeMap;

use meta_server::catalog::{Catalog, RawTool};
use meta_server::config::ServerConfig;
use meta_server::library::{EmbedStats, Library, TABLE_FILE};
use meta_server::search::embed::{self, Embedder, VectorFile};
use meta_server::search::{SearchIndex, ToolDoc};

fn embed_dir() -> PathBuf {
    let dir = std::env::var_os(meta_server::config::EMBED_DIR_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(meta_server::config::default_embed_dir);
    assert!(
        dir.join(embed::MODEL_DIR).join("model.onnx").exists(),
        "no embedding assets in {}; run scripts/fetch-embed-assets",
        dir.display()
    );
    dir
}

fn tool(name: &str, description: &str) -> ToolDoc {
    ToolDoc {
        key: format!("s__{name}"),
        server: "s".into(),
        name: name.into(),
        title: String::new(),
        description: description.into(),
        params: String::new(),
        server_text: "s".into(),
        learned: String::new(),
    }
}

#[test]
fn a_paraphrase_finds_the_tool_that_bm25_misses() {
    let embedder = Embedder::load(&embed_dir()).expect("the fetched model loads");
    let docs = vec![
        tool(
            "ResearchHelper",
            "Assists with academic research: scholarly articles, journals and citations",
        ),
        tool("find_files", "Find files on disk whose path matches a glob"),
        tool("get_forecast", "Get the weather forecast for a city"),
        tool("send_email", "Send an email message to a recipient"),
        tool("run_sql", "Run a SQL query against a database"),
    ];
    let texts: Vec<String> = docs
        .iter()
        .map(|d| embed::tool_text(&d.name, &d.title, &d.description))
        .collect();
    let keys: Vec<String> = docs.iter().map(|d| d.key.clone()).collect();
    let idx = SearchIndex::build(docs).unwrap();
    let vectors = embedder.embed_documents(&texts).unwrap();
    assert_eq!(vectors.len(), 5);
    assert_eq!(vectors[0].len(), 384);
    let map = keys.into_iter().zip(vectors).collect();
    let doc_vectors = embed::DocVectors::new(384, idx.keys(), &map);

    let query = "Can I find peer-reviewed papers?";
    let bm25 = idx.search(query, 3, None).unwrap();
    assert_ne!(bm25[0].key, "s__ResearchHelper", "BM25 alone: {bm25:?}");
    let q = embedder.embed_query(query).unwrap();
    let hybrid = idx
        .search_hybrid(query, &q, &doc_vectors, None, 3, None)
        .unwrap();
    assert_eq!(hybrid[0].key, "s__ResearchHelper", "hybrid: {hybrid:?}");
    // The query vector is cached: the same allocation comes back.
    assert!(Arc::ptr_eq(&q, &embedder.embed_query(query).unwrap()));
}

#[test]
fn both_model_files_embed_alike_under_ids_of_their_own() {
    let full = embed_dir();
    let integer = Embedder::load(&full).expect("the fetched model loads");
    // The same assets without the derived integer file: the published model.onnx is used.
    let plain = tempfile::tempdir().unwrap();
    let model = plain.path().join(embed::MODEL_DIR);
    std::fs::create_dir(&model).unwrap();
    std::os::unix::fs::symlink(
        full.join(embed::RUNTIME_FILE),
        plain.path().join(embed::RUNTIME_FILE),
    )
    .unwrap();
    for entry in std::fs::read_dir(full.join(embed::MODEL_DIR)).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap() != "model-integer.onnx" {
            std::os::unix::fs::symlink(&path, model.join(path.file_name().unwrap())).unwrap();
        }
    }
    let fp32 = Embedder::load(plain.path()).expect("model.onnx alone loads");
    assert_eq!(fp32.model_id(), "all-minilm-l6-v2-int8");
    assert_eq!(integer.model_id(), "all-minilm-l6-v2-int8-matmulinteger");

    let text = ["Get the weather forecast for a city".to_owned()];
    let a = &integer.embed_documents(&text).unwrap()[0];
    let b = &fp32.embed_documents(&text).unwrap()[0];
    let cosine: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    assert!(a != b, "the integer file computes its own vectors");
    assert!(cosine > 0.98, "but close ones: cosine {cosine}");
}

#[test]
fn missing_assets_are_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let e = Embedder::load(dir.path()).err().expect("nothing to load");
    assert!(e.to_string().contains("fetch-embed-assets"), "{e}");
}

#[test]
fn the_quickstarts_demo_query_finds_the_current_time_first() {
    // scripts/quickstart searches "what time is it in Tokyo" over the four reference servers:
    // only "time" matches any tool, and convert_time has it in shorter fields, so it is the
    // vectors that must put get_current_time first (EVAL.md round 7c).
    let dir = tempfile::tempdir().unwrap();
    let catalogs = dir.path().join("catalogs");
    std::fs::create_dir(&catalogs).unwrap();
    let shipped = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("catalogs");
    for server in ["everything", "filesystem", "memory", "time"] {
        let name = format!("{server}.json");
        std::fs::copy(shipped.join(&name), catalogs.join(&name)).unwrap();
    }
    let queries = dir.path().join("demo.jsonl");
    std::fs::write(
        &queries,
        r#"{"id": "demo", "query": "what time is it in Tokyo", "gold": [{"server": "time", "name": "get_current_time"}]}"#,
    )
    .unwrap();
    let out = crate::support::succeeds(
        crate::support::meta_server(&[
            "eval",
            "--queries",
            queries.to_str().unwrap(),
            "--catalog-dir",
            catalogs.to_str().unwrap(),
            "--json",
        ])
        .env(meta_server::config::EMBED_DIR_ENV, embed_dir())
        .env(meta_server::config::EMBEDDINGS_ENV, "on"),
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        report["ranking"].as_str().unwrap().starts_with("hybrid"),
        "{report}"
    );
    assert_eq!(report["metrics"]["recall@1"], 1.0, "{report}");
    // "Tokyo" is in no tool's text, but it is a place to ask about (capitalised, not the
    // query's first word), not a missing intent: the search is sure (issue 41).
    assert_eq!(report["confidence"]["share"], 1.0, "{report}");
}

#[test]
fn index_computes_tool_vectors_once_so_serve_starts_hybrid() {
    let dir = tempfile::tempdir().unwrap();
    let fault = crate::support::fault_server();
    let config = crate::support::write_config(
        dir.path(),
        serde_json::json!({"faulty": {"command": fault}}),
        serde_json::json!({"catalogDir": "cat", "embeddings": {"dir": embed_dir()}}),
    );
    let index = || {
        let out = crate::support::succeeds(
            crate::support::meta_server(&["--config", config.to_str().unwrap(), "index"])
                .env_remove(meta_server::config::EMBED_DIR_ENV)
                .env(meta_server::config::EMBEDDINGS_ENV, "on"),
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let first = index();
    // Every tool of the fixture and the built-in ones, however many the fixture has.
    let tools = first
        .split("tool vectors: ")
        .nth(1)
        .and_then(|rest| rest.split(" tools,").next())
        .unwrap_or_else(|| panic!("{first}"));
    assert!(
        first.contains(&format!(
            "tool vectors: {tools} tools, {tools} embedded now"
        )),
        "{first}"
    );
    // One table for every server, the built-in tools included.
    assert!(dir.path().join("cat").join(TABLE_FILE).exists());
    assert!(!dir.path().join("cat/faulty.vectors").exists());
    // A second run finds every vector in the table: it embeds nothing.
    let second = index();
    assert!(
        second.contains(&format!("tool vectors: {tools} tools, 0 embedded now")),
        "{second}"
    );

    // serve loads the persisted vectors in the background: searches answer by words until
    // they are attached, then every search is hybrid, with nothing left to embed.
    let on = [(meta_server::config::EMBEDDINGS_ENV, "on")];
    let mut session = crate::support::Session::start_with(
        &config,
        &dir.path().join("cat"),
        &on,
        std::process::Stdio::null(),
    );
    session.initialize();
    let mut id = 1;
    let mut search = |session: &mut crate::support::Session| {
        id += 1;
        let found = session.call(id, "search_tools", serde_json::json!({"query": "crash"}));
        let mode = found["result"]["structuredContent"]["mode"].clone();
        assert!(mode == "bm25" || mode == "hybrid", "{found}");
        mode == "hybrid"
    };
    crate::support::wait_until("a hybrid search", || search(&mut session).then_some(()));
    assert!(search(&mut session), "hybrid once hybrid");
    session.finish();
    // Switched off, the same catalogs are searched by words only, and the result says so.
    let off = [(meta_server::config::EMBEDDINGS_ENV, "off")];
    let mut session = crate::support::Session::start_with(
        &config,
        &dir.path().join("cat"),
        &off,
        std::process::Stdio::null(),
    );
    session.initialize();
    let first =
        session.call(2, "search_tools", serde_json::json!({"query": "crash"}))["result"].clone();
    assert_eq!(first["structuredContent"]["mode"], "bm25", "{first}");
    session.finish();
}

#[test]
fn a_client_leaving_while_tools_are_embedded_ends_serve_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let catalogs = dir.path().join("cat");
    std::fs::create_dir(&catalogs).unwrap();
    // More tools than start-up embeds before serving, and no vector file: they are embedded in
    // the background, by the document session.
    let tools: Vec<_> = (0..300)
        .map(|i| {
            serde_json::json!({
                "name": format!("tool_{i}"),
                "description": format!("Update record {i} of the calendar for a user"),
                "inputSchema": {"type": "object"},
            })
        })
        .collect();
    let catalog = serde_json::json!({"format": 1, "server": "big", "tools": tools});
    std::fs::write(catalogs.join("big.json"), catalog.to_string()).unwrap();
    let config = crate::support::write_config(
        dir.path(),
        crate::support::unstartable(&["big"]),
        serde_json::json!({"skillsDirs": [], "embeddings": {"dir": embed_dir()}}),
    );
    let log = dir.path().join("stderr.log");
    let env = [
        (meta_server::config::EMBEDDINGS_ENV, "on"),
        ("META_SERVER_LOG", "info,meta_server::search::embed=debug"),
    ];
    let mut session = crate::support::Session::start_with(
        &config,
        &catalogs,
        &env,
        std::fs::File::create(&log).unwrap(),
    );
    session.initialize();
    let stderr = || std::fs::read_to_string(&log).unwrap();
    // The client leaves as soon as the tools are being embedded.
    crate::support::wait_until("the document session", || {
        stderr().contains("document session created").then_some(())
    });
    let status = session.finish();
    let stderr = stderr();
    assert!(status.success(), "{status}: {stderr}");
    assert!(!stderr.contains("not computed"), "{stderr}");
    assert!(!stderr.contains("ONNX"), "{stderr}");
}

#[test]
fn the_document_session_dropped_after_a_catalog_comes_back_alike() {
    let embedder = Embedder::load(&embed_dir()).expect("the fetched model loads");
    // More texts than the query session takes: the document session embeds them.
    let texts: Vec<String> = (0..80)
        .map(|i| format!("Send message {i} to a channel"))
        .collect();
    let first = embedder.embed_documents(&texts).unwrap();
    embedder.end_documents();
    let again = embedder.embed_documents(&texts).unwrap();
    assert_eq!(first.len(), 80);
    assert_eq!(first, again);
}

/// Servers `names`, each listing the same three tools (a server copied under other names).
fn copies(names: &[&str]) -> Library {
    let tools = [
        ("send_email", "Send an email message to a recipient"),
        ("get_forecast", "Get the weather forecast for a city"),
        ("run_sql", "Run a SQL query against a database"),
    ];
    let catalog = |server: &str| {
        let tools = tools
            .iter()
            .map(|(name, description)| {
                RawTool::from(serde_json::json!({
                    "name": name, "description": description, "inputSchema": {"type": "object"},
                }))
            })
            .collect();
        Catalog::new(server, tools)
    };
    let servers: Vec<ServerConfig> = names
        .iter()
        .map(|n| ServerConfig::catalog_only(n))
        .collect();
    let catalogs: BTreeMap<String, Catalog> = names
        .iter()
        .map(|n| ((*n).to_owned(), catalog(n)))
        .collect();
    Library::build(&servers, catalogs).unwrap()
}

#[test]
fn copies_of_a_server_are_embedded_once_and_share_their_vectors() {
    let embedder = Arc::new(Embedder::load(&embed_dir()).expect("the fetched model loads"));
    let dir = tempfile::tempdir().unwrap();
    let library = copies(&["a", "b", "c"]);
    let stats = library.embed(embedder.clone(), Some(dir.path())).unwrap();
    assert_eq!(
        stats,
        EmbedStats {
            tools: 9,
            embedded: 3
        }
    );
    assert!(library.is_hybrid());
    let hits = library.search("mail someone a note", 3, None).unwrap();
    let names: Vec<&str> = hits.iter().map(|h| h.key.as_str()).collect();
    assert_eq!(names, ["a__send_email", "b__send_email", "c__send_email"]);
    assert!(hits.iter().all(|h| h.similarity == hits[0].similarity));
    // Another copy needs nothing embedded; the table then holds the same three texts.
    let more = copies(&["a", "b", "c", "d"]);
    let stats = more.embed(embedder, Some(dir.path())).unwrap();
    assert_eq!(
        stats,
        EmbedStats {
            tools: 12,
            embedded: 0
        }
    );
    let table = embed::VectorTable::open(&dir.path().join(TABLE_FILE))
        .unwrap()
        .unwrap();
    assert_eq!((table.len(), table.dim()), (3, 384));
}

#[test]
fn vectors_of_format_1_files_are_carried_into_the_table() {
    let embedder = Arc::new(Embedder::load(&embed_dir()).expect("the fetched model loads"));
    let dir = tempfile::tempdir().unwrap();
    // What an older meta-server left: a's vectors in a.vectors, b's of another model.
    let library = copies(&["a", "b"]);
    let texts: Vec<(String, String)> = ["send_email", "get_forecast", "run_sql"]
        .iter()
        .map(|name| {
            let entry = library.get(&format!("a__{name}")).unwrap();
            let def = &entry.def;
            let text = embed::tool_text(
                &def.name,
                def.title.as_deref().unwrap_or(""),
                &def.description(),
            );
            (entry.qualified.clone(), text)
        })
        .collect();
    let (a, embedded) = embed::update_vectors(None, &texts, embedder.model_id(), |t| {
        embedder.embed_documents(t)
    })
    .unwrap();
    assert_eq!(embedded, 3);
    a.save(&dir.path().join("a.vectors")).unwrap();
    let other = VectorFile {
        model: "another-model".into(),
        ..a.clone()
    };
    other.save(&dir.path().join("b.vectors")).unwrap();
    // b's texts are a's: all three come from a's file, none is embedded.
    let stats = library.embed(embedder.clone(), Some(dir.path())).unwrap();
    assert_eq!(
        stats,
        EmbedStats {
            tools: 6,
            embedded: 0
        }
    );
    assert!(dir.path().join(TABLE_FILE).exists());
    assert!(
        !dir.path().join("a.vectors").exists(),
        "carried, then removed"
    );
    assert!(
        !dir.path().join("b.vectors").exists(),
        "another model: read, then removed"
    );
    let hits = library.search("mail someone a note", 1, None).unwrap();
    assert_eq!(hits[0].key, "a__send_email");
    // A format 1 file of another model alone: its tools are embedded again.
    let dir = tempfile::tempdir().unwrap();
    other.save(&dir.path().join("a.vectors")).unwrap();
    let stats = copies(&["a"]).embed(embedder, Some(dir.path())).unwrap();
    assert_eq!(
        stats,
        EmbedStats {
            tools: 3,
            embedded: 3
        }
    );
    assert!(!dir.path().join("a.vectors").exists());
}
