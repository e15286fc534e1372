//! Catalogs shared by replicas: each server's catalog JSON under its launch-config
//! fingerprint (`c:<server>:<fingerprint>`, with a version that changes at every publish), a
//! hash of every catalog's version (`catalogs`) that replicas poll to follow each other's
//! listings, and leases (`lease:<name>`) that let one replica list a server while the others
//! wait for its catalog.

use std::collections::HashMap;
use std::time::Duration;

use rand::Rng;

use super::{StoreError, Valkey};

/// How long catalogs stay in the store without being published again.
const CATALOG_TTL: Duration = Duration::from_secs(30 * 24 * 3600);

/// A catalog as another replica (or this one) published it.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedCatalog {
    /// The catalog file's JSON (format v1).
    pub json: String,
    /// Changes at every publish.
    pub version: String,
}

/// A lease held in the store until released or until its time runs out.
pub struct Lease {
    store: Valkey,
    key: String,
    token: String,
}

/// Deletes the lease only if it is still ours (it may have run out and been taken since).
const RELEASE: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end";

impl Lease {
    pub async fn release(self) {
        let (key, token) = (self.key, self.token);
        let _ = self
            .store
            .query::<i64>(
                "lease",
                redis::cmd("EVAL").arg(RELEASE).arg(1).arg(key).arg(token),
            )
            .await;
    }
}

/// The field of a catalog in the `catalogs` hash.
fn field(server: &str, fingerprint: &str) -> String {
    format!("{server}:{fingerprint}")
}

impl Valkey {
    /// The catalog of `server` listed with the launch config of `fingerprint`, if any.
    pub async fn catalog(
        &self,
        server: &str,
        fingerprint: &str,
    ) -> Result<Option<SharedCatalog>, StoreError> {
        let key = self.key(&format!("c:{}", field(server, fingerprint)));
        let (json, version): (Option<String>, Option<String>) = self
            .query(
                "catalog",
                redis::cmd("HMGET").arg(key).arg("json").arg("version"),
            )
            .await?;
        Ok(json
            .zip(version)
            .map(|(json, version)| SharedCatalog { json, version }))
    }

    /// Publishes `json` as the catalog of `server` for `fingerprint`; returns its version.
    pub async fn publish_catalog(
        &self,
        server: &str,
        fingerprint: &str,
        json: String,
    ) -> Result<String, StoreError> {
        let field = field(server, fingerprint);
        let key = self.key(&format!("c:{field}"));
        let index = self.key("catalogs");
        let version = format!("{:016x}", rand::rng().random::<u64>());
        let ttl = CATALOG_TTL.as_secs();
        let mut pipe = redis::pipe();
        pipe.cmd("HSET")
            .arg(&key)
            .arg("json")
            .arg(json)
            .arg("version")
            .arg(&version)
            .ignore()
            .cmd("EXPIRE")
            .arg(&key)
            .arg(ttl)
            .ignore()
            .cmd("HSET")
            .arg(&index)
            .arg(field)
            .arg(&version)
            .ignore()
            .cmd("EXPIRE")
            .arg(&index)
            .arg(ttl)
            .ignore();
        self.query_pipe::<()>("catalog", &pipe).await?;
        Ok(version)
    }

    /// The version of every published catalog, by `<server>:<fingerprint>`.
    pub async fn catalog_versions(&self) -> Result<HashMap<String, String>, StoreError> {
        let index = self.key("catalogs");
        self.query("catalog", redis::cmd("HGETALL").arg(index))
            .await
    }

    /// The version field of `server`'s catalog for `fingerprint` in [`Self::catalog_versions`].
    pub fn catalog_field(server: &str, fingerprint: &str) -> String {
        field(server, fingerprint)
    }

    /// Takes the lease `name` for `ttl` if nobody holds it.
    pub async fn lease(&self, name: &str, ttl: Duration) -> Result<Option<Lease>, StoreError> {
        let key = self.key(&format!("lease:{name}"));
        let token = format!("{:032x}", rand::rng().random::<u128>());
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        let taken: Option<String> = self
            .query(
                "lease",
                redis::cmd("SET")
                    .arg(&key)
                    .arg(&token)
                    .arg("NX")
                    .arg("PX")
                    .arg(ms),
            )
            .await?;
        Ok(taken.map(|_| Lease {
            store: self.clone(),
            key,
            token,
        }))
    }

    /// Whether somebody holds the lease `name`.
    pub async fn is_leased(&self, name: &str) -> Result<bool, StoreError> {
        let key = self.key(&format!("lease:{name}"));
        let count: i64 = self.query("lease", redis::cmd("EXISTS").arg(key)).await?;
        Ok(count > 0)
    }
}
