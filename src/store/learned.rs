//! What search learned from use, shared by replicas: each tool's evidence JSON in one hash
//! (`l:e`, field = qualified tool name), its version in another (`l:v`), and a generation
//! (`l:g`) bumped at every write, which replicas poll to follow each other. A tool's evidence
//! is written only if its version is the one read, so concurrent merges never drop each
//! other's; both hashes expire a while after the last write.

use std::collections::HashMap;

use rand::Rng;

use super::{StoreError, Valkey};
use crate::learning::{Evidence, MAX_AGE, ToolEvidence};

/// Where evidence read from the store says it came from.
const ORIGIN: &str = "<shared store>";

/// Writes `ARGV[3]` (`""`: deletes) as the evidence of tool `ARGV[1]` with version `ARGV[4]`
/// if its version is `ARGV[2]` (`""`: none); returns 1 if written.
const REPLACE: &str = "\
local current = redis.call('HGET', KEYS[2], ARGV[1]) or ''
if current ~= ARGV[2] then return 0 end
if ARGV[3] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[2], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[4])
end
redis.call('INCR', KEYS[3])
for i = 1, 3 do redis.call('EXPIRE', KEYS[i], ARGV[5]) end
return 1";

/// One tool's evidence as the store holds it, with its version.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedEvidence {
    pub evidence: ToolEvidence,
    pub version: String,
}

fn parse(tool: &str, json: &str) -> Option<ToolEvidence> {
    serde_json::from_str(json)
        .inspect_err(|e| tracing::warn!(tool, "learned evidence in {ORIGIN} is unreadable: {e}"))
        .ok()
}

impl Valkey {
    /// Every tool's evidence in the store.
    pub async fn learned(&self) -> Result<Evidence, StoreError> {
        let all: HashMap<String, String> = self
            .query("learned", redis::cmd("HGETALL").arg(self.key("l:e")))
            .await?;
        let tools = all
            .into_iter()
            .filter_map(|(tool, json)| Some((tool.clone(), parse(&tool, &json)?)))
            .collect();
        Ok(Evidence { tools })
    }

    /// Changes at every write of any tool's evidence.
    pub async fn learned_generation(&self) -> Result<u64, StoreError> {
        let generation: Option<u64> = self
            .query("learned", redis::cmd("GET").arg(self.key("l:g")))
            .await?;
        Ok(generation.unwrap_or(0))
    }

    /// The version of every tool's evidence, by tool.
    pub async fn learned_versions(&self) -> Result<HashMap<String, String>, StoreError> {
        self.query("learned", redis::cmd("HGETALL").arg(self.key("l:v")))
            .await
    }

    /// The evidence of `tool`, if the store has any it can read.
    pub async fn learned_tool(&self, tool: &str) -> Result<Option<SharedEvidence>, StoreError> {
        let mut pipe = redis::pipe();
        pipe.cmd("HGET")
            .arg(self.key("l:e"))
            .arg(tool)
            .cmd("HGET")
            .arg(self.key("l:v"))
            .arg(tool);
        let (json, version): (Option<String>, Option<String>) =
            self.query_pipe("learned", &pipe).await?;
        Ok(json.zip(version).and_then(|(json, version)| {
            Some(SharedEvidence {
                evidence: parse(tool, &json)?,
                version,
            })
        }))
    }

    /// Writes `evidence` (`None`: deletes it) as `tool`'s if the store holds the version
    /// `expected` of it (`None`: none); returns the new version, or `None` if another write
    /// came first.
    pub async fn replace_learned_tool(
        &self,
        tool: &str,
        expected: Option<&str>,
        evidence: Option<&ToolEvidence>,
    ) -> Result<Option<String>, StoreError> {
        let version = format!("{:016x}", rand::rng().random::<u64>());
        let json = evidence
            .map(|e| serde_json::to_string(e).expect("evidence serializes"))
            .unwrap_or_default();
        let written: i64 = self
            .query(
                "learned",
                redis::cmd("EVAL")
                    .arg(REPLACE)
                    .arg(3)
                    .arg(self.key("l:e"))
                    .arg(self.key("l:v"))
                    .arg(self.key("l:g"))
                    .arg(tool)
                    .arg(expected.unwrap_or(""))
                    .arg(json)
                    .arg(&version)
                    .arg(MAX_AGE.as_secs()),
            )
            .await?;
        Ok((written == 1).then_some(version))
    }

    /// Forgets everything (`None`), a server's tools or one tool, as
    /// [`Evidence::forget`] does; returns how many queries were forgotten.
    pub async fn forget_learned(&self, what: Option<&str>) -> Result<usize, StoreError> {
        let mut evidence = self.learned().await?;
        let before = evidence.clone();
        let forgotten = evidence.forget(what);
        let gone: Vec<&String> = before
            .tools
            .keys()
            .filter(|t| !evidence.tools.contains_key(*t))
            .collect();
        if gone.is_empty() {
            return Ok(0);
        }
        let mut pipe = redis::pipe();
        pipe.cmd("HDEL")
            .arg(self.key("l:e"))
            .arg(&gone)
            .ignore()
            .cmd("HDEL")
            .arg(self.key("l:v"))
            .arg(&gone)
            .ignore()
            .cmd("INCR")
            .arg(self.key("l:g"))
            .ignore();
        self.query_pipe::<()>("learned", &pipe).await?;
        Ok(forgotten)
    }
}
