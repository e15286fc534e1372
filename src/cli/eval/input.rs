//! What `eval` reads: query files (with their fit/check part) and tools, as JSON lines or
//! a catalog directory.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, bail};
use serde::Deserialize;
use serde_json::Value;

use crate::catalog::Catalog;
use crate::config::server_identifier;
use crate::library::qualified_name;

/// A part of a query file for [`super::Args::part`].
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq)]
pub(super) enum Part {
    Fit,
    Check,
}

impl Part {
    /// The part a query belongs to: `check` when the first byte of the SHA-256 of its id (its
    /// text if it has none, see [`id_of`]) is a multiple of 3.
    pub(super) fn of(id: &str) -> Self {
        use sha2::Digest;
        if sha2::Sha256::digest(id.as_bytes())[0] % 3 == 0 {
            Part::Check
        } else {
            Part::Fit
        }
    }
}

#[derive(Deserialize)]
pub(super) struct QueryLine {
    #[serde(default)]
    pub(super) id: Value,
    pub(super) query: String,
    pub(super) gold: Vec<GoldLine>,
}

#[derive(Deserialize)]
pub(super) struct GoldLine {
    pub(super) server: String,
    pub(super) name: String,
    #[serde(default)]
    pub(super) alt: Vec<GoldLine>,
}

/// A query's id as text: its `id`, or its text if it has none.
fn id_of(id: &Value, query: &str) -> String {
    match id {
        Value::Null => query.to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// One line of the query file.
pub(super) struct Query {
    pub(super) line: usize,
    /// Its id as text (see [`id_of`]).
    pub(super) id: String,
    pub(super) part: Part,
    pub(super) text: String,
    /// Gold items, each as its acceptable qualified names (the tool, then its alts).
    pub(super) gold: Vec<Vec<String>>,
}

/// Reads the query file.
pub(super) fn read_queries(path: &Path) -> anyhow::Result<Vec<Query>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read queries {}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let q: QueryLine = serde_json::from_str(line)
            .with_context(|| format!("{}:{}: not a query line", path.display(), i + 1))?;
        let mut gold = Vec::with_capacity(q.gold.len());
        for g in &q.gold {
            let mut keys = vec![key(&g.server, &g.name)?];
            for alt in &g.alt {
                keys.push(key(&alt.server, &alt.name)?);
            }
            gold.push(keys);
        }
        if gold.is_empty() {
            bail!(
                "{}:{}: query {} has no gold tools",
                path.display(),
                i + 1,
                q.id
            );
        }
        let id = id_of(&q.id, &q.query);
        out.push(Query {
            line: i + 1,
            part: Part::of(&id),
            id,
            text: q.query,
            gold,
        });
    }
    if out.is_empty() {
        bail!("{} holds no queries", path.display());
    }
    Ok(out)
}

/// The qualified name search results use for (server, tool).
pub(super) fn key(server: &str, name: &str) -> anyhow::Result<String> {
    Ok(qualified_name(&server_id(server)?, name))
}

pub(super) fn server_id(server: &str) -> anyhow::Result<String> {
    server_identifier(server).map_err(|e| anyhow::anyhow!("server \"{server}\": {e}"))
}

/// Groups JSON-lines tools into one in-memory catalog per server.
pub(super) fn catalogs_from_jsonl(path: &Path) -> anyhow::Result<BTreeMap<String, Catalog>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read tools {}", path.display()))?;
    let mut catalogs: BTreeMap<String, Catalog> = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = || format!("{}:{}", path.display(), i + 1);
        let mut tool: serde_json::Map<String, Value> =
            serde_json::from_str(line).with_context(|| format!("{}: not a JSON object", at()))?;
        let Some(Value::String(server)) = tool.remove("server") else {
            bail!("{}: a tool line needs a \"server\" string", at());
        };
        let server = server_id(&server).with_context(at)?;
        catalogs
            .entry(server.clone())
            .or_insert_with(|| Catalog::new(server, Vec::new()))
            .tools
            .push(Value::Object(tool).into());
    }
    Ok(catalogs)
}

/// Loads every `*.json` catalog in `dir`, keyed by the server it names.
pub(super) fn catalogs_from_dir(dir: &Path) -> anyhow::Result<BTreeMap<String, Catalog>> {
    let entries = std::fs::read_dir(dir).with_context(|| {
        format!(
            "cannot read catalog dir {}; pass --tools FILE.jsonl or --catalog-dir DIR",
            dir.display()
        )
    })?;
    let mut catalogs = BTreeMap::new();
    for entry in entries {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "json")
            && let Some(catalog) = Catalog::load(&path)?
        {
            catalogs.insert(catalog.server.clone(), catalog);
        }
    }
    Ok(catalogs)
}
