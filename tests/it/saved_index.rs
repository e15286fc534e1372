//! The search index saved beside the catalogs: `index --offline` writes it, `search` and
//! `serve` start from it with the very answers of a fresh build, and a damaged or half-written
//! one is a warning and a rebuild from the catalogs, never served.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::{SHIPPED, Session, meta_server, repo, succeeds, unstartable, write_config};

const QUERIES: [&str; 6] = [
    "read a file",
    "current time in Tokyo",
    "add two numbers",
    "create entities in the knowledge graph",
    "get_curent_time",
    "echo",
];

/// A config of the shipped servers (never started) over a copy of their catalogs.
fn setup(dir: &Path) -> PathBuf {
    setup_placing(dir, |shipped, catalog| {
        std::fs::copy(shipped, catalog).unwrap();
    })
}

/// A config of the shipped servers whose catalog files `place` puts in its catalog dir (from
/// the repository's file to the config's).
fn setup_placing(dir: &Path, place: impl Fn(PathBuf, PathBuf)) -> PathBuf {
    let catalogs = dir.join("catalogs");
    std::fs::create_dir(&catalogs).unwrap();
    for server in SHIPPED {
        let name = format!("{server}.json");
        place(repo().join("catalogs").join(&name), catalogs.join(name));
    }
    write_config(
        dir,
        unstartable(&SHIPPED),
        json!({"catalogDir": "catalogs"}),
    )
}

/// The JSON answers of `search` to every query, and its stderr.
fn search(config: &Path) -> (Vec<Value>, String) {
    let mut stderr = String::new();
    let answers = QUERIES
        .iter()
        .map(|q| {
            let (answer, err) = search_one(config, q);
            stderr.push_str(&err);
            answer
        })
        .collect();
    (answers, stderr)
}

/// The JSON answer of `search` to `query`, and its stderr.
fn search_one(config: &Path, query: &str) -> (Value, String) {
    let out = succeeds(&mut meta_server(&[
        "--config",
        config.to_str().unwrap(),
        "search",
        query,
        "--json",
    ]));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (serde_json::from_slice(&out.stdout).unwrap(), stderr)
}

fn index_offline(config: &Path) -> String {
    let out = succeeds(&mut meta_server(&[
        "--config",
        config.to_str().unwrap(),
        "index",
        "--offline",
    ]));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The generation directory the manifest names, and the files it lists.
fn saved_files(dir: &Path) -> (PathBuf, Vec<String>) {
    let root = dir.join("catalogs/.index/v3");
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(root.join("manifest.json")).unwrap()).unwrap();
    let files = manifest["files"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    (root.join(manifest["generation"].as_str().unwrap()), files)
}

#[test]
fn a_saved_index_answers_like_a_fresh_build() {
    let dir = tempfile::tempdir().unwrap();
    let config = setup(dir.path());
    let (fresh, stderr) = search(&config);
    assert!(!stderr.contains("warning"), "{stderr}");
    assert!(
        !dir.path().join("catalogs/.index").exists(),
        "search saves nothing"
    );

    let stderr = index_offline(&config);
    assert!(stderr.contains("search index: "), "{stderr}");
    let (generation, files) = saved_files(dir.path());
    assert!(files.contains(&"tables.bin".to_owned()), "{files:?}");
    assert!(files.iter().all(|f| generation.join(f).is_file()));
    let (saved, stderr) = search(&config);
    assert!(!stderr.contains("warning"), "{stderr}");
    assert_eq!(
        saved, fresh,
        "the saved index answers byte for byte as a fresh build"
    );
    index_offline(&config);
    assert_eq!(
        saved_files(dir.path()).0,
        generation,
        "an index that is up to date is not saved again"
    );
}

#[test]
fn a_damaged_or_half_written_index_is_rebuilt_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let config = setup(dir.path());
    let (fresh, _) = search(&config);
    index_offline(&config);
    let root = dir.path().join("catalogs/.index/v3");
    type Damage<'a> = Box<dyn Fn() + 'a>;
    let damages: Vec<(&str, Damage)> = vec![
        (
            "a truncated tantivy file",
            Box::new(|| {
                // The biggest of tantivy's files.
                let (generation, files) = saved_files(dir.path());
                let path = files
                    .iter()
                    .filter(|f| f.as_str() != "tables.bin")
                    .map(|f| generation.join(f))
                    .max_by_key(|p| std::fs::metadata(p).unwrap().len())
                    .unwrap();
                let bytes = std::fs::read(&path).unwrap();
                std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
            }),
        ),
        (
            "changed side tables",
            Box::new(|| {
                let path = saved_files(dir.path()).0.join("tables.bin");
                let mut bytes = std::fs::read(&path).unwrap();
                bytes[10] ^= 1;
                std::fs::write(&path, bytes).unwrap();
            }),
        ),
        (
            "a half-written manifest",
            Box::new(|| {
                let manifest = root.join("manifest.json");
                let text = std::fs::read(&manifest).unwrap();
                std::fs::write(&manifest, &text[..text.len() / 2]).unwrap();
            }),
        ),
    ];
    for (what, damage) in damages {
        damage();
        let (answers, stderr) = search(&config);
        assert!(
            stderr.contains("saved search index") && stderr.contains("rebuilt from the catalogs"),
            "{what}: {stderr}"
        );
        assert_eq!(answers, fresh, "{what}: answers of the catalogs");
        let stderr = index_offline(&config);
        assert!(stderr.contains("rebuilt"), "{what}: {stderr}");
        let (answers, stderr) = search(&config);
        assert!(!stderr.contains("warning"), "{what}, saved again: {stderr}");
        assert_eq!(answers, fresh, "{what}, saved again");
    }
}

