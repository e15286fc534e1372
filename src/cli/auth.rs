//! `meta-server auth`: log in to remote servers that need OAuth, see the logins, log out.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Subcommand;
use serde::Serialize;

use super::call::scopes_text;
use super::terminal::{escape_json, escape_line};
use crate::auth::{Prompt, Show, Stored};
use crate::config::{ServerConfig, Settings};
use crate::upstream::Manager;

/// Log in to remote servers that need OAuth (Notion, Linear, Sentry, ...), see the state of
/// every login, or log out.
///
/// Credentials are kept per server in an owner-only file under ~/.local/share/meta-server/auth
/// (META_SERVER_AUTH_DIR to change it), never in the config, catalogs or logs. Tokens are
/// refreshed when due, one process at a time; a login takes effect in running servers at
/// their next call.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: AuthCommand,
}

#[derive(Subcommand, Debug)]
enum AuthCommand {
    Login(LoginArgs),
    Status(StatusArgs),
    Logout(LogoutArgs),
}

/// Log in to a server: its authorization page opens in the browser, and the browser is sent
/// back to meta-server on 127.0.0.1.
///
/// meta-server finds the server's authorization server, registers itself (the "oauth" block's
/// clientId if configured, else a client metadata document, else dynamic registration) and
/// asks for the scopes the server names (or "oauth.scopes"). After a server asked for more
/// scope, the login asks for that too.
#[derive(clap::Args, Debug)]
struct LoginArgs {
    /// The server's name in the config.
    server: String,

    /// Do not open a browser: print the URL, and accept the URL the browser ends up on pasted
    /// here (for SSH sessions). The loopback callback works too when reachable.
    #[arg(long)]
    no_browser: bool,

    /// How long to wait for the browser, in seconds.
    #[arg(long, default_value_t = 300, value_name = "SECS")]
    timeout: u64,
}

