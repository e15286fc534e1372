//! Tool approvals shared by replicas: each server's approvals JSON with a version that changes
//! at every write (`a:<server>`), and a hash of every server's version (`approvals`) that
//! replicas poll to follow each other's approvals. Approvals do not expire: they are the
//! user's decisions.

use std::collections::HashMap;

use rand::Rng;

use super::{StoreError, Valkey};

/// One server's approvals as the store holds them.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedApprovals {
    /// The approvals file's JSON (format v1).
    pub json: String,
    /// Changes at every write.
    pub version: String,
}

/// Writes the approvals `ARGV[2]` with version `ARGV[3]` if the version in the store is
/// `ARGV[1]` (`""`: there are none); returns 1 if written.
const REPLACE: &str = "\
local current = redis.call('HGET', KEYS[1], 'version') or ''
if current ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'json', ARGV[2], 'version', ARGV[3])
redis.call('HSET', KEYS[2], ARGV[4], ARGV[3])
return 1";

impl Valkey {
    /// The approvals of `server`, if any were shared.
    pub async fn approvals(&self, server: &str) -> Result<Option<SharedApprovals>, StoreError> {
        let key = self.key(&format!("a:{server}"));
        let (json, version): (Option<String>, Option<String>) = self
            .query(
                "approvals",
                redis::cmd("HMGET").arg(key).arg("json").arg("version"),
            )
            .await?;
        Ok(json
            .zip(version)
            .map(|(json, version)| SharedApprovals { json, version }))
    }

    /// Writes `json` as `server`'s approvals if the store holds the version `expected` of
    /// them (`None`: if it holds none); returns the new version, or `None` if another write
    /// came first.
    pub async fn replace_approvals(
        &self,
        server: &str,
        expected: Option<&str>,
        json: &str,
    ) -> Result<Option<String>, StoreError> {
        let version = format!("{:016x}", rand::rng().random::<u64>());
        let written: i64 = self
            .query(
                "approvals",
                redis::cmd("EVAL")
                    .arg(REPLACE)
                    .arg(2)
                    .arg(self.key(&format!("a:{server}")))
                    .arg(self.key("approvals"))
                    .arg(expected.unwrap_or(""))
                    .arg(json)
                    .arg(&version)
                    .arg(server),
            )
            .await?;
        Ok((written == 1).then_some(version))
    }

    /// The version of every server's shared approvals, by server.
    pub async fn approval_versions(&self) -> Result<HashMap<String, String>, StoreError> {
        let index = self.key("approvals");
        self.query("approvals", redis::cmd("HGETALL").arg(index))
            .await
    }
}
