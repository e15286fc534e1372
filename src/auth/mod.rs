//! OAuth 2.1 for remote upstreams (MCP authorization, 2025-11-25): logging in, keeping the
//! credentials (one owner-only file per server under the data dir, never in catalogs, logs or
//! errors), and the authorized HTTP client the upstream transports use. rmcp's `auth`
//! feature speaks the protocol (discovery, registration, PKCE, `resource`, refresh).

mod callback;
mod login;
mod store;

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use rmcp::transport::auth::OAuthClientConfig;
use rmcp::transport::{AuthClient, AuthorizationManager};

pub use callback::{Prompt, Show};
pub use login::{Login, login};
pub use store::FileStore;

use crate::config::{ConfigError, Launch, ServerConfig};

/// Overrides where credentials are kept (default: `<data dir>/meta-server/auth`).
pub const ENV_DIR: &str = "META_SERVER_AUTH_DIR";

/// What went wrong logging in or using stored credentials. Messages never hold a token.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(
        "server \"{0}\" is a local (stdio) server: it has no login; give it credentials in \"env\""
    )]
    NotRemote(String),
    #[error("cannot read or write credentials at {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "credential file {path} is unreadable ({message}); run `meta-server auth logout` for the server and log in again"
    )]
    Corrupt { path: PathBuf, message: String },
    #[error("login to \"{server}\" failed: {message}")]
    Flow { server: String, message: String },
    #[error(
        "server \"{server}\" offers no way to register meta-server as a client ({detail}); register a client with its provider and put its id in the server's \"oauth\": {{\"clientId\": ...}}"
    )]
    NoRegistration { server: String, detail: String },
    #[error("cannot read authorization-server metadata from {url}: {message}")]
    Metadata { url: String, message: String },
    #[error("authorization was denied: {0}")]
    Denied(String),
    #[error("{0}")]
    Callback(String),
}

/// Installs ring as rustls' crypto provider, once: reqwest is built without a default one,
/// and every HTTP client (upstream transports, OAuth) needs it.
pub fn ensure_tls() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Where credential files live: `$META_SERVER_AUTH_DIR`, else `<data dir>/meta-server/auth`.
pub fn auth_dir() -> PathBuf {
    match std::env::var_os(ENV_DIR).filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => dirs::data_dir()
            .unwrap_or_else(|| PathBuf::from("."))
            .join("meta-server")
            .join("auth"),
    }
}

/// A remote server's login context: where it is, and its credential file.
struct Session {
    /// The URL with `${VAR}` expanded: where requests go.
    url: String,
    /// The URL as configured: what credentials are bound to (no secrets expanded into it).
    configured_url: String,
    server: String,
    /// The configured `oauth.clientSecret`, expanded.
    client_secret: Option<String>,
}

impl Session {
    fn of(config: &ServerConfig) -> Result<Self, AuthError> {
        let url = match config.launch()? {
            Launch::Http { url, .. } | Launch::Sse { url, .. } => url,
            Launch::Stdio { .. } => return Err(AuthError::NotRemote(config.name.clone())),
        };
        let client_secret = match config
            .oauth
            .as_ref()
            .and_then(|o| o.client_secret.as_deref())
        {
            Some(secret) => Some(
                crate::config::expand(secret, &|v| std::env::var(v).ok()).map_err(|var| {
                    ConfigError::MissingVar {
                        server: config.key.clone(),
                        key: "oauth.clientSecret".into(),
                        var,
                    }
                })?,
            ),
            None => None,
        };
        Ok(Self {
            url,
            configured_url: config.remote_url().unwrap_or_default().to_owned(),
            server: config.name.clone(),
            client_secret,
        })
    }

    fn store(&self) -> FileStore {
        FileStore::new(&auth_dir(), &self.server, &self.configured_url)
    }
}

/// An HTTP client that sends `config`'s stored token (refreshing it when due), or `None`
/// when meta-server never logged in to that server. Reads the credential file afresh.
pub async fn client(
    config: &ServerConfig,
) -> Result<Option<AuthClient<reqwest::Client>>, AuthError> {
    client_in(config, &auth_dir()).await
}

/// [`client`] with the credentials kept in `dir`.
pub async fn client_in(
    config: &ServerConfig,
    dir: &std::path::Path,
) -> Result<Option<AuthClient<reqwest::Client>>, AuthError> {
    ensure_tls();
    let session = Session::of(config)?;
    let store = FileStore::new(dir, &session.server, &session.configured_url);
    let Some(record) = store.record()? else {
        return Ok(None);
    };
    let Some(credentials) = &record.credentials else {
        return Ok(None);
    };
    let fail = |e: rmcp::transport::AuthError| AuthError::Flow {
        server: config.name.clone(),
        message: e.to_string(),
    };
    let mut manager = AuthorizationManager::new(session.url.as_str())
        .await
        .map_err(fail)?;
    let mut client = OAuthClientConfig::new(record.client_id.clone(), record.redirect_uri.clone())
        .with_scopes(credentials.granted_scopes.clone());
    if let Some(secret) = record.client_secret.clone().or(session.client_secret) {
        client = client.with_client_secret(secret);
    }
    manager.set_metadata(record.metadata.clone());
    manager.set_credential_store(store);
    manager.configure_client(client).map_err(fail)?;
    Ok(Some(AuthClient::new(reqwest::Client::new(), manager)))
}

/// What meta-server knows of a server's login without asking the server.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum Stored {
    /// No credentials.
    None,
    /// Logged in; the token expires at `expires_at` (seconds since the epoch) if known.
    LoggedIn {
        scopes: Vec<String>,
        expires_at: Option<u64>,
        refreshable: bool,
        registration: String,
    },
}

/// The stored login of `config`'s server.
pub fn stored(config: &ServerConfig) -> Result<Stored, AuthError> {
    use oauth2::TokenResponse;
    let session = Session::of(config)?;
    let Some(record) = session.store().record()? else {
        return Ok(Stored::None);
    };
    let Some(credentials) = record.credentials else {
        return Ok(Stored::None);
    };
    let Some(tokens) = credentials.token_response else {
        return Ok(Stored::None);
    };
    let expires_at = tokens
        .expires_in()
        .zip(credentials.token_received_at)
        .map(|(d, at)| at + d.as_secs());
    Ok(Stored::LoggedIn {
        scopes: credentials.granted_scopes,
        expires_at,
        refreshable: tokens.refresh_token().is_some(),
        registration: record.registration,
    })
}

/// Keeps a 403 `insufficient_scope` challenge with the server's login, so the next
/// `meta-server auth login` (from any process) asks for the scope it names. Best effort.
pub fn remember_step_up(config: &ServerConfig, challenge: &str) {
    let Ok(session) = Session::of(config) else {
        return;
    };
    let store = session.store();
    if let Ok(Some(mut record)) = store.record() {
        record.step_up = Some(challenge.to_owned());
        if let Err(e) = store.write(&record) {
            tracing::warn!(server = %config.name, "cannot note the scope the server asked for: {e}");
        }
    }
}

/// Forgets `config`'s server's credentials; `false` when there were none.
pub fn logout(config: &ServerConfig) -> Result<bool, AuthError> {
    Session::of(config)?.store().remove()
}

/// Seconds since the epoch, for comparing with `Stored::LoggedIn::expires_at`.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
