//! What went wrong talking to an upstream, in messages that say what the model or user can do
//! and stay small whatever the server sent.

use std::time::Duration;

use super::wire;
use crate::config::ConfigError;
use crate::redact::Redactor;

/// Characters an error keeps of each text that came from a server (a message, its stderr):
/// whatever a server sends, its errors stay small.
const DETAIL_CHARS: usize = 1_000;

/// What went wrong talking to an upstream; messages say what the model or user can do.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("server \"{0}\" is not configured")]
    Unknown(String),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot start server \"{server}\": {message}")]
    Spawn { server: String, message: String },
    #[error("server \"{server}\" did not finish connecting within {}s{}; check that it starts and answers MCP, or raise timeoutSecs if it is just slow", after.as_secs(), stderr_note(stderr))]
    ConnectTimeout {
        server: String,
        after: Duration,
        stderr: String,
    },
    #[error(
        "server \"{server}\" failed to initialize: {message}{}",
        stderr_note(stderr)
    )]
    Initialize {
        server: String,
        message: String,
        stderr: String,
    },
    #[error("server \"{server}\" did not answer {what} within {}s; the call was cancelled (raise timeoutSecs for this server if it is just slow)", after.as_secs())]
    Timeout {
        server: String,
        what: String,
        after: Duration,
    },
    #[error(
        "server \"{server}\" closed the connection during {what} (it may have crashed){}; the next call starts it again",
        stderr_note(stderr)
    )]
    Closed {
        server: String,
        what: String,
        stderr: String,
    },
    #[error("server \"{server}\" returned an error for {what}: {message}")]
    Protocol {
        server: String,
        what: String,
        message: String,
    },
    /// The server answered 401, or 403 `insufficient_scope`: a login is needed.
    #[error("{}", login_message(server, scope.as_deref(), *step_up))]
    NeedsLogin {
        server: String,
        /// The server's `WWW-Authenticate` challenge, to seed the login.
        challenge: String,
        /// The scope the challenge names, if any.
        scope: Option<String>,
        /// A 403: logged in, but without the scope this needs.
        step_up: bool,
    },
    #[error("server \"{server}\": stored login unusable: {message}")]
    Auth { server: String, message: String },
    /// A listing went past the server's bounds (see `listing.rs`).
    #[error("server \"{server}\": {what} {overrun}")]
    Overrun {
        server: String,
        what: String,
        overrun: super::listing::Overrun,
    },
    /// The transport refused what the server sent or asked for (a message over the size
    /// limit, a redirect to another origin); `message` says what and what to do.
    #[error("server \"{server}\" {message}")]
    Refused { server: String, message: String },
}

impl UpstreamError {
    /// The error with every text that could carry a secret (an expanded URL, a command line,
    /// an upstream's stderr) passed through `redactor`; each message is cut to
    /// [`DETAIL_CHARS`] (the stderr tail is bounded where it is kept).
    pub fn redacted(self, redactor: &Redactor) -> Self {
        let r = |text: String| wire::shorten(&redactor.apply(&text), DETAIL_CHARS);
        let tail = |text: String| redactor.apply(&text);
        match self {
            Self::Spawn { server, message } => Self::Spawn {
                server,
                message: r(message),
            },
            Self::ConnectTimeout {
                server,
                after,
                stderr,
            } => Self::ConnectTimeout {
                server,
                after,
                stderr: tail(stderr),
            },
            Self::Initialize {
                server,
                message,
                stderr,
            } => Self::Initialize {
                server,
                message: r(message),
                stderr: tail(stderr),
            },
            Self::Closed {
                server,
                what,
                stderr,
            } => Self::Closed {
                server,
                what,
                stderr: tail(stderr),
            },
            Self::Protocol {
                server,
                what,
                message,
            } => Self::Protocol {
                server,
                what,
                message: r(message),
            },
            Self::Auth { server, message } => Self::Auth {
                server,
                message: r(message),
            },
            Self::Refused { server, message } => Self::Refused {
                server,
                message: r(message),
            },
            Self::Unknown(server) => Self::Unknown(wire::shorten(&server, DETAIL_CHARS)),
            other => other,
        }
    }

    /// A login error from a 401/403 `WWW-Authenticate` challenge.
    pub fn needs_login(server: &str, challenge: &str) -> Self {
        let base = reqwest::Url::parse("http://localhost/").expect("static URL");
        let params = rmcp::transport::WWWAuthenticateParams::parse(challenge, &base);
        Self::NeedsLogin {
            server: server.to_owned(),
            challenge: challenge.to_owned(),
            step_up: params.is_insufficient_scope(),
            scope: params.scope,
        }
    }
}

/// Characters of an upstream error's `data`, as JSON, that are passed on with it.
const DATA_CHARS: usize = 4_000;

/// A server's own JSON-RPC error, as it may be passed on: code kept; message redacted and
/// capped as every error text is; `data` redacted, and left out past [`DATA_CHARS`] (the
/// message says so).
pub(super) fn rejection(mut error: rmcp::ErrorData, redactor: &Redactor) -> rmcp::ErrorData {
    let mut message = wire::shorten(&redactor.apply(&error.message), DETAIL_CHARS);
    if let Some(data) = error.data.take() {
        let text = redactor.apply(&data.to_string());
        match serde_json::from_str(&text) {
            Ok(data) if text.chars().count() <= DATA_CHARS => error.data = Some(data),
            _ => message.push_str(&format!(
                " (its error data, {} characters, was left out)",
                text.chars().count()
            )),
        }
    }
    error.message = message.into();
    error
}

fn login_message(server: &str, scope: Option<&str>, step_up: bool) -> String {
    match (step_up, scope) {
        (true, Some(scope)) => format!(
            "server \"{server}\" needs more permission (scope \"{scope}\") than the login gave; run `meta-server auth login {server}` to grant it, then call again"
        ),
        _ => format!(
            "server \"{server}\" needs a login: run `meta-server auth login {server}` in a terminal, then call again"
        ),
    }
}

fn stderr_note(stderr: &str) -> String {
    if stderr.is_empty() {
        String::new()
    } else {
        format!("; its last stderr lines: {stderr}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_servers_error_keeps_its_code_and_data_without_secrets_or_bulk() {
        let redactor = Redactor::new(["s3cr3t-token-value".to_owned()]);
        let error = rmcp::ErrorData::new(
            rmcp::model::ErrorCode(-32000),
            "quota exceeded for s3cr3t-token-value",
            Some(json!({"retryAfterSeconds": 30, "key": "s3cr3t-token-value"})),
        );
        let passed = rejection(error, &redactor);
        assert_eq!(passed.code.0, -32000);
        assert!(!passed.message.contains("s3cr3t"), "{}", passed.message);
        let data = passed.data.expect("data kept");
        assert_eq!(data["retryAfterSeconds"], 30);
        assert!(!data.to_string().contains("s3cr3t"), "{data}");

        let bulky = rmcp::ErrorData::new(
            rmcp::model::ErrorCode(-32603),
            "failed",
            Some(json!({"dump": "x".repeat(100_000)})),
        );
        let passed = rejection(bulky, &redactor);
        assert_eq!(passed.data, None);
        assert!(
            passed
                .message
                .starts_with("failed (its error data, 100011 characters, was left out)"),
            "{}",
            passed.message
        );
    }
}
