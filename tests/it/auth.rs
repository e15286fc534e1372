//! Token refresh across processes: four holders of one stored login (as four terminals would
//! be) find the access token expired at the same moment. Refreshes take turns under the
//! credential file's lock, so a rotated refresh token is never spent twice, which an
//! authorization server with reuse detection would punish by revoking the login.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use meta_server::auth::{FileStore, client_in};
use meta_server::config::Settings;
use serde_json::json;

/// A token endpoint that rotates refresh tokens and rejects a spent one (`invalid_grant`).
#[derive(Default)]
struct Issuer {
    /// The refresh token that is valid now, and how many were issued.
    current: String,
    issued: usize,
    /// Every refresh token presented, in order.
    presented: Vec<String>,
}

async fn token(State(issuer): State<Arc<Mutex<Issuer>>>, body: String) -> impl IntoResponse {
    let form: HashMap<String, String> = reqwest::Url::parse(&format!("http://form/?{body}"))
        .unwrap()
        .query_pairs()
        .into_owned()
        .collect();
    let mut issuer = issuer.lock().unwrap();
    let presented = form.get("refresh_token").cloned().unwrap_or_default();
    issuer.presented.push(presented.clone());
    if form.get("grant_type").map(String::as_str) != Some("refresh_token")
        || presented != issuer.current
    {
        return json_response(StatusCode::BAD_REQUEST, json!({"error": "invalid_grant"}));
    }
    issuer.issued += 1;
    issuer.current = format!("refresh-{}", issuer.issued);
    json_response(
        StatusCode::OK,
        json!({
            "access_token": format!("access-{}", issuer.issued),
            "token_type": "bearer",
            "expires_in": 3600,
            "refresh_token": issuer.current,
        }),
    )
}

fn json_response(status: StatusCode, body: serde_json::Value) -> axum::response::Response {
    (
        status,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_refreshes_take_turns_and_never_reuse_a_rotated_token() {
    let issuer = Arc::new(Mutex::new(Issuer {
        current: "refresh-0".into(),
        ..Issuer::default()
    }));
    let app = axum::Router::new()
        .route("/token", axum::routing::post(token))
        .with_state(issuer.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await });

    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let config = Settings::parse(
        Path::new("/c/config.json"),
        &json!({"mcpServers": {"remote": {"type": "http", "url": url}}}).to_string(),
    )
    .unwrap();
    let server = config.server("remote").unwrap().clone();
    let store = FileStore::new(dir.path(), "remote", &url);
    let metadata = serde_json::from_value(json!({
        "authorization_endpoint": format!("http://127.0.0.1:{port}/authorize"),
        "token_endpoint": format!("http://127.0.0.1:{port}/token"),
    }))
    .unwrap();
    let mut record = store.new_record(
        "client-1".into(),
        None,
        "http://127.0.0.1:1/callback".into(),
        "dynamic",
        metadata,
    );
    // Issued an hour ago, valid for a minute: expired.
    let tokens = serde_json::from_value(json!({
        "access_token": "access-0", "token_type": "bearer", "expires_in": 60, "refresh_token": "refresh-0"
    }))
    .unwrap();
    let issued_at = meta_server::auth::now() - 3600;
    record.credentials = Some(rmcp::transport::StoredCredentials::new(
        "client-1".into(),
        Some(tokens),
        vec![],
        Some(issued_at),
    ));
    store.write(&record).unwrap();

    let mut holders = Vec::new();
    for _ in 0..4 {
        holders.push(client_in(&server, dir.path()).await.unwrap().unwrap());
    }
    let tokens = futures::future::join_all(holders.iter().map(|h| h.get_access_token())).await;
    for token in tokens {
        let token = token.unwrap();
        assert!(
            token.starts_with("access-") && token != "access-0",
            "{token}"
        );
    }
    let issuer = issuer.lock().unwrap();
    let mut presented = issuer.presented.clone();
    presented.dedup();
    assert_eq!(
        presented.len(),
        issuer.presented.len(),
        "a refresh token was presented twice: {:?}",
        issuer.presented
    );
    assert!(issuer.issued >= 1);
    // The file holds the newest tokens: a third process starts from them.
    let stored = store.record().unwrap().unwrap().credentials.unwrap();
    use oauth2::TokenResponse;
    let stored = stored.token_response.unwrap();
    assert_eq!(
        stored.refresh_token().unwrap().secret(),
        &issuer.current,
        "rotation kept"
    );
}
