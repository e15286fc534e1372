//! `meta-server serve`: the MCP server a client starts (stdio), or one several clients share
//! (`--http`).

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};

use crate::config::Settings;
use crate::server::{
    CONSOLE_PATH, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE, HTTP_PATH,
    HttpOptions, HttpServer, NamedToken, Token,
};

/// The environment variable holding the bearer token for `--http`.
const TOKEN_ENV: &str = "META_SERVER_TOKEN";

/// Serve MCP over stdio (the command to put in your client's config), or over streamable HTTP.
///
/// Shows the client search_tools, get_tool_details and call_tool. Servers without a catalog are
/// indexed in the background; upstreams start on first call and stop when idle.
///
/// With --http, clients connect to http://ADDR/mcp, each with its own session; all share one set
/// of upstreams and one catalog, and each session reads back only the results it stored. When
/// META_SERVER_TOKEN or --token-file gives a token, every request must send
/// `Authorization: Bearer <token>`. GET /healthz (no token) and GET /metrics (Prometheus text)
/// answer on the same address, and /console, a page for the holders of META_SERVER_TOKEN or of
/// a named token marked "admin": true.
///
/// With META_SERVER_STORE_URL (or metaServer.store.url: redis:// or rediss://, Valkey or
/// Redis), several replicas behind one load balancer act as one server: they share stored
/// results, sessions and catalogs.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Serve streamable HTTP at ADDR instead of stdio: IP:PORT, localhost:PORT, or just PORT
    /// (127.0.0.1). A non-loopback address needs --allow-remote and a token.
    #[arg(long, value_name = "ADDR", value_parser = parse_listen)]
    http: Option<SocketAddr>,

    /// Allow --http on a non-loopback address (reachable from other machines). Requires a token.
    #[arg(long, requires = "http")]
    allow_remote: bool,

    /// Read the bearer token from FILE (first line; keep the file owner-only). The environment
    /// variable META_SERVER_TOKEN works too. Never passed on the command line.
    #[arg(long, value_name = "FILE", requires = "http")]
    token_file: Option<PathBuf>,

    /// Also accept this Host header value (the name clients use to reach a remote server);
    /// repeatable. Loopback names and the bound IP are always accepted.
    #[arg(long = "allowed-host", value_name = "HOST", requires = "http")]
    allowed_hosts: Vec<String>,

    /// Let every session read every stored result. By default a stored result (behind a
    /// truncation notice) can be read only by the session that made it.
    #[arg(long, requires = "http")]
    share_results: bool,

    /// Sessions open at once; a client starting one more gets 503 with Retry-After.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_SESSIONS as u32, requires = "http",
          value_parser = clap::value_parser!(u32).range(1..))]
    max_sessions: u32,

    /// A session without requests for this many seconds ends (its client starts a new one).
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_SESSION_IDLE.as_secs(),
          requires = "http", value_parser = clap::value_parser!(u64).range(1..))]
    session_idle_secs: u64,

    /// Connections open at once; one more gets 503 and is closed.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CONNECTIONS as u32,
          requires = "http", value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: u32,
}

pub async fn run(settings: Settings, args: Args) -> anyhow::Result<ExitCode> {
    let Some(addr) = args.http else {
        crate::server::serve_stdio(settings).await?;
        return Ok(ExitCode::SUCCESS);
    };
    let token = read_token(std::env::var(TOKEN_ENV).ok(), args.token_file.as_deref())?;
    let named_tokens = NamedToken::expand(&settings.http_tokens, token.as_ref(), &|var| {
        std::env::var(var).ok()
    })?;
    let options = HttpOptions {
        addr,
        allow_remote: args.allow_remote,
        token,
        named_tokens,
        extra_hosts: args.allowed_hosts,
        share_results: args.share_results,
        max_sessions: args.max_sessions as usize,
        session_idle: std::time::Duration::from_secs(args.session_idle_secs),
        max_connections: args.max_connections as usize,
    };
    let server = HttpServer::bind(options).await?;
    let mut local = server
        .local_addr()
        .context("cannot read the bound address")?;
    // An unspecified address is reached on this machine through loopback.
    if local.ip().is_unspecified() {
        local.set_ip(match local.ip() {
            std::net::IpAddr::V4(_) => Ipv4Addr::LOCALHOST.into(),
            std::net::IpAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    eprintln!("meta-server: serving MCP at http://{local}{HTTP_PATH}");
    eprintln!("meta-server: console (admin tokens) at http://{local}{CONSOLE_PATH}");
    server.run(settings).await?;
    Ok(ExitCode::SUCCESS)
}

/// Why a `--listen` value is not an address.
#[derive(Debug, thiserror::Error)]
enum ListenError {
    #[error("bad port: {0}")]
    Port(#[from] std::num::ParseIntError),
    #[error("expected IP:PORT, localhost:PORT or PORT, got \"{0}\"")]
    Form(String),
}

/// `PORT`, `localhost:PORT` or any `IP:PORT`.
fn parse_listen(value: &str) -> Result<SocketAddr, ListenError> {
    if let Ok(port) = value.parse::<u16>() {
        return Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, port)));
    }
    if let Some(port) = value.strip_prefix("localhost:") {
        return Ok(SocketAddr::from((
            Ipv4Addr::LOCALHOST,
            port.parse::<u16>()?,
        )));
    }
    value
        .parse()
        .map_err(|_| ListenError::Form(value.to_owned()))
}

/// The token from the environment or from a file, never both; empty is an error.
fn read_token(env: Option<String>, file: Option<&Path>) -> anyhow::Result<Option<Token>> {
    let token = match (env, file) {
        (Some(_), Some(_)) => {
            bail!("both {TOKEN_ENV} and --token-file are set; use one")
        }
        (Some(token), None) => token,
        (None, Some(path)) => {
            warn_if_shared(path);
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the token file {}", path.display()))?;
            text.lines().next().unwrap_or_default().to_owned()
        }
        (None, None) => return Ok(None),
    };
    let token = token.trim();
    if token.is_empty() {
        bail!("the token is empty; put a long random string in {TOKEN_ENV} or the token file");
    }
    Ok(Some(Token::new(token.to_owned())))
}

#[cfg(unix)]
fn warn_if_shared(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path)
        && meta.permissions().mode() & 0o077 != 0
    {
        tracing::warn!(
            "the token file {} is readable by other users; chmod 600 it",
            path.display()
        );
    }
}

#[cfg(not(unix))]
fn warn_if_shared(_path: &Path) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses() {
        assert_eq!(parse_listen("8931").unwrap().to_string(), "127.0.0.1:8931");
        assert_eq!(
            parse_listen("localhost:8931").unwrap().to_string(),
            "127.0.0.1:8931"
        );
        assert_eq!(parse_listen("[::1]:80").unwrap().to_string(), "[::1]:80");
        assert!(parse_listen("example.com:80").is_err());
    }

    #[test]
    fn token_sources() {
        assert!(read_token(None, None).unwrap().is_none());
        assert!(read_token(Some("abc".into()), None).unwrap().is_some());
        assert!(read_token(Some("  ".into()), None).is_err());
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), "s3cret\n").unwrap();
        assert!(read_token(None, Some(file.path())).unwrap().is_some());
        assert!(read_token(Some("abc".into()), Some(file.path())).is_err());
    }
}
