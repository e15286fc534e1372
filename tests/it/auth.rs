//! Logins to remote servers. Token refresh across processes: four holders of one stored login
//! (as four terminals would be) find the access token expired at the same moment. Refreshes
//! take turns under the credential file's lock, so a rotated refresh token is never spent
//! twice, which an authorization server with reuse detection would punish by revoking the
//! login. Then `meta-server auth` itself against OAuth-protected servers on 127.0.0.1: logins
//! bound to the URL they were made for, hostile endpoints, bogus callbacks, pasting, and the
//! credentials directory's permissions.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use meta_server::auth::{FileStore, client_in};
use meta_server::config::Settings;
use serde_json::json;

use crate::support::{meta_server, write_config};

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
        holders.push(client_in(&server, &url, dir.path()).await.unwrap().unwrap());
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

// ---- Logins through the real binary, against an OAuth-protected MCP server on 127.0.0.1 ----

/// What a [`Provider`] saw.
#[derive(Default)]
struct Seen {
    /// Every `Authorization` header sent to its MCP endpoint.
    authorizations: Vec<String>,
    /// Requests to its registration endpoint.
    registrations: usize,
}

/// An MCP server and its authorization server on one loopback port, as a remote server that
/// needs OAuth looks: 401 with a challenge without its token, discovery, dynamic registration,
/// an authorization endpoint that approves at once, a token endpoint issuing `access-<name>`.
/// `endpoints` replaces endpoints in its metadata (as a hostile server would).
struct Provider {
    port: u16,
    seen: Arc<Mutex<Seen>>,
}

#[derive(Clone)]
struct ProviderState {
    name: String,
    base: String,
    endpoints: serde_json::Map<String, serde_json::Value>,
    seen: Arc<Mutex<Seen>>,
}

impl Provider {
    fn start(name: &str, endpoints: serde_json::Value) -> Self {
        let (tx, rx) = std::sync::mpsc::channel();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let state_seen = seen.clone();
        let name = name.to_owned();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let port = listener.local_addr().unwrap().port();
                let state = ProviderState {
                    name,
                    base: format!("http://127.0.0.1:{port}"),
                    endpoints: endpoints.as_object().cloned().unwrap_or_default(),
                    seen: state_seen,
                };
                let app = axum::Router::new()
                    .route(
                        "/mcp",
                        axum::routing::post(provider_mcp).get(provider_mcp_get),
                    )
                    .route(
                        "/.well-known/oauth-protected-resource",
                        axum::routing::get(provider_resource),
                    )
                    .route(
                        "/.well-known/oauth-protected-resource/mcp",
                        axum::routing::get(provider_resource),
                    )
                    .route(
                        "/.well-known/oauth-authorization-server",
                        axum::routing::get(provider_metadata),
                    )
                    .route("/register", axum::routing::post(provider_register))
                    .route("/authorize", axum::routing::get(provider_authorize))
                    .route("/token", axum::routing::post(provider_token))
                    .with_state(state);
                tx.send(port).unwrap();
                axum::serve(listener, app).await.unwrap();
            });
        });
        Self {
            port: rx.recv().unwrap(),
            seen,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    fn authorizations(&self) -> Vec<String> {
        self.seen.lock().unwrap().authorizations.clone()
    }
}

fn challenge(state: &ProviderState) -> axum::response::Response {
    (
        StatusCode::UNAUTHORIZED,
        [(
            axum::http::header::WWW_AUTHENTICATE,
            format!(
                r#"Bearer resource_metadata="{}/.well-known/oauth-protected-resource""#,
                state.base
            ),
        )],
    )
        .into_response()
}

