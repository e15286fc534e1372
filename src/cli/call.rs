//! `meta-server call`: one tool through the same path as `call_tool`, from a shell.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::{Map, Value};

use super::terminal::{escape, escape_json, escape_line};
use crate::auth::{Prompt, Show};
use crate::config::Settings;
use crate::server::State;

/// Authorizations one `call --login` may run: a login and a step-up, or two step-ups after
/// `auth login` (three in all, as the MCP spec's retry limit asks), so a server that keeps
/// asking for more scope cannot loop forever.
const MAX_LOGINS: usize = 2;

/// Call one tool, as call_tool does, and print its result: for shell scripts, and for checking
/// that a server (and its login) works.
///
/// The server is started (and listed first if it has no catalog yet), the arguments are
/// checked against the tool's input schema, and the result goes through result handling, so a
/// big result is cut with a notice. Exit code: 0 on success, 1 when the tool returned an error.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Qualified tool name, <server>__<tool> (search finds them).
    name: String,

    /// The arguments as a JSON object, e.g. '{"path": "README.md"}'. Default: {}.
    #[arg(value_name = "ARGS_JSON")]
    arguments: Option<String>,

    /// Print the whole MCP result as JSON instead of its text.
    #[arg(long)]
    json: bool,

    /// When the server needs a login (or more scope), log in in the browser and retry, up to
    /// two authorizations (a login and a step-up).
    #[arg(long)]
    login: bool,

    /// With --login: print the authorization URL and accept the pasted redirect URL instead
    /// of opening a browser.
    #[arg(long, requires = "login")]
    no_browser: bool,
}

#[allow(clippy::print_stdout)]
pub async fn run(settings: Settings, args: Args) -> anyhow::Result<ExitCode> {
    let arguments: Map<String, Value> = match args.arguments.as_deref() {
        None => Map::new(),
        Some(text) => match serde_json::from_str(text).context("ARGS_JSON is not valid JSON")? {
            Value::Object(map) => map,
            other => bail!("ARGS_JSON must be a JSON object, like '{{\"key\": 1}}'; got {other}"),
        },
    };
    // A call that cannot be recorded is not made.
    if let Some(audit) = &settings.audit {
        crate::audit::check(audit)?;
    }
    let loaded = crate::server::load_library(&settings)?;
    let (state, _) = State::open(settings, None, loaded);
    let server = args
        .name
        .split_once("__")
        .map(|(server, _)| server.to_owned())
        .unwrap_or_default();
    let mut logins = 0;
    let result = loop {
        let result = crate::server::call(&state, &args.name, arguments.clone()).await;
        let challenge = state.manager.take_login_challenge(&server);
        let (true, Some(challenge), true) = (result.is_error == Some(true), challenge, args.login)
        else {
            break result;
        };
        if logins == MAX_LOGINS {
            eprintln!("the server still refuses after {MAX_LOGINS} logins; giving up");
            break result;
        }
        logins += 1;
        let settings = state.settings();
        let config = settings
            .server(&server)
            .context("the server is not configured")?;
        // The connection holds the old token; the next call reconnects with the new one.
        state.manager.disconnect(&server).await;
        let prompt = Prompt {
            show: if args.no_browser {
                Show::Print
            } else {
                Show::Browser
            },
            timeout: Duration::from_secs(300),
        };
        let login = crate::auth::login(config, Some(&challenge), prompt).await?;
        eprintln!(
            "logged in to {} (scopes: {})",
            login.server,
            scopes_text(&login.scopes)
        );
    };
    state.stop().await;
    if args.json {
        println!("{}", escape_json(&serde_json::to_string_pretty(&result)?));
    } else {
        for block in &result.content {
            match block.as_text() {
                Some(text) => println!("{}", escape(&text.text)),
                None => println!("{}", escape_json(&serde_json::to_string(block)?)),
            }
        }
        if result.content.is_empty()
            && let Some(structured) = &result.structured_content
        {
            println!(
                "{}",
                escape_json(&serde_json::to_string_pretty(structured)?)
            );
        }
    }
    Ok(if result.is_error == Some(true) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

pub fn scopes_text(scopes: &[String]) -> String {
    if scopes.is_empty() {
        "none asked".to_owned()
    } else {
        escape_line(&scopes.join(" ")).into_owned()
    }
}
