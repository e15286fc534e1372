//! Getting the authorization code back: a one-shot HTTP listener on 127.0.0.1 that the
//! browser is redirected to, the system browser (or `$BROWSER`) to open the authorization URL,
//! and, for SSH sessions, the redirect URL pasted on stdin. Only a redirect that carries this
//! login's `state` ends it: any local process can reach the listener.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Html;
use rmcp::transport::auth::AuthorizationCallback;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use super::AuthError;

/// Path of the redirect URI on the loopback listener.
pub const PATH: &str = "/callback";

/// What the browser brought back to the listener.
type Redirect = Result<AuthorizationCallback, AuthError>;

/// How the user is shown the authorization URL.
pub enum Show {
    /// Open the system browser (or `$BROWSER`); the URL is printed too.
    Browser,
    /// Print the URL and accept the redirect URL pasted on stdin (SSH sessions).
    Print,
    /// Hand the URL over, e.g. to an MCP client through URL-mode elicitation.
    Offer(Box<dyn FnOnce(String) + Send>),
}

/// How the user completes the authorization, and how long they have.
pub struct Prompt {
    pub show: Show,
    pub timeout: Duration,
}

/// Binds the loopback listener: on `port`, or any free port.
pub async fn bind(port: Option<u16>) -> Result<TcpListener, AuthError> {
    let port = port.unwrap_or(0);
    TcpListener::bind(("127.0.0.1", port))
        .await
        .map_err(|e| AuthError::Callback(format!("cannot listen on 127.0.0.1:{port}: {e}")))
}

/// The redirect URI that `listener` answers.
pub fn redirect_uri(listener: &TcpListener) -> Result<String, AuthError> {
    let port = listener
        .local_addr()
        .map_err(|e| AuthError::Callback(e.to_string()))?
        .port();
    Ok(format!("http://127.0.0.1:{port}{PATH}"))
}

/// Shows `url` to the user and waits for the authorization server's redirect: on the
/// listener, or pasted on stdin with `no_browser`. `url` must be https (or http on loopback)
/// and carry a `state`; redirects without that `state` are answered with an error page and
/// the wait goes on.
pub async fn wait(
    server: &str,
    listener: TcpListener,
    url: &str,
    prompt: Prompt,
) -> Result<AuthorizationCallback, AuthError> {
    super::check_endpoint(server, "authorization URL", url)?;
    let state = state_of(url).ok_or_else(|| {
        AuthError::Callback("the authorization URL carries no state; not opened".into())
    })?;
    let (tx, mut rx) = mpsc::channel::<Redirect>(1);
    let app = axum::Router::new()
        .route(PATH, axum::routing::get(receive))
        .with_state(Arc::new(Pending {
            tx: tx.clone(),
            state: state.clone(),
        }));
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let _stop = AbortOnDrop(server);
    match prompt.show {
        Show::Print => {
            eprintln!(
                "Open this URL in a browser to log in:\n\n  {url}\n\nThen wait here, or paste the URL the browser was sent to (it starts with http://127.0.0.1) and press Enter:"
            );
            let stdin = tokio::io::BufReader::new(tokio::io::stdin());
            tokio::spawn(read_pasted(stdin, tx, state, |notice| {
                eprintln!("{notice}")
            }));
        }
        Show::Browser => {
            eprintln!("Opening the browser to log in. If it does not open, visit:\n\n  {url}\n");
            if let Err(e) = open_browser(url) {
                eprintln!("(could not open a browser: {e}; open the URL above yourself)");
            }
        }
        Show::Offer(offer) => offer(url.to_owned()),
    }
    match tokio::time::timeout(prompt.timeout, rx.recv()).await {
        Ok(Some(redirect)) => redirect,
        Ok(None) => Err(AuthError::Callback("the callback listener stopped".into())),
        Err(_) => Err(AuthError::Callback(format!(
            "no authorization arrived within {}s; run the login again (with --no-browser to paste the redirect URL)",
            prompt.timeout.as_secs()
        ))),
    }
}

/// The login the listener waits for.
struct Pending {
    tx: mpsc::Sender<Redirect>,
    /// The `state` of the authorization URL: a redirect without it is not this login's.
    state: String,
}

const LOGGED_IN: &str =
    "<h1>Logged in</h1><p>meta-server has the authorization. You can close this window.</p>";
const FAILED: &str = "<h1>Login failed</h1><p>See the terminal for why.</p>";
const NOT_THIS_LOGIN: &str = "<h1>Not this login</h1><p>This page does not carry the authorization meta-server is waiting for (its state differs), so it was ignored. The login is still waiting: finish it in the window meta-server opened.</p>";

async fn receive(
    State(pending): State<Arc<Pending>>,
    uri: axum::http::Uri,
) -> (StatusCode, Html<&'static str>) {
    let url = format!("http://127.0.0.1{uri}");
    if !carries_state(&url, &pending.state) {
        tracing::warn!("a request to the login callback without this login's state was ignored");
        return (StatusCode::BAD_REQUEST, Html(NOT_THIS_LOGIN));
    }
    let redirect = parse(&url);
    let page = if redirect.is_ok() { LOGGED_IN } else { FAILED };
    let _ = pending.tx.try_send(redirect);
    (StatusCode::OK, Html(page))
}

