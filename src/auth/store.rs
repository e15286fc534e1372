//! One server's OAuth state on disk: `<auth-dir>/<server>.json`, owner-only, rewritten
//! atomically. It holds the client registration and the tokens, is read afresh on every use
//! (a login in another terminal takes effect at once), and refreshes take a file lock
//! (`<server>.lock`), so two processes never spend one refresh token twice.

use std::path::{Path, PathBuf};

use rmcp::transport::auth::{AuthorizationMetadata, StoredCredentials};
use rmcp::transport::{AuthError as OAuthError, CredentialRefreshGuard, CredentialStore};
use serde::{Deserialize, Serialize};

use super::AuthError;

/// Version of the credential file; a newer one is refused, never misread.
const FORMAT: u32 = 1;

/// What meta-server keeps about one server it logged in to.
#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub format: u32,
    pub server: String,
    /// The server URL as configured: credentials are only ever sent to it.
    pub url: String,
    pub client_id: String,
    /// Secret of a dynamically registered confidential client (a pre-registered client's
    /// secret stays in the config).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    pub redirect_uri: String,
    /// How the client id was obtained: `pre-registered`, `metadata-document` or `dynamic`.
    pub registration: String,
    /// The authorization server's endpoints, so connecting needs no discovery.
    pub metadata: AuthorizationMetadata,
    /// The tokens; absent once logged out or rejected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<StoredCredentials>,
    /// A 403 `insufficient_scope` challenge the server answered since: the next login asks
    /// for the scopes granted plus the challenged ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_up: Option<String>,
}

impl std::fmt::Debug for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Record")
            .field("server", &self.server)
            .field("url", &self.url)
            .field("client_id", &self.client_id)
            .field("registration", &self.registration)
            .finish_non_exhaustive()
    }
}

/// The credential file of one server, as rmcp's `CredentialStore`.
#[derive(Clone, Debug)]
pub struct FileStore {
    path: PathBuf,
    server: String,
    url: String,
}