/// Show, per remote server: no login needed, needs login, or logged in (until when, scopes).
/// Servers without a stored login are asked (a connection without credentials).
#[derive(clap::Args, Debug)]
struct StatusArgs {
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Forget a server's stored credentials.
#[derive(clap::Args, Debug)]
struct LogoutArgs {
    /// The server's name in the config.
    server: String,
}

pub async fn run(settings: Settings, args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        AuthCommand::Login(args) => login(&settings, args).await,
        AuthCommand::Status(args) => status(&settings, args).await,
        AuthCommand::Logout(args) => {
            let server = remote(&settings, &args.server)?;
            if crate::auth::logout(server)? {
                eprintln!("logged out of {}", server.name);
            } else {
                eprintln!("{} had no stored login", server.name);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn login(settings: &Settings, args: LoginArgs) -> anyhow::Result<ExitCode> {
    let server = remote(settings, &args.server)?;
    let manager = Manager::new(std::slice::from_ref(server));
    let challenge = manager
        .probe_login(&server.name)
        .await
        .with_context(|| format!("cannot reach {}", server.name))?;
    let stored = crate::auth::stored(server)?;
    if challenge.is_none() && server.oauth.is_none() && stored == Stored::None {
        eprintln!(
            "{} answers without a login; nothing to do (add an \"oauth\" block to the server to log in anyway)",
            server.name
        );
        return Ok(ExitCode::SUCCESS);
    }
    let prompt = Prompt {
        show: if args.no_browser {
            Show::Print
        } else {
            Show::Browser
        },
        timeout: Duration::from_secs(args.timeout),
    };
    let login = crate::auth::login(server, challenge.as_deref(), prompt).await?;
    let expiry = match login.expires_in {
        Some(secs) => format!(
            ", token valid for {}{}",
            humantime::format_duration(Duration::from_secs(secs)),
            if login.refreshable {
                " (refreshed when due)"
            } else {
                ""
            }
        ),
        None => String::new(),
    };
    eprintln!(
        "logged in to {} ({} client; scopes: {}{expiry})",
        login.server,
        login.registration,
        scopes_text(&login.scopes)
    );
    eprintln!(
        "next: `meta-server index --server {}` lists its tools",
        login.server
    );
    Ok(ExitCode::SUCCESS)
}

/// One server's login, as `auth status` reports it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Row {
    server: String,
    /// `logged-in`, `expired`, `needs-login`, `no-login-needed` or `unreachable`.
    state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    scopes: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<String>,
}

#[allow(clippy::print_stdout)]
async fn status(settings: &Settings, args: StatusArgs) -> anyhow::Result<ExitCode> {
    let servers: Vec<&ServerConfig> = settings
        .servers
        .iter()
        .filter(|s| s.remote_url().is_some())
        .collect();
    let manager = Manager::new(&settings.servers);
    let rows = futures::future::join_all(servers.iter().map(|s| row(&manager, s))).await;
    if args.json {
        println!("{}", escape_json(&serde_json::to_string_pretty(&rows)?));
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        println!("no remote servers in {}", settings.source.display());
    }
    for row in &rows {
        let mut line = format!("{}: {}", row.server, row.state.replace('-', " "));
        if let Some(at) = &row.expires_at {
            line.push_str(&format!(" until {at}"));
        }
        if !row.scopes.is_empty() {
            line.push_str(&format!(
                " (scopes: {})",
                escape_line(&row.scopes.join(" "))
            ));
        }
        if let Some(detail) = &row.detail {
            line.push_str(&format!(": {}", escape_line(detail)));
        }
        println!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}

async fn row(manager: &Manager, server: &ServerConfig) -> Row {
    let mut row = Row {
        server: server.name.clone(),
        state: "needs-login",
        expires_at: None,
        scopes: Vec::new(),
        detail: None,
    };
    match crate::auth::stored(server) {
        Ok(Stored::LoggedIn {
            scopes,
            expires_at,
            refreshable,
            ..
        }) => {
            let expired = expires_at.is_some_and(|at| at <= crate::auth::now());
            row.state = if expired && !refreshable {
                "expired"
            } else {
                "logged-in"
            };
            row.expires_at = expires_at.map(|at| {
                humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + Duration::from_secs(at))
                    .to_string()
            });
            if expired && refreshable {
                row.detail = Some("token expired; refreshed at the next call".into());
            }
            row.scopes = scopes;
        }
        Ok(Stored::OtherUrl) => {
            row.detail = Some(format!(
                "the stored login is for another URL than the server's now (the URL changed, or its ${{VAR}} name another server), so its token is not sent; run `meta-server auth login {}`",
                server.name
            ));
        }
        Ok(Stored::None) => match manager.probe_login(&server.name).await {
            Ok(Some(_)) => {
                row.detail = Some(format!("run `meta-server auth login {}`", server.name))
            }
            Ok(None) => row.state = "no-login-needed",
            Err(e) => {
                row.state = "unreachable";
                row.detail = Some(e.to_string());
            }
        },
        Err(e) => {
            row.state = "unreachable";
            row.detail = Some(e.to_string());
        }
    }
    row
}

/// The remote server called `name` (config name or key).
fn remote<'a>(settings: &'a Settings, name: &str) -> anyhow::Result<&'a ServerConfig> {
    let Some(server) = settings
        .servers
        .iter()
        .find(|s| s.name == name || s.key == name)
    else {
        let remote: Vec<&str> = settings
            .servers
            .iter()
            .filter(|s| s.remote_url().is_some())
            .map(|s| s.name.as_str())
            .collect();
        bail!(
            "no server \"{name}\" in {}; remote servers: {}",
            settings.source.display(),
            if remote.is_empty() {
                "none".to_owned()
            } else {
                remote.join(", ")
            }
        );
    };
    if server.remote_url().is_none() {
        bail!(crate::auth::AuthError::NotRemote(server.name.clone()));
    }
    Ok(server)
}
