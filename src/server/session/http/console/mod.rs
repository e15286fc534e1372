//! `/console`: a page for operators of `serve --http` on the same address: the servers (and a
//! refresh), the tools waiting for review (and approving them), the audit log and the last
//! hour's calls, and a search as a given token sees it. Its HTML, script and style are
//! embedded (`assets/`): no build step, nothing from another origin.
//!
//! Only admins (`access.rs`) get anything but the page shell and its assets. Every answer
//! carries a strict Content-Security-Policy (no inline script, `default-src 'self'`) and
//! refuses to be framed; the script sets upstream text with `textContent` only.

mod access;
mod views;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State as Extract};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http::{HeaderValue, StatusCode, header};
use serde::Deserialize;
use serde_json::{Value, json};

use self::access::{Admins, Refused, Signed};
use crate::server::State;
use crate::server::access::Access;

/// Where the console is served.
pub const PATH: &str = "/console";

const PAGE: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/console.js");
const STYLE: &str = include_str!("assets/console.css");

/// The Content-Security-Policy of every console answer.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// What the console's handlers share.
pub(super) struct Console {
    state: Arc<State>,
    admins: Admins,
    /// Every token's name and what it sees, for "search as"; the unnamed token first.
    tokens: Vec<(String, Access)>,
}

impl Console {
    /// `admins`: (principal name, token) of who may sign in; `others`: the other tokens;
    /// `tokens`: every principal "search as" offers.
    pub(super) fn new<'a>(
        state: Arc<State>,
        admins: impl IntoIterator<Item = (String, &'a str)>,
        others: impl IntoIterator<Item = &'a str>,
        tokens: Vec<(String, Access)>,
    ) -> Arc<Self> {
        Arc::new(Self {
            state,
            admins: Admins::new(admins, others),
            tokens,
        })
    }
}

/// The console's routes, for `serve --http`'s router (outside its bearer-token check: the
/// console checks its own sessions).
pub(super) fn router(console: Arc<Console>) -> Router {
    Router::new()
        .route(PATH, get(page))
        .route(
            "/console/console.js",
            get(|| asset(SCRIPT, "text/javascript")),
        )
        .route("/console/console.css", get(|| asset(STYLE, "text/css")))
        .route("/console/login", post(login))
        .route("/console/logout", post(logout))
        .route("/console/api/session", get(session))
        .route("/console/api/servers", get(servers))
        .route("/console/api/review", get(review))
        .route("/console/api/activity", get(activity))
        .route("/console/api/charts", get(charts))
        .route("/console/api/search", get(search))
        .route("/console/api/approve", post(approve))
        .route("/console/api/refresh", post(refresh))
        .layer(axum::middleware::map_response(secured))
        .with_state(console)
}