impl FileStore {
    /// The store of `server`, whose credentials are for `url` (as configured).
    pub fn new(dir: &Path, server: &str, url: &str) -> Self {
        Self {
            path: dir.join(format!("{server}.json")),
            server: server.to_owned(),
            url: url.to_owned(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The record, if there is one for this server at this URL. A record made for another
    /// URL is ignored: its tokens must not travel to a server they were not issued for.
    pub fn record(&self) -> Result<Option<Record>, AuthError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.io(e)),
        };
        let record: Record = serde_json::from_str(&text).map_err(|e| AuthError::Corrupt {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        if record.format > FORMAT {
            return Err(AuthError::Corrupt {
                path: self.path.clone(),
                message: format!(
                    "format {} is newer than this meta-server understands ({FORMAT})",
                    record.format
                ),
            });
        }
        if record.url != self.url {
            tracing::warn!(server = %self.server, "stored login is for another URL; ignored");
            return Ok(None);
        }
        Ok(Some(record))
    }

    /// A new record for this server (format and URL filled in).
    pub fn new_record(
        &self,
        client_id: String,
        client_secret: Option<String>,
        redirect_uri: String,
        registration: &str,
        metadata: AuthorizationMetadata,
    ) -> Record {
        Record {
            format: FORMAT,
            server: self.server.clone(),
            url: self.url.clone(),
            client_id,
            client_secret,
            redirect_uri,
            registration: registration.to_owned(),
            metadata,
            credentials: None,
            step_up: None,
        }
    }

    /// Writes `record` atomically, owner-only, creating the directory (owner-only) if needed.
    pub fn write(&self, record: &Record) -> Result<(), AuthError> {
        use std::io::Write;
        let dir = self.path.parent().unwrap_or(Path::new("."));
        create_private_dir(dir).map_err(|e| self.io(e))?;
        let bytes = serde_json::to_vec_pretty(record).map_err(|e| AuthError::Corrupt {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        // NamedTempFile is created with mode 0600.
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| self.io(e))?;
        tmp.write_all(&bytes).map_err(|e| self.io(e))?;
        tmp.as_file().sync_all().map_err(|e| self.io(e))?;
        tmp.persist(&self.path).map_err(|e| self.io(e.error))?;
        Ok(())
    }

    /// Deletes the record; `false` when there was none.
    pub fn remove(&self) -> Result<bool, AuthError> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(self.io(e)),
        }
    }

    fn io(&self, source: std::io::Error) -> AuthError {
        AuthError::Io {
            path: self.path.clone(),
            source,
        }
    }

    fn lock_path(&self) -> PathBuf {
        self.path.with_extension("lock")
    }
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

fn store_error(e: AuthError) -> OAuthError {
    OAuthError::CredentialStoreError(e.to_string())
}

#[async_trait::async_trait]
impl CredentialStore for FileStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, OAuthError> {
        Ok(self
            .record()
            .map_err(store_error)?
            .and_then(|r| r.credentials))
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), OAuthError> {
        let mut record = self.record().map_err(store_error)?.ok_or_else(|| {
            OAuthError::CredentialStoreError(format!(
                "no client registration for server \"{}\"; log in again",
                self.server
            ))
        })?;
        record.credentials = Some(credentials);
        self.write(&record).map_err(store_error)
    }

    async fn clear(&self) -> Result<(), OAuthError> {
        if let Some(mut record) = self.record().map_err(store_error)? {
            record.credentials = None;
            self.write(&record).map_err(store_error)?;
        }
        Ok(())
    }

    /// An exclusive lock on `<server>.lock`, held across load, token request and save.
    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, OAuthError> {
        let path = self.lock_path();
        let file = tokio::task::spawn_blocking(move || -> std::io::Result<std::fs::File> {
            if let Some(dir) = path.parent() {
                create_private_dir(dir)?;
            }
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)?;
            file.lock()?;
            Ok(file)
        })
        .await
        .map_err(|e| OAuthError::CredentialStoreError(e.to_string()))?
        .map_err(|e| OAuthError::CredentialStoreError(format!("cannot lock credentials: {e}")))?;
        // Closing the file releases the lock.
        Ok(Some(CredentialRefreshGuard::new(file)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata() -> AuthorizationMetadata {
        serde_json::from_value(serde_json::json!({
            "authorization_endpoint": "http://127.0.0.1:1/authorize",
            "token_endpoint": "http://127.0.0.1:1/token"
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn records_are_private_bound_to_their_url_and_hold_tokens() {
        let dir = tempfile::tempdir().unwrap();
        let auth = dir.path().join("auth");
        let store = FileStore::new(&auth, "notion", "https://mcp.example/mcp");
        assert!(store.record().unwrap().is_none());
        assert!(store.load().await.unwrap().is_none());
        let record = store.new_record(
            "client-1".into(),
            None,
            "http://127.0.0.1:1/callback".into(),
            "dynamic",
            metadata(),
        );
        store.write(&record).unwrap();
        let creds = StoredCredentials::new("client-1".into(), None, vec!["read".into()], Some(1));
        store.save(creds).await.unwrap();
        let loaded = store.load().await.unwrap().unwrap();
        assert_eq!(loaded.granted_scopes, ["read"]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(store.path()), 0o600);
            assert_eq!(mode(&auth), 0o700);
        }
        let elsewhere = FileStore::new(&auth, "notion", "https://evil.example/mcp");
        assert!(
            elsewhere.load().await.unwrap().is_none(),
            "never sent to another URL"
        );
        store.clear().await.unwrap();
        assert!(store.load().await.unwrap().is_none());
        assert_eq!(store.record().unwrap().unwrap().client_id, "client-1");
        let guard = store.acquire_refresh_guard().await.unwrap();
        assert!(guard.is_some());
        assert!(store.remove().unwrap());
        assert!(!store.remove().unwrap());
    }
}