async fn provider_mcp(
    State(state): State<ProviderState>,
    headers: axum::http::HeaderMap,
    body: String,
) -> axum::response::Response {
    let authorization = headers
        .get(axum::http::header::AUTHORIZATION)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    if let Some(a) = &authorization {
        state.seen.lock().unwrap().authorizations.push(a.clone());
    }
    if authorization.as_deref() != Some(&format!("Bearer access-{}", state.name)) {
        return challenge(&state);
    }
    let request: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    let Some(id) = request.get("id").cloned() else {
        return StatusCode::ACCEPTED.into_response();
    };
    let result = match request["method"].as_str() {
        Some("initialize") => json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": state.name, "version": "1"},
        }),
        Some("tools/list") => json!({"tools": [{
            "name": "whoami",
            "description": format!("Says that this is server {}", state.name),
            "inputSchema": {"type": "object"},
        }]}),
        Some("tools/call") => json!({"content": [{"type": "text", "text": state.name}]}),
        _ => json!({}),
    };
    json_response(
        StatusCode::OK,
        json!({"jsonrpc": "2.0", "id": id, "result": result}),
    )
}

async fn provider_mcp_get() -> StatusCode {
    StatusCode::METHOD_NOT_ALLOWED
}

async fn provider_resource(State(state): State<ProviderState>) -> axum::response::Response {
    json_response(
        StatusCode::OK,
        json!({"resource": format!("{}/mcp", state.base), "authorization_servers": [state.base]}),
    )
}

async fn provider_metadata(State(state): State<ProviderState>) -> axum::response::Response {
    let mut metadata = json!({
        "issuer": state.base,
        "authorization_endpoint": format!("{}/authorize", state.base),
        "token_endpoint": format!("{}/token", state.base),
        "registration_endpoint": format!("{}/register", state.base),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
    });
    for (field, value) in &state.endpoints {
        metadata[field] = value.clone();
    }
    json_response(StatusCode::OK, metadata)
}

async fn provider_register(
    State(state): State<ProviderState>,
    body: String,
) -> axum::response::Response {
    state.seen.lock().unwrap().registrations += 1;
    let mut client: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    client["client_id"] = json!(format!("client-{}", state.name));
    client["token_endpoint_auth_method"] = json!("none");
    json_response(StatusCode::CREATED, client)
}

/// Approves at once: back to the redirect URI with a code and the request's state. With an
/// `error_description` among its endpoints, refuses with that instead.
async fn provider_authorize(
    State(state): State<ProviderState>,
    uri: axum::http::Uri,
) -> axum::response::Response {
    let query: HashMap<String, String> = reqwest::Url::parse(&format!("http://x{uri}"))
        .unwrap()
        .query_pairs()
        .into_owned()
        .collect();
    let mut back = reqwest::Url::parse(&query["redirect_uri"]).unwrap();
    {
        let mut pairs = back.query_pairs_mut();
        match state
            .endpoints
            .get("error_description")
            .and_then(|d| d.as_str())
        {
            Some(description) => pairs
                .append_pair("error", "access_denied")
                .append_pair("error_description", description),
            None => pairs.append_pair("code", "code-1"),
        };
        pairs.append_pair("state", &query["state"]);
    }
    (
        StatusCode::FOUND,
        [(axum::http::header::LOCATION, back.to_string())],
    )
        .into_response()
}

async fn provider_token(State(state): State<ProviderState>) -> axum::response::Response {
    json_response(
        StatusCode::OK,
        json!({
            "access_token": format!("access-{}", state.name),
            "token_type": "bearer",
            "expires_in": 3600,
            "refresh_token": format!("refresh-{}", state.name),
        }),
    )
}

/// One GET over a fresh connection: status, `Location`, body. No redirect is followed.
fn http_get(url: &str) -> (u16, Option<String>, String) {
    let url = reqwest::Url::parse(url).unwrap();
    let mut stream =
        std::net::TcpStream::connect((url.host_str().unwrap(), url.port().unwrap())).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let target = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_owned(),
    };
    write!(
        stream,
        "GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let location = head
        .lines()
        .find_map(|l| {
            l.strip_prefix("location: ")
                .or(l.strip_prefix("Location: "))
        })
        .map(str::to_owned);
    (status, location, body.to_owned())
}

/// A stand-in for the browser that only writes down what it was asked to open.
fn recording_browser(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let log = dir.join("opened.txt");
    let script = dir.join("browser.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\n", log.display()),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    (script, log)
}

/// The browser of the conformance tests: follows the redirects, ending at the callback.
fn following_browser() -> std::path::PathBuf {
    crate::support::repo().join("tests/conformance/browser")
}

