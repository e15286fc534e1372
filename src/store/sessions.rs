//! MCP sessions in the shared store, for rmcp's session restore: the client's `initialize`
//! parameters under a digest of the session id, expiring after the session idle time unless a
//! request renews them. A replica that meets an unknown session id finds it here and replays
//! its `initialize`, so the session goes on there.

use std::time::Duration;

use rmcp::transport::streamable_http_server::session::{
    SessionState, SessionStore, SessionStoreError,
};
use sha2::{Digest, Sha256};

use super::Valkey;

/// Session states in Valkey/Redis, kept for `idle` after the last request.
pub struct SharedSessions {
    store: Valkey,
    idle: Duration,
    /// Sessions renewed lately, so a busy session costs one renewal per [`RENEW_EVERY`].
    renewed: moka::sync::Cache<String, ()>,
}

/// How often a session in use renews its entry, as a fraction of the idle time.
const RENEW_EVERY: u32 = 8;

impl SharedSessions {
    pub fn new(store: Valkey, idle: Duration) -> Self {
        Self {
            store,
            idle,
            renewed: moka::sync::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(idle / RENEW_EVERY)
                .build(),
        }
    }

    fn key(&self, session: &str) -> String {
        let digest = Sha256::digest(session.as_bytes());
        let hex = crate::checksum::hex(&digest[..16]);
        self.store.key(&format!("s:{hex}"))
    }

    fn idle_ms(&self) -> u64 {
        u64::try_from(self.idle.as_millis()).unwrap_or(u64::MAX)
    }

    /// Keeps `session`'s entry for another idle time; at most once per `idle / RENEW_EVERY`,
    /// in the background, so requests never wait for it.
    pub fn renew(&self, session: &str) {
        if self.renewed.contains_key(session) {
            return;
        }
        self.renewed.insert(session.to_owned(), ());
        let store = self.store.clone();
        let key = self.key(session);
        let idle = self.idle_ms();
        tokio::spawn(async move {
            let _ = store
                .query::<i64>("session", redis::cmd("PEXPIRE").arg(key).arg(idle))
                .await;
        });
    }
}

#[async_trait::async_trait]
impl SessionStore for SharedSessions {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let key = self.key(session_id);
        let text: Option<String> = self
            .store
            .query("session", redis::cmd("GET").arg(key))
            .await?;
        match text {
            None => Ok(None),
            Some(text) => Ok(Some(serde_json::from_str(&text)?)),
        }
    }

    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let key = self.key(session_id);
        let text = serde_json::to_string(state)?;
        let idle = self.idle_ms();
        self.store
            .query::<()>(
                "session",
                redis::cmd("SET").arg(key).arg(text).arg("PX").arg(idle),
            )
            .await?;
        Ok(())
    }

    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        let key = self.key(session_id);
        self.renewed.invalidate(session_id);
        self.store
            .query::<i64>("session", redis::cmd("DEL").arg(key))
            .await?;
        Ok(())
    }
}
