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
pub use store::{FileStore, Lookup, Record};

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
    #[error(
        "login to \"{server}\" refused: the {field} its authorization server gives {reason}; only https, or http on a loopback address (127.0.0.0/8, ::1, localhost), is allowed, and nothing was opened"
    )]
    UnsafeEndpoint {
        server: String,
        field: &'static str,
        reason: String,
    },
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
/// The first call warns if others can write there (see [`dir_warning`]).
pub fn auth_dir() -> PathBuf {
    let dir = match std::env::var_os(ENV_DIR).filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => dirs::data_dir()
            .unwrap_or_else(|| PathBuf::from("."))
            .join("meta-server")
            .join("auth"),
    };
    static CHECKED: std::sync::Once = std::sync::Once::new();
    CHECKED.call_once(|| {
        if let Some(warning) = dir_warning(&dir) {
            tracing::warn!("{warning}");
        }
    });
    dir
}

/// Why `dir` is no safe place for credentials, if it is not: it is group- or world-writable,
/// or another user owns it. Then others can delete or replace credential files (say, with
/// their own login, so the user's calls act in their account), or place one before the first
/// login. The files stay owner-only (0600, written through O_EXCL temp files), so nothing is
/// read from them: meta-server warns and goes on rather than refusing, because a loose mode is
/// also what some mounts (WSL drives, network shares) report for a directory only the user can
/// reach, and the fix is the user's one `chmod`.
pub fn dir_warning(dir: &std::path::Path) -> Option<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(dir).ok()?;
        let mut problems = Vec::new();
        match meta.mode() & 0o022 {
            0 => {}
            0o020 => problems.push("group-writable"),
            0o002 => problems.push("world-writable"),
            _ => problems.push("group- and world-writable"),
        }
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if meta.uid() != me {
            problems.push("owned by another user");
        }
        if problems.is_empty() {
            return None;
        }
        Some(format!(
            "the credentials directory {} is {}: other users can replace or remove the logins kept there; run `chmod 700` on it (and own it), or set {ENV_DIR} to a private directory",
            dir.display(),
            problems.join(" and ")
        ))
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        None
    }
}

/// Refuses an OAuth endpoint that is not `https`, or `http` on a loopback host: a browser or
/// opener must never be handed `file:`, `javascript:` or a custom scheme (CVE-2025-6514), and
/// codes, secrets and tokens never travel in clear to another machine.
pub(crate) fn check_endpoint(
    server: &str,
    field: &'static str,
    url: &str,
) -> Result<(), AuthError> {
    let refuse = |reason: String| AuthError::UnsafeEndpoint {
        server: server.to_owned(),
        field,
        reason,
    };
    let Ok(parsed) = reqwest::Url::parse(url) else {
        return Err(refuse("is not a URL".into()));
    };
    // The url crate normalises both: the scheme is [a-z0-9+.-], the host ASCII (punycode, and
    // IP addresses in their canonical form).
    match (parsed.scheme(), parsed.host_str().filter(|h| !h.is_empty())) {
        ("https", Some(_)) => Ok(()),
        ("http", Some(host)) if is_loopback(host) => Ok(()),
        ("http", Some(host)) => Err(refuse(format!("is plain http to the host \"{host}\""))),
        ("http" | "https", None) => Err(refuse("has no host".into())),
        (scheme, _) => Err(refuse(format!("has the scheme \"{scheme}\""))),
    }
}

/// `localhost`, 127.0.0.0/8 or ::1, as the url crate writes hosts.
fn is_loopback(host: &str) -> bool {
    let ip = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || ip
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Checks the endpoints of authorization-server metadata that meta-server opens or sends to.
fn check_metadata(
    server: &str,
    metadata: &rmcp::transport::auth::AuthorizationMetadata,
) -> Result<(), AuthError> {
    check_endpoint(
        server,
        "authorization_endpoint",
        &metadata.authorization_endpoint,
    )?;
    check_endpoint(server, "token_endpoint", &metadata.token_endpoint)?;
    if let Some(registration) = &metadata.registration_endpoint {
        check_endpoint(server, "registration_endpoint", registration)?;
    }
    Ok(())
}

/// A remote server's login context: where it is, and its credential file.
struct Session {
    /// The URL with `${VAR}` expanded: where requests go, and what credentials are bound to.
    url: String,
    /// The URL as configured (no secrets expanded into it).
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
                crate::config::expand(secret, &|v| std::env::var(v).ok()).map_err(
                    |crate::config::Unset(var)| ConfigError::MissingVar {
                        server: config.key.clone(),
                        key: "oauth.clientSecret".into(),
                        var,
                    },
                )?,
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
        self.store_in(&auth_dir())
    }

    fn store_in(&self, dir: &std::path::Path) -> FileStore {
        FileStore::new(dir, &self.server, &self.url).configured_as(&self.configured_url)
    }
}

/// An HTTP client that sends `config`'s stored token (refreshing it when due) to `url`, the
/// server's URL as contacted (`${VAR}` expanded), or `None` when meta-server has no login
/// obtained for that URL. Reads the credential file afresh.
pub async fn client(
    config: &ServerConfig,
    url: &str,
) -> Result<Option<AuthClient<reqwest::Client>>, AuthError> {
    client_in(config, url, &auth_dir()).await
}

