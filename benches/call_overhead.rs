//! What meta-server adds to a tool call: p50/p99 latency of sequential `echo` calls and
//! throughput of concurrent ones, through `meta-server serve` (`call_tool`) versus straight to
//! the same upstream (the fault server). Plain `main` instead of divan, because the numbers
//! wanted are percentiles and calls per second, which divan does not report.
//! Run: `cargo build --release --example fault_server && cargo bench --bench call_overhead`;
//! results and machine in BENCHMARKS.md.
#![allow(
    clippy::disallowed_types,
    reason = "measures wall time outside any runtime clock"
)]
// The report on stdout is this program's output.
#![allow(clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, JsonObject};
use rmcp::service::{Peer, RunningService, ServiceExt};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

const WARMUP: usize = 200;
const SEQUENTIAL: usize = 3000;
const WORKERS: usize = 32;
const CONCURRENT_CALLS: usize = 6400;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(run());
}

fn fault_server() -> PathBuf {
    let bin = Path::new(env!("CARGO_BIN_EXE_meta-server"))
        .parent()
        .expect("target dir")
        .join("examples/fault_server");
    assert!(
        bin.exists(),
        "{} is missing: cargo build --release --example fault_server",
        bin.display()
    );
    bin
}

/// One way of calling `echo {text}`: the request for payload `text`.
type Shape = fn(&str) -> CallToolRequestParams;

fn direct(text: &str) -> CallToolRequestParams {
    CallToolRequestParams::new("echo").with_arguments(object(json!({"text": text})))
}

fn via_meta(text: &str) -> CallToolRequestParams {
    CallToolRequestParams::new("call_tool").with_arguments(object(
        json!({"name": "up__echo", "arguments": {"text": text}}),
    ))
}

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => unreachable!("arguments are objects"),
    }
}

async fn call(peer: &Peer<RoleClient>, shape: Shape, text: &str) -> Duration {
    let started = Instant::now();
    let result = peer.call_tool(shape(text)).await.expect("call answers");
    let elapsed = started.elapsed();
    let answer = result.content[0].as_text().map(|t| t.text.as_str());
    assert_eq!(answer, Some(text), "wrong answer");
    elapsed
}

struct Stats {
    p50: Duration,
    p99: Duration,
    per_second: f64,
}

async fn measure(peer: &Peer<RoleClient>, shape: Shape) -> Stats {
    for i in 0..WARMUP {
        call(peer, shape, &format!("warm {i}")).await;
    }
    let mut latencies = Vec::with_capacity(SEQUENTIAL);
    for i in 0..SEQUENTIAL {
        latencies.push(call(peer, shape, &format!("seq {i}")).await);
    }
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    let started = Instant::now();
    let workers = (0..WORKERS).map(|w| {
        let peer = peer.clone();
        tokio::spawn(async move {
            for i in 0..CONCURRENT_CALLS / WORKERS {
                call(&peer, shape, &format!("w{w} {i}")).await;
            }
        })
    });
    for worker in futures::future::join_all(workers).await {
        worker.expect("worker finishes");
    }
    Stats {
        p50: at(0.50),
        p99: at(0.99),
        per_second: CONCURRENT_CALLS as f64 / started.elapsed().as_secs_f64(),
    }
}

async fn connect(mut cmd: tokio::process::Command) -> RunningService<RoleClient, ()> {
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::null())
        .spawn()
        .expect("server starts");
    ().serve(transport).await.expect("initialize")
}

async fn run() {
    let fault = fault_server();
    let meta = env!("CARGO_BIN_EXE_meta-server");
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("config.json");
    let catalogs = dir.path().join("catalogs");
    let servers = json!({"mcpServers": {"up": {"command": fault, "timeoutSecs": 60}}});
    std::fs::write(&config, servers.to_string()).expect("config written");
    let args = |sub: &str| {
        vec![
            "--config".to_owned(),
            config.display().to_string(),
            "--catalog-dir".to_owned(),
            catalogs.display().to_string(),
            sub.to_owned(),
        ]
    };
    let indexed = std::process::Command::new(meta)
        .args(args("index"))
        .stdout(Stdio::null())
        .status()
        .expect("meta-server index runs");
    assert!(indexed.success(), "meta-server index failed");

    let upstream = connect(tokio::process::Command::new(&fault)).await;
    let straight = measure(upstream.peer(), direct).await;
    upstream.cancel().await.expect("upstream stops");

    let mut cmd = tokio::process::Command::new(meta);
    cmd.args(args("serve"));
    let served = connect(cmd).await;
    let through = measure(served.peer(), via_meta).await;
    served.cancel().await.expect("meta-server stops");

    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "echo, {SEQUENTIAL} sequential calls (p50/p99) and {CONCURRENT_CALLS} calls from {WORKERS} concurrent callers:"
    );
    for (name, s) in [
        ("direct to upstream", &straight),
        ("through meta-server", &through),
    ] {
        println!(
            "  {name:<20} p50 {:>7.1} us  p99 {:>7.1} us  {:>8.0} calls/s",
            us(s.p50),
            us(s.p99),
            s.per_second
        );
    }
    println!(
        "  {:<20} p50 {:>7.1} us  p99 {:>7.1} us",
        "added by meta-server",
        us(through.p50) - us(straight.p50),
        us(through.p99) - us(straight.p99)
    );
}
