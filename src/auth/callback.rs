//! Getting the authorization code back: a one-shot HTTP listener on 127.0.0.1 that the
//! browser is redirected to, the system browser (or `$BROWSER`) to open the authorization URL,
//! and, for SSH sessions, the redirect URL pasted on stdin.

use std::time::Duration;

use axum::extract::State;
use axum::response::Html;
use rmcp::transport::auth::AuthorizationCallback;
use tokio::io::AsyncBufReadExt;
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
/// listener, or pasted on stdin with `no_browser`.
pub async fn wait(
    listener: TcpListener,
    url: &str,
    prompt: Prompt,
) -> Result<AuthorizationCallback, AuthError> {
    let (tx, mut rx) = mpsc::channel::<Redirect>(1);
    let app = axum::Router::new()
        .route(PATH, axum::routing::get(receive))
        .with_state(tx.clone());
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let _stop = AbortOnDrop(server);
    match prompt.show {
        Show::Print => {
            eprintln!(
                "Open this URL in a browser to log in:\n\n  {url}\n\nThen wait here, or paste the URL the browser was sent to (it starts with http://127.0.0.1) and press Enter:"
            );
            tokio::spawn(read_pasted(tx));
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

async fn receive(
    State(tx): State<mpsc::Sender<Redirect>>,
    uri: axum::http::Uri,
) -> Html<&'static str> {
    let redirect = parse(&format!("http://127.0.0.1{uri}"));
    let page = match &redirect {
        Ok(_) => {
            "<h1>Logged in</h1><p>meta-server has the authorization. You can close this window.</p>"
        }
        Err(_) => "<h1>Login failed</h1><p>See the terminal for why.</p>",
    };
    let _ = tx.try_send(redirect);
    Html(page)
}

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
            return Err(AuthError::Denied(match param("error_description") {
                Some(d) => format!("{error}: {d}"),
                None => error,
            }));
        }
    }
    AuthorizationCallback::from_redirect_url(url)
        .map_err(|e| AuthError::Callback(format!("the redirect is not an authorization: {e}")))
}

/// Reads lines from stdin until one is a redirect URL with a code.
async fn read_pasted(tx: mpsc::Sender<Redirect>) {
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        match parse(line) {
            Err(AuthError::Callback(e)) => eprintln!("{e}; paste the whole URL:"),
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
    }
}
