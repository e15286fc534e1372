//! The connection to the shared store (Valkey or Redis): opened lazily, reconnected by the
//! `redis` crate's connection manager, every operation bounded in time. A store that refuses
//! connections fails operations at once; one that does not answer in time counts as down for
//! a moment, in which operations fail without waiting, so a hung store costs a caller at most
//! one timeout, never a hang. Either is used again as soon as it answers.

use crate::clock::Instant;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::StoreError;

/// Time one operation (one command or pipeline) may take.
const OP_TIMEOUT: Duration = Duration::from_secs(3);
/// Time to open a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// After a timeout, operations fail at once for this long instead of waiting again.
const DOWN_FOR: Duration = Duration::from_secs(1);
/// Time a health check may take.
const PING_TIMEOUT: Duration = Duration::from_secs(1);
/// Every key meta-server writes starts with this.
const PREFIX: &str = "meta-server:";

/// A handle on the shared store; cheap to clone.
#[derive(Clone)]
pub struct Valkey {
    conn: ConnectionManager,
    /// The URL with its password masked, for messages.
    shown: std::sync::Arc<str>,
    health: std::sync::Arc<Health>,
}

#[derive(Default)]
struct Health {
    /// Until when operations fail at once (after a timeout), and why.
    down: Mutex<Option<(Instant, String)>>,
    /// Whether the last operation failed.
    failing: std::sync::atomic::AtomicBool,
    /// Failed operations by kind.
    errors: Mutex<BTreeMap<&'static str, u64>>,
}

/// What `/metrics` shows of the store.
#[derive(Debug, Clone, Default)]
pub struct StoreStats {
    /// Failed operations by kind (`put`, `get`, `session`, `catalog`, `ping`, ...).
    pub errors: BTreeMap<&'static str, u64>,
    /// Whether the last operation succeeded.
    pub up: bool,
}

impl std::fmt::Debug for Valkey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Valkey({})", self.shown)
    }
}

impl Valkey {
    /// Checks `url` (`${VAR}` references expanded now, from the environment) and prepares a
    /// connection; nothing is connected until the first operation, so a store that is down at
    /// start-up does not stop meta-server from serving.
    pub fn open(url: &str) -> Result<Self, StoreError> {
        Self::open_with(url, &|var| std::env::var(var).ok())
    }

    /// Like [`Self::open`], with the variable lookup given.
    pub fn open_with(
        url: &str,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, StoreError> {
        let url = crate::config::expand(url, lookup).map_err(|crate::config::Unset(var)| {
            StoreError::BadUrl(format!("uses ${{{var}}}, which is not set; export {var}"))
        })?;
        let shown = masked(&url);
        if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
            return Err(StoreError::BadUrl(format!(
                "is \"{shown}\", which is not a redis:// or rediss:// URL"
            )));
        }
        if url.starts_with("rediss://") {
            crate::auth::ensure_tls();
        }
        let client = redis::Client::open(url.as_str())
            .map_err(|e| StoreError::BadUrl(format!("\"{shown}\" does not parse ({e})")))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(OP_TIMEOUT))
            .set_number_of_retries(0);
        let conn = ConnectionManager::new_lazy_with_config(client, config)
            .map_err(|e| StoreError::BadUrl(format!("\"{shown}\" cannot be used ({e})")))?;
        Ok(Self {
            conn,
            shown: shown.into(),
            health: Default::default(),
        })
    }

    /// The URL without its password.
    pub fn shown_url(&self) -> &str {
        &self.shown
    }

    /// The full key for `name`.
    pub(super) fn key(&self, name: &str) -> String {
        format!("{PREFIX}{name}")
    }

    /// Runs `cmd` within the operation timeout, unless the store is known to be down; a
    /// failure marks it down and is counted under `op`.
    pub(super) async fn query<T: redis::FromRedisValue>(
        &self,
        op: &'static str,
        cmd: &redis::Cmd,
    ) -> Result<T, StoreError> {
        self.guarded(op, |mut c| async move { cmd.query_async(&mut c).await })
            .await
    }

    /// [`Self::query`] for a pipeline.
    pub(super) async fn query_pipe<T: redis::FromRedisValue>(
        &self,
        op: &'static str,
        pipe: &redis::Pipeline,
    ) -> Result<T, StoreError> {
        self.guarded(op, |mut c| async move { pipe.query_async(&mut c).await })
            .await
    }

    async fn guarded<T, F, Fut>(&self, op: &'static str, run: F) -> Result<T, StoreError>
    where
        F: Fn(ConnectionManager) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        if let Some(why) = self.down_reason() {
            return Err(StoreError::Unavailable(why));
        }
        self.attempt(op, OP_TIMEOUT, run).await
    }

    /// Runs `run` within `limit`. A connection lost since the last operation (the store
    /// restarted) fails the first try and starts a new connection: the second try uses it.
    async fn attempt<T, F, Fut>(
        &self,
        op: &'static str,
        limit: Duration,
        run: F,
    ) -> Result<T, StoreError>
    where
        F: Fn(ConnectionManager) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        let once = || tokio::time::timeout(limit, run(self.conn.clone()));
        let mut outcome = once().await;
        if let Ok(Err(e)) = &outcome
            && (e.is_io_error() || e.is_connection_dropped())
            && !e.is_timeout()
        {
            outcome = once().await;
        }
        let timed_out = match &outcome {
            Err(_) => true,
            Ok(Err(e)) => e.is_timeout(),
            Ok(Ok(_)) => false,
        };
        let outcome = match outcome {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(format!("{} ({e})", self.shown)),
            Err(_) => Err(format!("{} did not answer within {limit:?}", self.shown)),
        };
        let health = &self.health;
        health.failing.store(outcome.is_err(), Ordering::Relaxed);
        match outcome {
            Ok(value) => {
                *health.down.lock() = None;
                Ok(value)
            }
            Err(why) => {
                tracing::warn!(op, "shared store: {why}");
                *self.health.errors.lock().entry(op).or_default() += 1;
                if timed_out {
                    *health.down.lock() = Some((Instant::now() + DOWN_FOR, why.clone()));
                }
                Err(StoreError::Unavailable(why))
            }
        }
    }

    /// Why the store counts as down now, if it does.
    fn down_reason(&self) -> Option<String> {
        let down = self.health.down.lock();
        down.as_ref()
            .filter(|(until, _)| Instant::now() < *until)
            .map(|(_, why)| why.clone())
    }

    /// Asks the store whether it answers (always tried, even when it counts as down).
    pub async fn ping(&self) -> Result<(), StoreError> {
        let ping = redis::cmd("PING");
        self.attempt("ping", PING_TIMEOUT, |mut c| {
            let ping = &ping;
            async move { ping.query_async::<String>(&mut c).await }
        })
        .await
        .map(|_| ())
    }

    pub fn stats(&self) -> StoreStats {
        StoreStats {
            errors: self.health.errors.lock().clone(),
            up: !self.health.failing.load(Ordering::Relaxed),
        }
    }
}