/// The `state` query parameter of `url`.
fn state_of(url: &str) -> Option<String> {
    let parsed = reqwest::Url::parse(url).ok()?;
    parsed
        .query_pairs()
        .find(|(k, _)| k == "state")
        .map(|(_, v)| v.into_owned())
        .filter(|s| !s.is_empty())
}

/// Whether `url` carries `state`, compared in constant time.
fn carries_state(url: &str, state: &str) -> bool {
    state_of(url).is_some_and(|got| {
        got.len() == state.len()
            && got
                .bytes()
                .zip(state.bytes())
                .fold(0u8, |diff, (a, b)| diff | (a ^ b))
                == 0
    })
}

/// Most of an authorization server's `error_description` that is shown.
const MAX_DESCRIPTION: usize = 300;

/// The code and state of a redirect URL, or the authorization server's `error`.
fn parse(url: &str) -> Redirect {
    if let Ok(parsed) = reqwest::Url::parse(url) {
        let param = |name: &str| {
            parsed
                .query_pairs()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.into_owned())
        };
        if let Some(error) = param("error") {
            let shorten = |mut s: String| {
                if s.len() > MAX_DESCRIPTION {
                    let mut end = MAX_DESCRIPTION;
                    while !s.is_char_boundary(end) {
                        end -= 1;
                    }
                    s.truncate(end);
                    s.push_str("...");
                }
                s
            };
            return Err(AuthError::Denied(match param("error_description") {
                Some(d) => format!("{}: {}", shorten(error), shorten(d)),
                None => shorten(error),
            }));
        }
    }
    AuthorizationCallback::from_redirect_url(url)
        .map_err(|e| AuthError::Callback(format!("the redirect is not an authorization: {e}")))
}

/// Reads pasted lines until one is this login's redirect URL (a code, or the server's error,
/// with `state`). Lines that are not (not UTF-8, not a redirect, another login's) are said so
/// through `notice`, and reading goes on.
async fn read_pasted(
    mut input: impl AsyncBufRead + Unpin,
    tx: mpsc::Sender<Redirect>,
    state: String,
    notice: impl Fn(&str),
) {
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match input.read_until(b'\n', &mut buf).await {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) => {
                notice(&format!(
                    "cannot read what is pasted ({e}); the browser's redirect still works"
                ));
                return;
            }
        }
        let Ok(line) = std::str::from_utf8(&buf) else {
            notice(
                "that line was not understood (it is not UTF-8 text); paste the whole URL the browser was sent to:",
            );
            continue;
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if !carries_state(line, &state) {
            notice(
                "that is not the redirect of this login (its state differs or is missing); paste the whole URL the browser was sent to:",
            );
            continue;
        }
        match parse(line) {
            Err(AuthError::Callback(e)) => notice(&format!("{e}; paste the whole URL:")),
            redirect => {
                let _ = tx.send(redirect).await;
                return;
            }
        }
    }
}