#[test]
fn a_catalog_changed_behind_the_index_is_seen() {
    let dir = tempfile::tempdir().unwrap();
    let config = setup(dir.path());
    index_offline(&config);
    let path = dir.path().join("catalogs/time.json");
    let mut catalog: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    catalog["tools"].as_array_mut().unwrap().push(json!({
        "name": "sunrise_sunset",
        "description": "Sunrise and sunset hours of a city on a date",
        "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}}
    }));
    // Written as another program would, toolsHash left as it was.
    std::fs::write(&path, serde_json::to_string(&catalog).unwrap()).unwrap();
    let (answer, stderr) = search_one(&config, "sunrise and sunset hours");
    assert!(!stderr.contains("warning"), "{stderr}");
    assert_eq!(
        answer["hits"][0]["name"], "time__sunrise_sunset",
        "{answer}"
    );
}

#[test]
fn serve_saves_the_index_it_built_and_starts_from_it_next_time() {
    let dir = tempfile::tempdir().unwrap();
    let config = setup(dir.path());
    let catalogs = dir.path().join("catalogs");
    let call = |session: &mut Session| {
        session.initialize();
        let reply = session.call(2, "search_tools", json!({"query": "current time in Tokyo"}));
        reply["result"]["structuredContent"]["hits"].clone()
    };
    let mut session = Session::start(&config, &catalogs);
    let first = call(&mut session);
    assert_eq!(first[0]["name"], "time__get_current_time", "{first}");
    session.finish();
    let manifest = catalogs.join(".index/v3/manifest.json");
    assert!(manifest.is_file(), "serve saved the index it built");
    let saved = std::fs::read(&manifest).unwrap();

    let mut session = Session::start(&config, &catalogs);
    assert_eq!(call(&mut session), first);
    session.finish();
    assert_eq!(
        std::fs::read(&manifest).unwrap(),
        saved,
        "started from the saved index, nothing saved again"
    );
}

/// A config of the shipped servers whose catalog files are links to the repository's (old
/// enough that their stamps are trusted, see `catalog::known`).
#[cfg(unix)]
fn setup_linked(dir: &Path) -> PathBuf {
    setup_placing(dir, |shipped, catalog| {
        std::os::unix::fs::symlink(shipped, catalog).unwrap();
    })
}

#[cfg(unix)]
#[test]
fn unchanged_catalogs_are_taken_from_their_records_and_answer_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let config = setup_linked(dir.path());
    let (fresh, _) = search(&config);
    index_offline(&config);
    let records = dir.path().join("catalogs/.index/catalogs.v1");
    assert!(
        records.is_file(),
        "index saved what it knew of each catalog"
    );
    let (recalled, stderr) = search(&config);
    assert!(!stderr.contains("warning"), "{stderr}");
    assert_eq!(
        recalled, fresh,
        "the catalogs from their records answer as read"
    );

    // One catalog changed since: read again, its new tool found, the others from records.
    let time = dir.path().join("catalogs/time.json");
    let mut catalog: Value = serde_json::from_slice(&std::fs::read(&time).unwrap()).unwrap();
    catalog["tools"].as_array_mut().unwrap().push(json!({
        "name": "zanzibar_clock", "description": "The time in Zanzibar",
        "inputSchema": {"type": "object"}
    }));
    std::fs::remove_file(&time).unwrap();
    std::fs::write(&time, serde_json::to_vec(&catalog).unwrap()).unwrap();
    let (answer, _) = search_one(&config, "zanzibar clock");
    assert_eq!(
        answer["hits"][0]["name"], "time__zanzibar_clock",
        "{answer}"
    );
    let (answer, _) = search_one(&config, "read a file");
    let hits = |answer: &Value| {
        let hits = answer["hits"].as_array().unwrap().iter();
        hits.map(|h| (h["name"].clone(), h["description"].clone()))
            .collect::<Vec<_>>()
    };
    // The same tools with the same texts (scores moved: one more tool in the corpus).
    assert_eq!(hits(&answer), hits(&fresh[0]));

    // The catalog as it was, and damaged records: every catalog is read, as at first.
    std::fs::remove_file(&time).unwrap();
    std::os::unix::fs::symlink(repo().join("catalogs/time.json"), &time).unwrap();
    std::fs::write(&records, b"not records").unwrap();
    let (read_again, _) = search(&config);
    assert_eq!(read_again, fresh);
}