/// `meta-server auth ...` on `config`, credentials in `auth`.
fn auth_command(config: &Path, auth: &Path, args: &[&str]) -> Command {
    let mut cmd = meta_server(&[&["--config", config.to_str().unwrap(), "auth"], args].concat());
    cmd.env("META_SERVER_AUTH_DIR", auth)
        .env("META_SERVER_LOG", "warn")
        .stdin(Stdio::null());
    cmd
}

fn remote_config(dir: &Path, url: &str) -> std::path::PathBuf {
    write_config(
        dir,
        json!({"remote": {"type": "http", "url": url}}),
        json!({"catalogDir": "catalogs"}),
    )
}

/// M6: a server whose metadata names a `file:`, `javascript:` or plain-http endpoint gets no
/// login: refused with a clear error before the browser is started or a link printed, and
/// nothing registered with it when the endpoint is the authorization one.
#[test]
fn endpoints_that_are_not_https_are_refused_before_anything_is_opened() {
    for (field, endpoint) in [
        ("authorization_endpoint", "file:///etc/passwd"),
        (
            "authorization_endpoint",
            "javascript:alert(document.cookie)//",
        ),
        ("authorization_endpoint", "http://example.com/authorize"),
        ("token_endpoint", "http://example.com/token"),
        ("registration_endpoint", "file:///tmp/register"),
    ] {
        let provider = Provider::start("hostile", json!({ field: endpoint }));
        for mode in [&[][..], &["--no-browser"][..]] {
            let dir = tempfile::tempdir().unwrap();
            let (browser, opened) = recording_browser(dir.path());
            let config = remote_config(dir.path(), &provider.url());
            let auth = dir.path().join("auth");
            let out = auth_command(
                &config,
                &auth,
                &[&["login", "remote", "--timeout", "5"][..], mode].concat(),
            )
            .env("BROWSER", &browser)
            .output()
            .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{field}={endpoint}: {stderr}");
            assert!(
                !opened.exists(),
                "{field}={endpoint} {mode:?}: the browser was asked to open {:?}",
                std::fs::read_to_string(&opened)
            );
            assert!(
                stderr.contains("refused") && stderr.contains(field),
                "{field}={endpoint}: {stderr}"
            );
            assert!(
                !stderr.contains("Open this URL") && !stderr.contains("Opening the browser"),
                "{stderr}"
            );
            assert!(
                !stderr.contains(endpoint),
                "the endpoint is not printed: {stderr}"
            );
        }
        if field == "authorization_endpoint" {
            assert_eq!(provider.seen.lock().unwrap().registrations, 0);
        }
    }
}

/// L14: an authorization server's `error_description` reaches the terminal with its control
/// characters shown as escapes.
#[test]
fn a_refusal_is_printed_with_its_control_characters_escaped() {
    let provider = Provider::start(
        "a",
        json!({"error_description": "\x1b[31mdenied\x1b[0m \x1b]8;;https://evil.example\x07here\x1b]8;;\x07 \x07 \u{202e}gnp.exe"}),
    );
    let dir = tempfile::tempdir().unwrap();
    let config = remote_config(dir.path(), &provider.url());
    let auth = dir.path().join("auth");
    let out = auth_command(&config, &auth, &["login", "remote", "--timeout", "30"])
        .env("BROWSER", following_browser())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("access_denied") && stderr.contains("\\x1b[31mdenied"),
        "{stderr}"
    );
    let raw: Vec<char> = stderr
        .chars()
        .filter(|&c| (c.is_control() && c != '\n') || c == '\u{202e}')
        .collect();
    assert!(raw.is_empty(), "raw controls reached the terminal: {raw:?}");
}

/// Lines of a child's stderr, as they come.
fn stderr_lines(child: &mut Child) -> std::sync::mpsc::Receiver<String> {
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// Reads `lines` until one satisfies `want`; all read so far on failure.
fn read_until(
    lines: &std::sync::mpsc::Receiver<String>,
    want: impl Fn(&str) -> bool,
) -> Result<String, String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = String::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match lines.recv_timeout(left) {
            Ok(line) if want(&line) => return Ok(line),
            Ok(line) => {
                seen.push_str(&line);
                seen.push('\n');
            }
            Err(_) => break,
        }
    }
    Err(seen)
}

