//! `meta-server serve`: the MCP server a client starts.

use std::process::ExitCode;

use crate::config::Settings;

/// Serve MCP over stdio: the command to put in your client's config.
///
/// Shows the client search_tools, get_tool_details and call_tool. Servers without a catalog are
/// indexed in the background; upstreams start on first call and stop when idle.
#[derive(clap::Args, Debug)]
pub struct Args {}

pub async fn run(settings: Settings, _args: Args) -> anyhow::Result<ExitCode> {
    crate::server::serve_stdio(settings).await?;
    Ok(ExitCode::SUCCESS)
}