/// `url` with the password of its user info replaced by `***`.
fn masked(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    match authority.rsplit_once('@') {
        Some((user_info, host)) => {
            let user = user_info.split_once(':').map_or("", |(user, _)| user);
            format!("{scheme}://{user}:***@{host}{path}")
        }
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_masked() {
        assert_eq!(
            masked("redis://127.0.0.1:6379/0"),
            "redis://127.0.0.1:6379/0"
        );
        assert_eq!(
            masked("rediss://:s3cret@cache.internal:6380"),
            "rediss://:***@cache.internal:6380"
        );
        assert_eq!(masked("redis://team:s3cret@h/2"), "redis://team:***@h/2");
    }

    #[tokio::test]
    async fn urls_are_checked_and_expanded() {
        let lookup = |var: &str| (var == "PW").then(|| "s3cret".to_owned());
        let store = Valkey::open_with("redis://:${PW}@127.0.0.1:1/0", &lookup).unwrap();
        assert_eq!(store.shown_url(), "redis://:***@127.0.0.1:1/0");
        let err = Valkey::open_with("redis://:${NOPE}@h", &lookup).unwrap_err();
        assert!(err.to_string().contains("export NOPE"), "{err}");
        let err = Valkey::open_with("http://:${PW}@h", &lookup).unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains("not a redis://") && !message.contains("s3cret"),
            "{message}"
        );
    }

    #[tokio::test]
    async fn a_store_that_refuses_connections_fails_and_is_counted() {
        // Port 1 on loopback: nothing listens, connections are refused.
        let store = Valkey::open("redis://127.0.0.1:1").unwrap();
        let err = store.ping().await.unwrap_err();
        assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
        let again = store
            .query::<Option<String>>("get", redis::cmd("GET").arg("x"))
            .await;
        assert!(matches!(again, Err(StoreError::Unavailable(_))));
        let stats = store.stats();
        assert!(!stats.up, "{stats:?}");
        assert_eq!(stats.errors.get("ping"), Some(&1));
        assert_eq!(
            stats.errors.get("get"),
            Some(&1),
            "a refusal is tried every time"
        );
    }

    #[tokio::test]
    async fn a_store_that_does_not_answer_is_not_waited_for_again() {
        // A listener that accepts and never answers: the first operation times out.
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = silent.local_addr().unwrap();
        let _accepting = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((conn, _)) = silent.accept().await {
                held.push(conn);
            }
        });
        let store = Valkey::open(&format!("redis://{addr}")).unwrap();
        let get = redis::cmd("GET").arg("x").clone();
        assert!(store.query::<Option<String>>("get", &get).await.is_err());
        assert!(store.query::<Option<String>>("get", &get).await.is_err());
        assert_eq!(
            store.stats().errors.get("get"),
            Some(&1),
            "the second operation failed at once, without trying"
        );
    }
}