fn wait_with_timeout(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    None
}

/// L15: any local process can reach the callback listener. A request without the login's
/// `state` gets an error page and the login goes on; the real redirect then ends it.
#[test]
fn a_bogus_callback_does_not_end_a_pending_login() {
    let provider = Provider::start("a", json!({}));
    let dir = tempfile::tempdir().unwrap();
    let (browser, opened) = recording_browser(dir.path());
    let config = remote_config(dir.path(), &provider.url());
    let auth = dir.path().join("auth");
    let mut child = auth_command(&config, &auth, &["login", "remote", "--timeout", "60"])
        .env("BROWSER", &browser)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = stderr_lines(&mut child);
    let deadline = Instant::now() + Duration::from_secs(60);
    let authorize = loop {
        if let Ok(text) = std::fs::read_to_string(&opened)
            && text.ends_with('\n')
        {
            break text.trim().to_owned();
        }
        assert!(Instant::now() < deadline, "the browser was never started");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(authorize.starts_with(&format!("http://127.0.0.1:{}/authorize?", provider.port)));
    let query: HashMap<String, String> = reqwest::Url::parse(&authorize)
        .unwrap()
        .query_pairs()
        .into_owned()
        .collect();
    let callback = &query["redirect_uri"];
    for bogus in [
        "code=forged&state=guessed",
        "code=forged",
        "error=access_denied&error_description=%1b%5b31mgone",
    ] {
        let (status, _, page) = http_get(&format!("{callback}?{bogus}"));
        assert_eq!(status, 400, "{bogus}: {page}");
        assert!(!page.contains("Logged in"), "{page}");
        assert!(
            child.try_wait().unwrap().is_none(),
            "{bogus} ended the login"
        );
    }
    // The user approves: the authorization server sends the browser back with the state.
    let (status, location, _) = http_get(&authorize);
    assert_eq!(status, 302);
    let (status, _, page) = http_get(&location.unwrap());
    assert_eq!(status, 200);
    assert!(page.contains("Logged in"), "{page}");
    let status = wait_with_timeout(&mut child, Duration::from_secs(60)).expect("login ended");
    let said: Vec<String> = lines.try_iter().collect();
    assert!(status.success(), "{said:?}");
    assert!(
        said.iter().any(|l| l.contains("logged in to remote")),
        "{said:?}"
    );
}

/// L15: pasting (SSH sessions). A line that is not UTF-8 is said to be not understood, and the
/// redirect URL pasted after it completes the login.
#[test]
fn a_pasted_line_that_is_not_utf8_is_reported_and_pasting_goes_on() {
    let provider = Provider::start("a", json!({}));
    let dir = tempfile::tempdir().unwrap();
    let config = remote_config(dir.path(), &provider.url());
    let auth = dir.path().join("auth");
    let mut child = auth_command(
        &config,
        &auth,
        &["login", "remote", "--no-browser", "--timeout", "30"],
    )
    .env("BROWSER", "/bin/false")
    .stdin(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let lines = stderr_lines(&mut child);
    let authorize = read_until(&lines, |l| l.trim().starts_with("http://127.0.0.1"))
        .expect("the URL is printed")
        .trim()
        .to_owned();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"\xff\xfe\x1b[2J not text\n").unwrap();
    stdin.flush().unwrap();
    let said = read_until(&lines, |l| l.contains("not understood"));
    assert!(said.is_ok(), "no word about the line: {said:?}");
    let (status, location, _) = http_get(&authorize);
    assert_eq!(status, 302);
    // Not followed: the redirect URL is what the user pastes.
    writeln!(stdin, "{}", location.unwrap()).unwrap();
    stdin.flush().unwrap();
    let status = wait_with_timeout(&mut child, Duration::from_secs(60)).expect("login ended");
    let rest: Vec<String> = lines.try_iter().collect();
    assert!(status.success(), "{rest:?}");
}

/// M5: a URL with `${VAR}`. A login made while the variable named server A is bound to A: with
/// the variable naming server B, B never receives A's token, `auth status` says the login is
/// for another URL, and the expanded URL (which may hold a key) is not in the credential file.
#[test]
fn a_login_is_bound_to_the_url_it_was_made_for_not_to_its_variables() {
    let a = Provider::start("a", json!({}));
    let b = Provider::start("b", json!({}));
    let dir = tempfile::tempdir().unwrap();
    let config = remote_config(
        dir.path(),
        "http://127.0.0.1:${MCP_PORT}/mcp?key=${MCP_KEY}",
    );
    let auth = dir.path().join("auth");
    let at = |provider: &Provider, args: &[&str]| {
        let mut cmd = auth_command(&config, &auth, &[]);
        cmd.args(args)
            .env("MCP_PORT", provider.port.to_string())
            .env("MCP_KEY", "key-sekrit-1234")
            .env("BROWSER", following_browser());
        cmd
    };
    let out = at(&a, &["login", "remote"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = std::fs::read_to_string(auth.join("remote.json")).unwrap();
    assert!(file.contains("access-a"));
    assert!(!file.contains("key-sekrit-1234"), "{file}");
    assert!(
        file.contains("${MCP_PORT}") && file.contains("urlSha256"),
        "{file}"
    );

    let status = |provider: &Provider| -> serde_json::Value {
        let out = at(provider, &["status", "--json"]).output().unwrap();
        assert!(out.status.success());
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()[0].clone()
    };
    assert_eq!(status(&a)["state"], "logged-in");
    let at_b = status(&b);
    assert_eq!(at_b["state"], "needs-login", "{at_b}");
    let detail = at_b["detail"].as_str().unwrap();
    assert!(
        detail.contains("another URL") && detail.contains("meta-server auth login remote"),
        "{detail}"
    );

    // Connecting: B is asked without A's token; A gets it.
    let index = |provider: &Provider| {
        let mut cmd = meta_server(&["--config", config.to_str().unwrap(), "index", "--json"]);
        cmd.env("META_SERVER_AUTH_DIR", &auth)
            .env("MCP_PORT", provider.port.to_string())
            .env("MCP_KEY", "key-sekrit-1234")
            .output()
            .unwrap()
    };
    let out = index(&b);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("meta-server auth login remote"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        !b.authorizations().iter().any(|h| h.contains("access-a")),
        "B received A's token: {:?}",
        b.authorizations()
    );
    let out = index(&a);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(a.authorizations().iter().any(|h| h == "Bearer access-a"));

    // After a login at B, each server sees only its own token.
    let out = at(&b, &["login", "remote"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(index(&b).status.success());
    assert_eq!(status(&a)["state"], "needs-login");
    assert!(b.authorizations().iter().all(|h| h != "Bearer access-a"));
    assert!(a.authorizations().iter().all(|h| h != "Bearer access-b"));
}

/// L17: a credentials directory others can write to is named on stderr, once per process.
#[test]
fn a_credentials_directory_others_can_write_to_is_warned_about_once() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    // Two remote servers: the directory is used twice in one run.
    let config = write_config(
        dir.path(),
        json!({
            "one": {"type": "http", "url": "http://127.0.0.1:9/mcp"},
            "two": {"type": "http", "url": "http://127.0.0.1:9/other"},
        }),
        json!({"catalogDir": "catalogs"}),
    );
    let auth = dir.path().join("auth");
    std::fs::create_dir(&auth).unwrap();
    for (mode, warned) in [(0o777, true), (0o775, true), (0o700, false)] {
        std::fs::set_permissions(&auth, std::fs::Permissions::from_mode(mode)).unwrap();
        let out = auth_command(&config, &auth, &["status", "--json"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let warnings = stderr.matches("credentials directory").count();
        assert_eq!(warnings, usize::from(warned), "{mode:o}: {stderr}");
        if warned {
            assert!(
                stderr.contains(&auth.display().to_string()) && stderr.contains("chmod 700"),
                "{stderr}"
            );
        }
    }
}
