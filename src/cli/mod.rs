//! Command-line interface: one subcommand per file. The clap doc comments are the help text.

mod add;
mod auth;
mod call;
mod eval;
mod get;
mod import;
mod index;
mod install;
mod learned;
mod list;
mod measure;
mod remove;
mod search;
mod serve;
mod status;
pub mod terminal;
mod tools;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use tracing::Level;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::config::{Settings, default_config_path};
use crate::telemetry::Telemetry;
use crate::upstream::guardian;

/// One MCP entry in front of all your MCP servers.
///
/// meta-server reads the mcpServers config your client already uses, keeps a catalog of every
/// server's tools, and shows the client three tools instead of hundreds: search_tools,
/// get_tool_details and call_tool. Upstream servers start only when one of their tools is called.
#[derive(Parser, Debug)]
#[command(name = "meta-server", version, propagate_version = true)]
pub struct Cli {
    /// Config file: mcpServers JSON as Claude Desktop, Cursor and Claude Code write it, or
    /// VS Code's "servers" shape. Default: ~/.config/meta-server/config.json.
    #[arg(long, global = true, env = "META_SERVER_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Where catalogs are kept. Default: metaServer.catalogDir in the config, else
    /// ~/.local/share/meta-server/catalogs.
    #[arg(
        long,
        global = true,
        env = "META_SERVER_CATALOG_DIR",
        value_name = "DIR"
    )]
    pub catalog_dir: Option<PathBuf>,

    /// More log output on stderr (-v info, -vv debug). META_SERVER_LOG takes a full filter;
    /// tool arguments and results are logged only with META_SERVER_LOG_PAYLOADS=1.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    Serve(serve::Args),
    Add(add::Args),
    Remove(remove::Args),
    Get(get::Args),
    List(list::Args),
    Index(index::Args),
    Search(search::Args),
    Call(call::Args),
    Auth(auth::Args),
    Tools(tools::Args),
    Learned(learned::Args),
    Measure(measure::Args),
    Import(import::Args),
    Install(install::Args),
    Uninstall(install::UninstallArgs),
    Eval(eval::Args),
    /// Internal: the guardian that stops upstream process groups if meta-server is killed.
    #[command(name = guardian::SUBCOMMAND, hide = true)]
    Guard,
}

/// Set to `1` to log whole MCP messages (tool arguments and results) at debug and trace level.
pub const PAYLOADS_ENV: &str = "META_SERVER_LOG_PAYLOADS";

/// rmcp's targets whose lines carry whole messages above a level, with the most verbose level
/// that does not: their notifications at info, requests and results at debug, raw lines at
/// debug (unparsable input) and trace.
const PAYLOAD_TARGETS: [(&str, Level); 3] = [
    ("rmcp::service", Level::WARN),
    ("rmcp::transport::async_rw", Level::INFO),
    ("rmcp::transport::streamable_http_server", Level::DEBUG),
];

/// Whether a log line or span may carry a message payload.
fn carries_payload(meta: &tracing::Metadata<'_>) -> bool {
    PAYLOAD_TARGETS
        .iter()
        .any(|(target, most)| meta.target().starts_with(target) && meta.level() > most)
}

/// Whether a log line is rmcp's `response error`: an error a handler answered a request with,
/// in Rust's debug form. meta-server says in words what a user needs of those (an upstream's
/// request it could not relay, once per server, see `upstream/relay.rs`; the client gets its
/// own errors), so the line waits for -vv.
fn is_handler_error(meta: &tracing::Metadata<'_>) -> bool {
    meta.is_event()
        && meta.target().starts_with("rmcp::service")
        && *meta.level() == Level::WARN
        && meta.fields().field("error").is_some()
        && meta.fields().field("id").is_some()
}

