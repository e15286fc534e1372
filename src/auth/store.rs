//! One server's OAuth state on disk: `<auth-dir>/<server>.json`, owner-only, rewritten
//! atomically. It holds the client registration and the tokens, is read afresh on every use
//! (a login in another terminal takes effect at once), and refreshes take a file lock
//! (`<server>.lock`), so two processes never spend one refresh token twice.
//!
//! A record is bound to the URL the server is reached at, `${VAR}` expanded: a token is only
//! ever sent where it was obtained. When the configured URL holds variables, the expanded one
//! may hold secrets (a key in the path or query), so the record keeps the configured text and
//! a SHA-256 of the expanded URL, never the expanded URL itself.

use std::path::{Path, PathBuf};

use rmcp::transport::auth::{AuthorizationMetadata, StoredCredentials};
use rmcp::transport::{AuthError as OAuthError, CredentialRefreshGuard, CredentialStore};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::AuthError;

/// Version of the credential file; a newer one is refused, never misread. Format 1 binds by the
/// URL in clear (`url`); format 2 by `urlSha256`, which meta-server before format 2 would not
/// check, so it must refuse those files rather than send their token wherever `url` expands.
const FORMAT: u32 = 2;

/// What meta-server keeps about one server it logged in to.
#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub format: u32,
    pub server: String,
    /// The server URL: the one the credentials were obtained for when `url_sha256` is absent,
    /// else the configured text (`${VAR}` unexpanded) for people to read.
    pub url: String,
    /// SHA-256 (hex) of the URL, `${VAR}` expanded, the credentials were obtained for: only
    /// when the configured URL holds variables. Credentials are only ever sent to that URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_sha256: Option<String>,
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
    /// The URL requests go to, `${VAR}` expanded: what records are bound to.
    url: String,
    /// The URL as configured, when it differs from `url` (it holds variables).
    configured: Option<String>,
}

/// What the credential file holds for the URL a store is bound to.
#[derive(Debug)]
pub enum Lookup {
    /// No file.
    Missing,
    /// A record obtained for another URL: never used for this one.
    OtherUrl,
    Found(Box<Record>),
}

impl FileStore {
    /// The store of `server`, whose credentials are for `url`, the URL requests go to (with
    /// any `${VAR}` expanded).
    pub fn new(dir: &Path, server: &str, url: &str) -> Self {
        Self {
            path: dir.join(format!("{server}.json")),
            server: server.to_owned(),
            url: url.to_owned(),
            configured: None,
        }
    }