/// Adds the headers every console answer carries.
async fn secured(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in [
        ("content-security-policy", CSP),
        ("x-frame-options", "DENY"),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "no-referrer"),
        ("cache-control", "no-store"),
        ("cross-origin-opener-policy", "same-origin"),
        ("cross-origin-resource-policy", "same-origin"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

async fn asset(body: &'static str, kind: &'static str) -> Response {
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}

/// The page: 200 for a signed-in admin, else the same page with the status of the refusal
/// (the page then shows its sign-in form).
async fn page(Extract(console): Extract<Arc<Console>>, request: Request) -> Response {
    let status = match console.admins.check(request.method(), request.headers()) {
        Ok(_) => StatusCode::OK,
        Err(refused) => status_of(refused),
    };
    let html = [(header::CONTENT_TYPE, "text/html; charset=utf-8")];
    (status, html, PAGE).into_response()
}

fn status_of(refused: Refused) -> StatusCode {
    match refused {
        Refused::Unauthenticated => StatusCode::UNAUTHORIZED,
        Refused::NotAdmin | Refused::Forged | Refused::NoToken => StatusCode::FORBIDDEN,
    }
}

fn refusal(refused: Refused) -> Response {
    let body = json!({"error": refused.message(), "refused": format!("{refused:?}")});
    (status_of(refused), json_body(&body)).into_response()
}

fn json_body(value: &Value) -> ([(header::HeaderName, &'static str); 1], String) {
    (
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
}

fn ok(value: Value) -> Response {
    json_body(&value).into_response()
}

/// The signed-in admin of `request`, or why it is refused.
fn signed(console: &Console, request: &Request) -> Result<Signed, Refused> {
    (console.admins).check(request.method(), request.headers())
}

#[derive(Deserialize)]
struct Login {
    token: String,
}

/// Signs in with a token (JSON `{"token": ...}`) from the console page itself: a session
/// cookie for an admin's token, 403 for another token, 401 for none.
async fn login(Extract(console): Extract<Arc<Console>>, request: Request) -> Response {
    if !access::same_origin(request.headers()) {
        return refusal(Refused::Forged);
    }
    let Some(body) = read_json::<Login>(request).await else {
        return (StatusCode::BAD_REQUEST, "send {\"token\": \"...\"}\n").into_response();
    };
    match console.admins.login(&body.token) {
        Ok((signed, cookie)) => {
            tracing::info!(principal = signed.name, "signed in to the console");
            let mut response = ok(json!({"name": signed.name, "csrf": signed.csrf}));
            if let Ok(value) = HeaderValue::from_str(&access::set_cookie(Some(&cookie))) {
                response.headers_mut().insert(header::SET_COOKIE, value);
            }
            response
        }
        Err(refused) => refusal(refused),
    }
}

async fn logout(Extract(console): Extract<Arc<Console>>, request: Request) -> Response {
    if let Err(refused) = signed(&console, &request) {
        return refusal(refused);
    }
    let mut response = ok(json!({"signedOut": true}));
    if let Ok(value) = HeaderValue::from_str(&access::set_cookie(None)) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// Who is signed in, the CSRF token of the session, and the names "search as" offers.
async fn session(Extract(console): Extract<Arc<Console>>, request: Request) -> Response {
    match signed(&console, &request) {
        Ok(signed) => {
            let tokens: Vec<&str> = console.tokens.iter().map(|(n, _)| n.as_str()).collect();
            ok(json!({"name": signed.name, "csrf": signed.csrf, "tokens": tokens}))
        }
        Err(refused) => refusal(refused),
    }
}

async fn servers(Extract(console): Extract<Arc<Console>>, request: Request) -> Response {
    match signed(&console, &request) {
        Ok(_) => ok(views::servers(&console.state)),
        Err(refused) => refusal(refused),
    }
}

async fn review(Extract(console): Extract<Arc<Console>>, request: Request) -> Response {
    match signed(&console, &request) {
        Ok(_) => ok(views::review(&console.state).await),
        Err(refused) => refusal(refused),
    }
}

async fn charts(Extract(console): Extract<Arc<Console>>, request: Request) -> Response {
    match signed(&console, &request) {
        Ok(_) => ok(views::charts(&console.state)),
        Err(refused) => refusal(refused),
    }
}

/// The query string's pairs.
fn query(request: &Request) -> Vec<(String, String)> {
    let query = request.uri().query().unwrap_or_default();
    form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect()
}

fn param(pairs: &[(String, String)], key: &str) -> Option<String> {
    pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
}

async fn activity(Extract(console): Extract<Arc<Console>>, request: Request) -> Response {
    if let Err(refused) = signed(&console, &request) {
        return refusal(refused);
    }
    let pairs = query(&request);
    let filters = views::Filters {
        server: param(&pairs, "server"),
        tool: param(&pairs, "tool"),
        token: param(&pairs, "token"),
        outcome: param(&pairs, "outcome"),
    };
    ok(views::activity(&console.state, &filters))
}

/// `search_tools` as the token named `as` (the signed-in admin's own view by default).
async fn search(Extract(console): Extract<Arc<Console>>, request: Request) -> Response {
    let signed = match signed(&console, &request) {
        Ok(signed) => signed,
        Err(refused) => return refusal(refused),
    };
    let pairs = query(&request);
    let who = param(&pairs, "as").unwrap_or(signed.name);
    let Some((_, access)) = console.tokens.iter().find(|(name, _)| *name == who) else {
        return (
            StatusCode::BAD_REQUEST,
            json_body(&json!({"error": "no such token"})),
        )
            .into_response();
    };
    let query = param(&pairs, "q").unwrap_or_default();
    let limit = param(&pairs, "limit")
        .and_then(|l| l.parse().ok())
        .unwrap_or(8);
    let server = param(&pairs, "server");
    ok(views::search_as(&console.state, access, query, server, limit).await)
}

#[derive(Deserialize)]
struct Approve {
    server: String,
    /// An item as `tools approve` names it (`<server>__<tool>`, `prompt:<server>__<name>`...).
    name: Option<String>,
}

/// Approves one item of a server, or everything of it that waits (`name` absent).
async fn approve(Extract(console): Extract<Arc<Console>>, request: Request) -> Response {
    let signed = match signed(&console, &request) {
        Ok(signed) => signed,
        Err(refused) => return refusal(refused),
    };
    let Some(body) = read_json::<Approve>(request).await else {
        return (
            StatusCode::BAD_REQUEST,
            "send {\"server\": ..., \"name\": ...}\n",
        )
            .into_response();
    };
    match views::approve(&console.state, &body.server, body.name.as_deref()).await {
        Ok(names) => {
            tracing::info!(by = signed.name, "console approval");
            ok(json!({"approved": names}))
        }
        Err(e) => {
            let error = json_body(&json!({"error": e.to_string()}));
            (StatusCode::CONFLICT, error).into_response()
        }
    }
}

#[derive(Deserialize)]
struct Refresh {
    server: String,
}

/// Lists a server's tools again now.
async fn refresh(Extract(console): Extract<Arc<Console>>, request: Request) -> Response {
    if let Err(refused) = signed(&console, &request) {
        return refusal(refused);
    }
    let Some(body) = read_json::<Refresh>(request).await else {
        return (StatusCode::BAD_REQUEST, "send {\"server\": ...}\n").into_response();
    };
    match views::refresh_server(&console.state, &body.server).await {
        Ok(()) => ok(json!({"refreshed": body.server})),
        Err(e) => {
            let error = json_body(&json!({"error": e.to_string()}));
            (StatusCode::CONFLICT, error).into_response()
        }
    }
}

/// The JSON body of a console POST (small: at most 64 KiB).
async fn read_json<T: serde::de::DeserializeOwned>(request: Request) -> Option<T> {
    let body = axum::body::to_bytes(request.into_body(), 64 * 1024)
        .await
        .ok()?;
    serde_json::from_slice(&body).ok()
}