/// Logs go to stderr only: stdout belongs to the MCP protocol. Message payloads (tool
/// arguments, results) are left out at every level unless [`PAYLOADS_ENV`] is `1`. With
/// `telemetry`, the spans of [`crate::telemetry::TARGET`] are exported too (never logged).
fn init_logging(cli: &Cli, telemetry: Option<&Telemetry>) {
    // rmcp's transport worker logs a failed connection in its own types' words; meta-server
    // reports the same failure with its cause, so that log waits for -vv.
    let default = match cli.verbose {
        0 => "warn,rmcp::transport::worker=off",
        1 => "info,rmcp::transport::worker=off",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("META_SERVER_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Exported spans are not log lines.
    let filter = match format!("{}=off", crate::telemetry::TARGET).parse() {
        Ok(off) => filter.add_directive(off),
        Err(_) => filter,
    };
    let payloads = std::env::var_os(PAYLOADS_ENV).is_some_and(|v| v == "1");
    let verbose = cli.verbose;
    let payload_filter = filter_fn(move |meta| payloads || !carries_payload(meta));
    let handler_errors = filter_fn(move |meta| verbose > 1 || !is_handler_error(meta));
    let Some(telemetry) = telemetry else {
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(|| RedactedStderr)
            .with_ansi(std::io::stderr().is_terminal())
            .with_target(false)
            .finish()
            .with(payload_filter)
            .with(handler_errors)
            .init();
        return;
    };
    // Each layer filters for itself: the exported spans are enabled whatever the log level.
    let log = tracing_subscriber::fmt::layer()
        .with_writer(|| RedactedStderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .with_filter(filter);
    tracing_subscriber::registry()
        .with(log)
        .with(telemetry.layer())
        .with(payload_filter)
        .with(handler_errors)
        .init();
}

/// Standard error with every line cleaned of the configured servers' secrets: libraries log
/// URLs and errors as they are.
struct RedactedStderr;

impl std::io::Write for RedactedStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = crate::redact::process().apply(&String::from_utf8_lossy(buf));
        std::io::stderr().write_all(text.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// Sets up logging (for `serve`, once the settings say whether traces are exported too), then
/// runs the chosen subcommand: `eval` and client setup directly (eval needs no config; setup
/// may create it), the rest on a multi-threaded runtime with the settings loaded.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let config = cli.config.clone().unwrap_or_else(default_config_path);
    if !matches!(cli.command, Command::Serve(_)) {
        init_logging(&cli, None);
    }
    match cli.command {
        // Its tools come from a file or a catalog dir: no config needed (only its catalogDir).
        Command::Eval(args) => return eval::run(args, &config, cli.catalog_dir),
        // Client setup edits files only, and must work before meta-server's config exists.
        Command::Import(args) => return import::run(&config, args),
        Command::Install(args) => return install::run(&config, args),
        Command::Uninstall(args) => return install::uninstall(args),
        // They edit or read the config as a file (add may create it), each on its own terms.
        Command::Add(args) => return add::run(&config, cli.catalog_dir, args),
        Command::Remove(args) => return remove::run(&config, cli.catalog_dir, args),
        Command::Get(args) => return get::run(&config, cli.catalog_dir, args),
        Command::List(args) => return list::run(&config, cli.catalog_dir, args),
        Command::Guard => {
            guardian::run();
            return Ok(ExitCode::SUCCESS);
        }
        Command::Serve(_)
        | Command::Index(_)
        | Command::Search(_)
        | Command::Call(_)
        | Command::Auth(_)
        | Command::Tools(_)
        | Command::Learned(_)
        | Command::Measure(_) => {}
    }
    let settings = Settings::load(&config, cli.catalog_dir.clone())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    // `serve` exports traces when an endpoint is configured; the exporter runs on the runtime.
    let telemetry = match cli.command {
        Command::Serve(_) => {
            let started = Telemetry::start(
                settings.telemetry.as_ref(),
                runtime.handle().clone(),
                &|var| std::env::var(var).ok(),
            );
            let telemetry = started.as_ref().ok().and_then(Option::as_ref);
            init_logging(&cli, telemetry);
            started?
        }
        _ => None,
    };
    crate::redact::set_process(crate::redact::Redactor::new(
        settings.servers.iter().flat_map(|s| s.secrets()),
    ));
    for skipped in &settings.skipped {
        eprintln!(
            "warning: {}: server \"{}\" skipped ({}); the other servers work",
            settings.source.display(),
            skipped.key,
            skipped.reason
        );
    }
    // Commands that start upstreams stop them even if killed (the guardian starts with the
    // first upstream, so serving from catalogs alone starts no process).
    if matches!(
        cli.command,
        Command::Serve(_) | Command::Index(_) | Command::Call(_)
    ) {
        match std::env::current_exe() {
            Ok(exe) => guardian::arm(exe),
            Err(e) => tracing::warn!("cannot start the guardian: {e}"),
        }
    }
    let code = runtime.block_on(async move {
        match cli.command {
            Command::Serve(args) => serve::run(settings, args).await,
            Command::Index(args) => index::run(settings, args).await,
            Command::Search(args) => search::run(settings, args),
            Command::Call(args) => call::run(settings, args).await,
            Command::Auth(args) => auth::run(settings, args).await,
            Command::Tools(args) => tools::run(settings, args).await,
            Command::Learned(args) => learned::run(settings, args).await,
            Command::Measure(args) => measure::run(settings, args),
            Command::Eval(_)
            | Command::Add(_)
            | Command::Remove(_)
            | Command::Get(_)
            | Command::List(_)
            | Command::Import(_)
            | Command::Install(_)
            | Command::Uninstall(_)
            | Command::Guard => unreachable!("handled before the config is loaded"),
        }
    });
    // The spans not exported yet go out while the runtime that sends them still runs.
    if let Some(telemetry) = telemetry {
        telemetry.shutdown();
    }
    // Upstreams are stopped by now; a blocking stdin read must not keep the process alive.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    code
}