    /// Notes the URL as configured: when it differs from the expanded one, records keep it and
    /// a hash of the expanded URL instead of the expanded URL, which may hold secrets.
    pub fn configured_as(mut self, configured: &str) -> Self {
        self.configured = (configured != self.url).then(|| configured.to_owned());
        self
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The record, if there is one for this server at this URL. A record made for another
    /// URL is ignored: its tokens must not travel to a server they were not issued for.
    pub fn record(&self) -> Result<Option<Record>, AuthError> {
        match self.lookup()? {
            Lookup::Found(record) => Ok(Some(*record)),
            Lookup::Missing => Ok(None),
            Lookup::OtherUrl => {
                tracing::warn!(
                    server = %self.server,
                    "the stored login is for another URL than the one configured now; its token is not sent; run `meta-server auth login {}`",
                    self.server
                );
                Ok(None)
            }
        }
    }

    /// The credential file's state for this store's URL.
    pub fn lookup(&self) -> Result<Lookup, AuthError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Lookup::Missing),
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
        if !self.binds(&record) {
            return Ok(Lookup::OtherUrl);
        }
        Ok(Lookup::Found(Box::new(record)))
    }

    /// Whether `record` was made for this store's URL. A format-1 record of a configured URL
    /// with variables holds the unexpanded text, which no expanded URL equals: it is never sent.
    fn binds(&self, record: &Record) -> bool {
        match &record.url_sha256 {
            Some(digest) => digest.eq_ignore_ascii_case(&url_digest(&self.url)),
            None => record.url == self.url,
        }
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
        // A URL without variables stays in clear in a format-1 file, as older meta-servers
        // wrote and read it.
        let (format, url, url_sha256) = match &self.configured {
            None => (1, self.url.clone(), None),
            Some(configured) => (FORMAT, configured.clone(), Some(url_digest(&self.url))),
        };
        Record {
            format,
            server: self.server.clone(),
            url,
            url_sha256,
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

/// The hex SHA-256 of a URL: what records of a URL with variables are bound to.
fn url_digest(url: &str) -> String {
    crate::checksum::hex(&Sha256::digest(url.as_bytes()))
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

    fn login(store: &FileStore) {
        let mut record = store.new_record(
            "client-1".into(),
            None,
            "http://127.0.0.1:1/callback".into(),
            "dynamic",
            metadata(),
        );
        record.credentials = Some(StoredCredentials::new(
            "client-1".into(),
            None,
            vec![],
            Some(1),
        ));
        store.write(&record).unwrap();
    }

    /// A URL with `${VAR}`: the login is bound to what it expanded to, kept as a hash (the
    /// expansion may hold a secret), and another expansion never gets its token.
    #[tokio::test]
    async fn a_url_with_variables_is_bound_to_its_expansion_never_written_in_clear() {
        let dir = tempfile::tempdir().unwrap();
        let configured = "https://${MCP_HOST}/mcp?key=${MCP_KEY}";
        let at = |expanded: &str| {
            FileStore::new(dir.path(), "notion", expanded).configured_as(configured)
        };
        let a = at("https://a.example/mcp?key=sekrit-a");
        login(&a);
        let text = std::fs::read_to_string(a.path()).unwrap();
        assert!(
            !text.contains("sekrit-a") && !text.contains("a.example"),
            "{text}"
        );
        let file: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(file["format"], 2);
        assert_eq!(file["url"], configured);
        assert_eq!(file["urlSha256"].as_str().unwrap().len(), 64);
        assert!(a.load().await.unwrap().is_some());

        for other in [
            "https://b.example/mcp?key=sekrit-a",
            "https://a.example/mcp?key=sekrit-b",
            "https://a.example/mcp?key=sekrit-a&x",
        ] {
            assert!(
                matches!(at(other).lookup().unwrap(), Lookup::OtherUrl),
                "{other}"
            );
            assert!(at(other).load().await.unwrap().is_none(), "{other}");
        }
        // The same URL written out in the config is the same server.
        let literal = FileStore::new(dir.path(), "notion", "https://a.example/mcp?key=sekrit-a");
        assert!(literal.load().await.unwrap().is_some());
        // A login to B replaces A's; back at A, a login is needed again.
        let b = at("https://b.example/mcp?key=sekrit-b");
        login(&b);
        assert!(b.load().await.unwrap().is_some());
        assert!(matches!(a.lookup().unwrap(), Lookup::OtherUrl));
    }

    /// Credential files written before logins were bound to the expanded URL (format 1).
    #[test]
    fn format_1_files_keep_working_unless_their_url_had_variables() {
        let dir = tempfile::tempdir().unwrap();
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/auth");
        let plain = "https://mcp.example/mcp";
        std::fs::copy(
            fixtures.join("format-1.json"),
            dir.path().join("notion.json"),
        )
        .unwrap();
        let store = FileStore::new(dir.path(), "notion", plain).configured_as(plain);
        let Lookup::Found(record) = store.lookup().unwrap() else {
            panic!("a format-1 file of a plain URL is used as before");
        };
        let tokens = record.credentials.unwrap().token_response.unwrap();
        assert_eq!(
            oauth2::TokenResponse::access_token(&tokens).secret(),
            "access-1"
        );
        assert_eq!(record.metadata.token_endpoint, "https://mcp.example/token");
        // Written back (a refresh), it stays format 1, readable by meta-server before format 2.
        let mut again = store.record().unwrap().unwrap();
        again.step_up = Some("Bearer scope=\"x\"".into());
        store.write(&again).unwrap();
        let file: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(store.path()).unwrap()).unwrap();
        assert_eq!(
            (file["format"].as_u64(), file["url"].as_str()),
            (Some(1), Some(plain))
        );
        assert!(file.get("urlSha256").is_none());

        // Made for "https://${MCP_HOST}/mcp": which server it was obtained from is unknown.
        std::fs::copy(
            fixtures.join("format-1-variables.json"),
            dir.path().join("linear.json"),
        )
        .unwrap();
        let store =
            FileStore::new(dir.path(), "linear", plain).configured_as("https://${MCP_HOST}/mcp");
        assert!(matches!(store.lookup().unwrap(), Lookup::OtherUrl));
    }

    #[test]
    fn a_newer_format_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/auth/format-1.json"),
        )
        .unwrap()
        .replace("\"format\": 1", "\"format\": 3");
        std::fs::write(dir.path().join("notion.json"), text).unwrap();
        let store = FileStore::new(dir.path(), "notion", "https://mcp.example/mcp");
        let err = store.lookup().unwrap_err().to_string();
        assert!(err.contains("format 3 is newer"), "{err}");
    }
}
