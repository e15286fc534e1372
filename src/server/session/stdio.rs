//! Serving one client over stdin/stdout: the transport `meta-server serve` speaks by default.
//! rmcp picks the revision from the first request: `initialize` starts a 2025-11-25 session,
//! a request naming 2026-07-28 in its `_meta` starts one served without it (a
//! `server/discover` before either is answered and leaves the choice open).

use rmcp::ServiceExt;
use rmcp::service::ServerInitializeError;
use rmcp::transport::async_rw::AsyncRwTransport;

use crate::config::Settings;

#[derive(Debug, thiserror::Error)]
pub enum StdioError {
    #[error(transparent)]
    Start(#[from] super::start::StartError),
    #[error("the MCP session over stdio did not start: {0}")]
    Session(Box<ServerInitializeError>),
}

/// Serves MCP over stdin/stdout until the client closes stdin or a signal arrives, then stops
/// every upstream.
pub async fn serve_stdio(settings: Settings) -> Result<(), StdioError> {
    let server = super::start::start(settings, false).await?;
    let state = server.state.clone();
    // Pipes (how clients start a server) are read and written on the reactor, not through
    // the blocking pool: a hand-off between threads less per message each way.
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    // A JavaScript client writes a string cut mid-emoji with a lone surrogate escape, which
    // rmcp would drop with the whole request, unanswered.
    let stdin = crate::surrogates::WellFormedLines::new(stdin);
    // Listed objects go out with every field their server sent.
    let transport = super::whole::Whole(AsyncRwTransport::new_server(stdin, stdout));
    let running = server
        .serve(transport)
        .await
        .map_err(|e| StdioError::Session(Box::new(e)))?;
    tokio::select! {
        quit = running.waiting() => tracing::info!(?quit, "client closed the connection"),
        () = super::start::shutdown_signal() => tracing::info!("signal received"),
    }
    tracing::info!("stopping upstreams");
    state.stop().await;
    Ok(())
}