/// Opens `url` with `$BROWSER` (the first of a `:`-separated list, `%s` replaced by the URL),
/// else the platform's opener. The browser is not waited for.
fn open_browser(url: &str) -> std::io::Result<()> {
    let browser = std::env::var("BROWSER")
        .ok()
        .and_then(|b| b.split(':').next().map(str::to_owned))
        .filter(|b| !b.trim().is_empty());
    let mut command = match browser {
        Some(browser) => {
            let mut words = browser.split_whitespace().map(|w| w.replace("%s", url));
            let program = words.next().unwrap_or_default();
            let mut args: Vec<String> = words.collect();
            if !browser.contains("%s") {
                args.push(url.to_owned());
            }
            let mut command = std::process::Command::new(program);
            command.args(args);
            command
        }
        None if cfg!(target_os = "macos") => {
            let mut command = std::process::Command::new("open");
            command.arg(url);
            command
        }
        None => {
            let mut command = std::process::Command::new("xdg-open");
            command.arg(url);
            command
        }
    };
    let mut child = command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    // Reaped in the background: the opener may outlive the login by a little.
    std::thread::spawn(move || child.wait());
    Ok(())
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_give_a_code_or_the_servers_refusal() {
        let ok =
            parse("http://127.0.0.1:9/callback?code=c1&state=s1&iss=https%3A%2F%2Fas").unwrap();
        assert_eq!((ok.code.as_str(), ok.csrf_token.as_str()), ("c1", "s1"));
        assert_eq!(ok.issuer.as_deref(), Some("https://as"));
        let denied = parse("http://127.0.0.1:9/callback?error=access_denied&error_description=no")
            .unwrap_err()
            .to_string();
        assert!(denied.contains("access_denied: no"), "{denied}");
        assert!(matches!(
            parse("http://127.0.0.1:9/callback?state=s1"),
            Err(AuthError::Callback(_))
        ));
        assert!(matches!(parse("not a url"), Err(AuthError::Callback(_))));
        let long = parse(&format!(
            "http://127.0.0.1:9/callback?error=x&error_description={}",
            "d".repeat(10_000)
        ))
        .unwrap_err()
        .to_string();
        assert!(long.len() < 400, "{}", long.len());
    }

    const AUTHORIZE: &str = "http://127.0.0.1:1/authorize?client_id=c&state=s-right";

    fn offered() -> Prompt {
        Prompt {
            show: Show::Offer(Box::new(|_| {})),
            timeout: Duration::from_secs(30),
        }
    }

    /// A bogus callback from any local process (wrong state, none, an error without state)
    /// gets an error page and the login goes on; the right one ends it.
    #[tokio::test]
    async fn only_the_logins_state_ends_it_at_the_listener() {
        crate::auth::ensure_tls();
        let listener = bind(None).await.unwrap();
        let callback = redirect_uri(&listener).unwrap();
        let login = tokio::spawn(async move { wait("s", listener, AUTHORIZE, offered()).await });
        let http = reqwest::Client::new();
        for query in [
            "code=stolen&state=s-wrong",
            "code=stolen",
            "code=stolen&state=",
            "error=access_denied&error_description=bogus",
            "error=access_denied&state=s-wrong",
            "code=stolen&state=s-right-and-more",
        ] {
            let response = http
                .get(format!("{callback}?{query}"))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 400, "{query}");
            let page = response.text().await.unwrap();
            assert!(
                page.contains("Not this login") && !page.contains("Logged in"),
                "{page}"
            );
            assert!(!login.is_finished(), "{query} ended the login");
        }
        let response = http
            .get(format!("{callback}?code=c1&state=s-right"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert!(response.text().await.unwrap().contains("Logged in"));
        let redirect = login.await.unwrap().unwrap();
        assert_eq!(
            (redirect.code.as_str(), redirect.csrf_token.as_str()),
            ("c1", "s-right")
        );
    }

    /// The server's refusal, with this login's state, ends the login with its reason.
    #[tokio::test]
    async fn a_refusal_with_the_state_ends_the_login() {
        crate::auth::ensure_tls();
        let listener = bind(None).await.unwrap();
        let callback = redirect_uri(&listener).unwrap();
        let login = tokio::spawn(async move { wait("s", listener, AUTHORIZE, offered()).await });
        let page = reqwest::get(format!(
            "{callback}?error=access_denied&error_description=no&state=s-right"
        ))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
        assert!(page.contains("Login failed"), "{page}");
        let err = login.await.unwrap().unwrap_err().to_string();
        assert!(err.contains("access_denied: no"), "{err}");
    }

    #[tokio::test]
    async fn an_authorization_url_that_is_not_http_is_never_shown() {
        for url in [
            "file:///etc/passwd?state=s",
            "javascript:alert(1)//?state=s",
            "http://example.com/authorize?state=s",
            "ms-settings:display?state=s",
        ] {
            let shown = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let flag = shown.clone();
            let prompt = Prompt {
                show: Show::Offer(Box::new(move |_| {
                    flag.store(true, std::sync::atomic::Ordering::SeqCst)
                })),
                timeout: Duration::from_secs(1),
            };
            let listener = bind(None).await.unwrap();
            let err = wait("s", listener, url, prompt).await.unwrap_err();
            assert!(
                matches!(err, AuthError::UnsafeEndpoint { .. }),
                "{url}: {err}"
            );
            assert!(
                !shown.load(std::sync::atomic::Ordering::SeqCst),
                "{url} was offered"
            );
        }
        let listener = bind(None).await.unwrap();
        let err = wait("s", listener, "https://as.example/authorize", offered())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("no state"), "{err}");
    }

    /// Pasting: a line that is not UTF-8, not a URL, or another login's is said so, and
    /// reading goes on to the right one.
    #[tokio::test]
    async fn pasted_lines_that_are_not_understood_are_said_so_and_reading_goes_on() {
        let input: &[u8] = b"\xff\xfe garbage\n\nnot a url\nhttp://127.0.0.1:9/callback?code=x&state=other\n\xc3\n  http://127.0.0.1:9/callback?code=c2&state=s-right  \n";
        let (tx, mut rx) = mpsc::channel(1);
        let notices = parking_lot::Mutex::new(Vec::<String>::new());
        read_pasted(input, tx, "s-right".into(), |n| {
            notices.lock().push(n.to_owned())
        })
        .await;
        let redirect = rx.recv().await.unwrap().unwrap();
        assert_eq!(redirect.code, "c2");
        let notices = notices.into_inner();
        assert_eq!(notices.len(), 4, "{notices:?}");
        assert!(notices[0].contains("not understood") && notices[0].contains("UTF-8"));
        assert!(notices[1].contains("state"));
        assert!(notices[2].contains("state"));
        assert!(notices[3].contains("not understood"));
    }
}