/// [`client`] with the credentials kept in `dir`.
pub async fn client_in(
    config: &ServerConfig,
    url: &str,
    dir: &std::path::Path,
) -> Result<Option<AuthClient<reqwest::Client>>, AuthError> {
    ensure_tls();
    let mut session = Session::of(config)?;
    session.url = url.to_owned();
    let store = session.store_in(dir);
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
    // A file from before endpoints were checked could send the refresh token anywhere.
    check_endpoint(
        &config.name,
        "token_endpoint",
        &record.metadata.token_endpoint,
    )?;
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
    /// Credentials obtained for another URL than the server's now (its `${VAR}` expand to
    /// another server): never sent; the server needs a login.
    OtherUrl,
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
    let record = match session.store().lookup()? {
        Lookup::Found(record) => *record,
        Lookup::Missing => return Ok(Stored::None),
        Lookup::OtherUrl => return Ok(Stored::OtherUrl),
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

/// The file holding `config`'s server's login, if there is one.
pub fn login_file(config: &ServerConfig) -> Option<std::path::PathBuf> {
    let path = Session::of(config).ok()?.store().path().to_owned();
    path.exists().then_some(path)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_https_or_http_on_loopback() {
        for ok in [
            "https://as.example/authorize",
            "https://as.example:8443/x?y=1",
            "http://127.0.0.1:9/token",
            "http://127.8.9.10/token",
            "http://localhost:3000/authorize",
            "http://LOCALHOST/authorize",
            "http://[::1]:8080/register",
        ] {
            assert!(check_endpoint("s", "token_endpoint", ok).is_ok(), "{ok}");
        }
        for (bad, why) in [
            ("file:///etc/passwd", "scheme \"file\""),
            ("javascript:alert(1)", "scheme \"javascript\""),
            ("JavaScript:alert(1)", "scheme \"javascript\""),
            ("data:text/html,<script>x</script>", "scheme \"data\""),
            ("ms-settings:display", "scheme \"ms-settings\""),
            (
                "http://example.com/authorize",
                "plain http to the host \"example.com\"",
            ),
            (
                "http://10.0.0.1/authorize",
                "plain http to the host \"10.0.0.1\"",
            ),
            ("http://localhost.evil.example/a", "plain http"),
            ("http://[::ffff:7f00:1]/a", "plain http"),
            ("/relative/authorize", "not a URL"),
            ("", "not a URL"),
        ] {
            let err = check_endpoint("notion", "authorization_endpoint", bad)
                .unwrap_err()
                .to_string();
            assert!(err.contains(why), "{bad}: {err}");
            assert!(
                err.contains("\"notion\"") && err.contains("authorization_endpoint"),
                "{err}"
            );
            assert!(!err.contains("passwd") && !err.contains("alert"), "{err}");
        }
    }

    #[test]
    fn metadata_with_any_unsafe_endpoint_is_refused() {
        let metadata = |authorize: &str, token: &str, register: Option<&str>| {
            serde_json::from_value::<rmcp::transport::auth::AuthorizationMetadata>(
                serde_json::json!({
                    "authorization_endpoint": authorize,
                    "token_endpoint": token,
                    "registration_endpoint": register,
                }),
            )
            .unwrap()
        };
        let good = "https://as.example/x";
        assert!(check_metadata("s", &metadata(good, good, None)).is_ok());
        assert!(check_metadata("s", &metadata(good, good, Some(good))).is_ok());
        for (m, field) in [
            (metadata("file:///x", good, None), "authorization_endpoint"),
            (
                metadata(good, "http://example.com/token", None),
                "token_endpoint",
            ),
            (
                metadata(good, good, Some("javascript:x")),
                "registration_endpoint",
            ),
        ] {
            let err = check_metadata("s", &m).unwrap_err().to_string();
            assert!(err.contains(field), "{err}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_directory_others_can_write_to_or_own_is_named() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let auth = dir.path().join("auth");
        assert_eq!(dir_warning(&auth), None, "no directory yet");
        std::fs::create_dir(&auth).unwrap();
        let chmod = |mode| std::fs::set_permissions(&auth, std::fs::Permissions::from_mode(mode));
        for (mode, warning) in [
            (0o700, None),
            (0o755, None),
            (0o770, Some("group-writable")),
            (0o777, Some("group- and world-writable")),
            (0o1777, Some("group- and world-writable")),
            (0o703, Some("world-writable")),
        ] {
            chmod(mode).unwrap();
            let got = dir_warning(&auth);
            match warning {
                None => assert_eq!(got, None, "{mode:o}"),
                Some(w) => {
                    let got = got.unwrap();
                    assert!(
                        got.contains(w) && got.contains("chmod 700"),
                        "{mode:o}: {got}"
                    );
                }
            }
        }
        chmod(0o700).unwrap();
        // Another owner: only root can give a directory away.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&auth, Some(65534), None).unwrap();
            let got = dir_warning(&auth).unwrap();
            assert!(got.contains("owned by another user"), "{got}");
        }
    }
}
