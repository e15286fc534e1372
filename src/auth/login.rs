//! The authorization-code flow with PKCE (MCP authorization, 2025-11-25): discovery from the
//! server's challenge, client registration in the spec's order (pre-registered, Client ID
//! Metadata Document, dynamic), scope selection, the user's consent in a browser, and the
//! token exchange. rmcp's `AuthorizationManager` does the protocol; this decides and persists.

use rmcp::transport::auth::{
    AuthorizationMetadata, AuthorizationRequest, AuthorizationSession, WWWAuthenticateParams,
};
use rmcp::transport::{AuthError as OAuthError, AuthorizationManager};

use super::callback::{self, Prompt};
use super::{AuthError, Lookup, Session};
use crate::config::ServerConfig;

/// Name under which meta-server registers itself dynamically.
const CLIENT_NAME: &str = "meta-server";

/// What a login achieved.
#[derive(Debug)]
pub struct Login {
    pub server: String,
    /// How the client id was obtained: `pre-registered`, `metadata-document` or `dynamic`.
    pub registration: String,
    pub scopes: Vec<String>,
    /// Seconds until the access token expires, if the server said.
    pub expires_in: Option<u64>,
    pub refreshable: bool,
}

/// Logs in to `config`'s server. `challenge` is the `WWW-Authenticate` value of the 401 or
/// 403 that asked for it: it seeds discovery and scope selection; a 403 `insufficient_scope`
/// asks for the scopes already granted plus the challenged ones.
pub async fn login(
    config: &ServerConfig,
    challenge: Option<&str>,
    prompt: Prompt,
) -> Result<Login, AuthError> {
    super::ensure_tls();
    let session = Session::of(config)?;
    let oauth = config.oauth.clone().unwrap_or_default();
    let listener = callback::bind(oauth.callback_port).await?;
    let redirect_uri = callback::redirect_uri(&listener)?;
    let store = session.store();
    // A login for another URL is replaced by this one: nothing of it is used.
    let previous = match store.lookup() {
        Ok(Lookup::Found(record)) => Some(*record),
        _ => None,
    };
    let granted = previous
        .as_ref()
        .and_then(|r| r.credentials.as_ref())
        .map(|c| c.granted_scopes.clone())
        .unwrap_or_default();
    // A scope the server asked for since the last login (noted by any process) wins.
    let step_up = previous.and_then(|r| r.step_up);
    let challenge = step_up.as_deref().or(challenge);

    let mut manager = AuthorizationManager::new(session.url.as_str())
        .await
        .map_err(|e| flow(config, e))?;
    manager.set_credential_store(store.clone());
    let metadata = match &oauth.auth_server_metadata_url {
        Some(url) => fetch_metadata(url).await?,
        None => {
            manager
                .resolve_metadata_from_challenge(challenge)
                .await
                .map_err(|e| flow(config, e))?
                .metadata
        }
    };
    // Before anything is registered, opened, printed or offered.
    super::check_metadata(&config.name, &metadata)?;
    manager.set_metadata(metadata.clone());

    let scopes = scopes(&manager, &oauth.scopes, &granted, challenge, &session.url);
    let scope_refs: Vec<&str> = scopes.iter().map(String::as_str).collect();
    let secret = session.client_secret.clone();
    let (client_id, registered_secret, registration) = if let Some(id) = oauth.client_id.clone() {
        (id, None, "pre-registered")
    } else if let Some(url) = oauth
        .client_metadata_url
        .clone()
        .filter(|_| supports_metadata_documents(&metadata))
    {
        (url, None, "metadata-document")
    } else {
        let registered = manager
            .register_client(CLIENT_NAME, &redirect_uri, &scope_refs)
            .await
            .map_err(|e| match e {
                OAuthError::RegistrationFailed(m) if metadata.registration_endpoint.is_none() => {
                    AuthError::NoRegistration {
                        server: config.name.clone(),
                        detail: m,
                    }
                }
                e => flow(config, e),
            })?;
        (registered.client_id, registered.client_secret, "dynamic")
    };
    let mut request = AuthorizationRequest::new(redirect_uri.clone())
        .with_client_name(CLIENT_NAME)
        .with_preregistered_client(client_id.clone())
        .with_scopes(scopes.clone());
    if let Some(secret) = registered_secret.clone().or(secret) {
        request = request.with_client_secret(secret);
    }
    // The record exists before the exchange, so rmcp can save the tokens into it.
    store.write(&store.new_record(
        client_id,
        registered_secret,
        redirect_uri,
        registration,
        metadata,
    ))?;
    let auth = AuthorizationSession::new(manager, request)
        .await
        .map_err(|(_, e)| flow(config, e))?;
    let redirect =
        callback::wait(&config.name, listener, auth.get_authorization_url(), prompt).await?;
    let tokens = auth
        .handle_callback_with_issuer(
            &redirect.code,
            &redirect.csrf_token,
            redirect.issuer.as_deref(),
        )
        .await
        .map_err(|e| flow(config, e))?;
    use oauth2::TokenResponse;
    let stored = store
        .record()?
        .and_then(|r| r.credentials)
        .map(|c| c.granted_scopes)
        .unwrap_or(scopes);
    Ok(Login {
        server: config.name.clone(),
        registration: registration.to_owned(),
        scopes: stored,
        expires_in: tokens.expires_in().map(|d| d.as_secs()),
        refreshable: tokens.refresh_token().is_some(),
    })
}

/// The scopes to ask for: the config's, else (step-up) those granted plus the challenged
/// ones, else what rmcp selects (the challenge's `scope`, else the resource's
/// `scopes_supported`, else none).
fn scopes(
    manager: &AuthorizationManager,
    configured: &[String],
    granted: &[String],
    challenge: Option<&str>,
    url: &str,
) -> Vec<String> {
    if !configured.is_empty() {
        return configured.to_vec();
    }
    let params = challenge
        .zip(reqwest::Url::parse(url).ok())
        .map(|(c, base)| WWWAuthenticateParams::parse(c, &base));
    if let Some(params) = params.filter(WWWAuthenticateParams::is_insufficient_scope) {
        let mut union = granted.to_vec();
        for scope in params.scope.iter().flat_map(|s| s.split_whitespace()) {
            if !union.iter().any(|s| s == scope) {
                union.push(scope.to_owned());
            }
        }
        return union;
    }
    manager.select_scopes(None, &[])
}

fn supports_metadata_documents(metadata: &AuthorizationMetadata) -> bool {
    metadata
        .additional_fields
        .get("client_id_metadata_document_supported")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false)
}

/// Authorization-server metadata from a configured URL, instead of discovery.
async fn fetch_metadata(url: &str) -> Result<AuthorizationMetadata, AuthError> {
    let fail = |message: String| AuthError::Metadata {
        url: url.to_owned(),
        message,
    };
    let response = reqwest::get(url).await.map_err(|e| fail(e.to_string()))?;
    if !response.status().is_success() {
        return Err(fail(format!("HTTP {}", response.status())));
    }
    let bytes = response.bytes().await.map_err(|e| fail(e.to_string()))?;
    serde_json::from_slice(&bytes).map_err(|e| fail(e.to_string()))
}

fn flow(config: &ServerConfig, e: OAuthError) -> AuthError {
    AuthError::Flow {
        server: config.name.clone(),
        message: crate::redact::Redactor::new(config.secrets()).apply(&e.to_string()),
    }
}
