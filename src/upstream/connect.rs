//! Opening one connection: spawn a stdio child (see `child.rs`) or reach a
//! streamable-HTTP endpoint, then run the `initialize` handshake.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, ProgressNotificationParam, ProtocolVersion,
};
use rmcp::service::{ClientInitializeError, NotificationContext, RoleClient, ServiceExt};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::ChildStderr;
use tokio::sync::Mutex;

use super::child::ChildTransport;
use super::progress::ProgressRoutes;
use super::{Connection, Event, Events, UpstreamError};
use crate::config::{Launch, ServerConfig};

const STDERR_LINES: usize = 5;

/// meta-server's side of an upstream connection.
#[derive(Clone)]
pub struct UpstreamClient {
    server: String,
    events: Option<Events>,
    progress: ProgressRoutes,
}

impl UpstreamClient {
    pub(super) fn new(server: String, events: Option<Events>, progress: ProgressRoutes) -> Self {
        Self {
            server,
            events,
            progress,
        }
    }
}

impl ClientHandler for UpstreamClient {
    fn get_info(&self) -> ClientConfig {
        // Plain `initialize` (legacy era): dual-era servers lock a connection into the
        // 2026-07-28 era once a discover probe is made, so never probe.
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("meta-server", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }

    async fn on_tool_list_changed(&self, _cx: NotificationContext<RoleClient>) {
        tracing::debug!(server = %self.server, "upstream sent tools/list_changed");
        if let Some(events) = &self.events {
            let _ = events.send(Event::ToolListChanged(self.server.clone()));
        }
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _cx: NotificationContext<RoleClient>,
    ) {
        self.progress.deliver(params);
    }
}

/// The last few lines a child wrote to stderr, for error messages.
#[derive(Clone)]
pub(super) struct StderrTail {
    lines: Arc<StdMutex<VecDeque<String>>>,
    /// Becomes true once the child's stderr reached end of file (or was never followed).
    finished: tokio::sync::watch::Sender<bool>,
}

impl Default for StderrTail {
    fn default() -> Self {
        Self {
            lines: Arc::default(),
            finished: tokio::sync::watch::Sender::new(true),
        }
    }
}

impl StderrTail {
    pub(super) fn tail(&self) -> String {
        let lines = self.lines.lock().expect("stderr lock");
        lines.iter().cloned().collect::<Vec<_>>().join(" | ")
    }

    /// The tail once the child's stderr is fully read, waiting at most `within`: a crashed
    /// child's last words are often still in the pipe when its stdout closes.
    pub(super) async fn final_tail(&self, within: Duration) -> String {
        let mut finished = self.finished.subscribe();
        let _ = tokio::time::timeout(within, finished.wait_for(|done| *done)).await;
        self.tail()
    }

    fn follow(&self, server: String, stderr: ChildStderr) {
        let lines = self.lines.clone();
        let finished = self.finished.clone();
        finished.send_replace(false);
        tokio::spawn(async move {
            let mut reader = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                tracing::debug!(server = %server, "stderr: {line}");
                let mut lines = lines.lock().expect("stderr lock");
                if lines.len() == STDERR_LINES {
                    lines.pop_front();
                }
                lines.push_back(line.chars().take(300).collect());
            }
            finished.send_replace(true);
        });
    }
}

/// Starts (or reaches) `config`'s server and completes the handshake within its timeout.
pub(super) async fn open(
    config: &ServerConfig,
    events: Option<Events>,
) -> Result<Connection, UpstreamError> {
    let server = config.name.clone();
    let progress = ProgressRoutes::default();
    let client = UpstreamClient::new(server.clone(), events, progress.clone());
    let stderr = StderrTail::default();
    let after = config.call_timeout;
    let (handshake, pid) = match config.launch()? {
        Launch::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut cmd = tokio::process::Command::new(&command);
            cmd.args(&args).envs(&env);
            if let Some(cwd) = &cwd {
                cmd.current_dir(cwd);
            }
            let (transport, child_stderr, pid) =
                ChildTransport::spawn(cmd).map_err(|e| UpstreamError::Spawn {
                    server: server.clone(),
                    message: spawn_message(&command, &e),
                })?;
            if let Some(child_stderr) = child_stderr {
                stderr.follow(server.clone(), child_stderr);
            }
            (
                tokio::time::timeout(after, client.serve(transport)).await,
                pid,
            )
        }
        Launch::Http { url, headers } => {
            ensure_crypto_provider();
            let mut custom = HashMap::new();
            for (name, value) in headers {
                let bad = |what: &str| UpstreamError::Spawn {
                    server: server.clone(),
                    message: format!(
                        "header \"{name}\" has an invalid {what}; fix headers in the config"
                    ),
                };
                let name_ok = HeaderName::try_from(name.as_str()).map_err(|_| bad("name"))?;
                let value_ok = HeaderValue::try_from(value.as_str()).map_err(|_| bad("value"))?;
                custom.insert(name_ok, value_ok);
            }
            let transport = StreamableHttpClientTransport::from_config(
                StreamableHttpClientTransportConfig::with_uri(url).custom_headers(custom),
            );
            (
                tokio::time::timeout(after, client.serve(transport)).await,
                None,
            )
        }
    };
    let service = match handshake {
        Err(_) => {
            return Err(UpstreamError::ConnectTimeout {
                server,
                after,
                stderr: stderr.tail(),
            });
        }
        Ok(Err(e)) => {
            return Err(UpstreamError::Initialize {
                server,
                message: init_message(&e),
                stderr: stderr.tail(),
            });
        }
        Ok(Ok(service)) => service,
    };
    // Our own catalog is the cache; rmcp's would serve stale lists on errors.
    service
        .peer()
        .set_response_cache_config(rmcp::service::ClientCacheConfig::disabled())
        .await;
    tracing::info!(server = %server, pid, "upstream connected");
    Ok(Connection {
        peer: service.peer().clone(),
        service: Mutex::new(Some(service)),
        pid,
        stderr,
        progress,
        last_used: StdMutex::new(tokio::time::Instant::now()),
        in_flight: Default::default(),
    })
}

fn spawn_message(command: &str, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => format!(
            "command \"{command}\" was not found; install it or give its full path in \"command\""
        ),
        std::io::ErrorKind::PermissionDenied => {
            format!("command \"{command}\" is not executable; check its permissions")
        }
        _ => format!("command \"{command}\" failed to start: {e}"),
    }
}

fn init_message(e: &ClientInitializeError) -> String {
    let text = e.to_string();
    if text.to_lowercase().contains("closed") {
        format!(
            "{text} (the process exited or closed stdout before answering initialize; check command and args)"
        )
    } else {
        text
    }
}

/// reqwest is built without a default TLS provider; install ring's once.
fn ensure_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
