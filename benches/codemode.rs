//! Code Mode against plain `call_tool` on the real reference servers: tokens that cross the
//! client boundary and wall time for three fan-out tasks, and the time `meta__run_script` adds
//! to a single call. Plain `main`: the numbers wanted are token counts and medians.
//! Run: `scripts/install-peers && cargo bench --bench codemode`; results in BENCHMARKS.md.
//!
//! Tokens (o200k_base) are counted per request the model would make: what it writes (the
//! `call_tool` arguments, a script's code and input included) plus what it reads back (the text
//! content of the result). "wire" adds the `structuredContent` that travels beside the text.
#![allow(
    clippy::disallowed_types,
    reason = "measures wall time outside any runtime clock"
)]
// The report on stdout is this program's output.
#![allow(clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use meta_server::budget::{O200k, TokenCounter};
use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject};
use rmcp::service::{Peer, ServiceExt};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

/// Runs of each fan-out task; the median time is reported.
const RUNS: usize = 7;
/// Calls of each kind in the single-call comparison.
const SINGLE: usize = 500;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(run());
}

fn peers() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let peers =
        std::env::var_os("META_SERVER_PEERS").map_or_else(|| root.join(".peers"), PathBuf::from);
    assert!(
        peers
            .join("npm/node_modules/@modelcontextprotocol")
            .exists(),
        "{} has no reference servers: run scripts/install-peers",
        peers.display()
    );
    peers
}

/// What one request costs: tokens written and read, and the time it took.
#[derive(Default, Clone, Copy)]
struct Cost {
    written: usize,
    read: usize,
    wire: usize,
    time: Duration,
}

impl std::ops::AddAssign for Cost {
    fn add_assign(&mut self, other: Self) {
        self.written += other.written;
        self.read += other.read;
        self.wire += other.wire;
        self.time += other.time;
    }
}

struct Client {
    peer: Peer<RoleClient>,
}

impl Client {
    /// `call_tool {name, arguments}`, checked for success.
    async fn call(&self, name: &str, arguments: Value) -> (CallToolResult, Cost) {
        let args = json!({"name": name, "arguments": arguments});
        let written = O200k.count(&args.to_string());
        let started = Instant::now();
        let result = self
            .peer
            .call_tool(CallToolRequestParams::new("call_tool").with_arguments(object(args)))
            .await
            .expect("call answers");
        let time = started.elapsed();
        let text: String = result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
            .collect::<Vec<_>>()
            .join("\n");
        assert_ne!(result.is_error, Some(true), "{name} failed: {text}");
        let read = O200k.count(&text);
        let structured = result
            .structured_content
            .as_ref()
            .map_or(0, |s| O200k.count(&s.to_string()));
        let cost = Cost {
            written,
            read,
            wire: written + read + structured,
            time,
        };
        (result, cost)
    }

    async fn script(&self, code: &str, input: Value) -> (Value, Cost) {
        let (result, cost) = self
            .call(
                "meta__run_script",
                json!({"code": code, "input": input, "max_calls": 100}),
            )
            .await;
        let out = result.structured_content.expect("script output");
        (out["result"].clone(), cost)
    }
}

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => unreachable!("arguments are objects"),
    }
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

/// 20 text files of 1-5 KB (log-like lines), deterministic.
fn write_files(dir: &Path) -> Vec<String> {
    (0..20)
        .map(|i| {
            let lines = 20 + (i * 37 % 23) * 3;
            let body: String = (0..lines)
                .map(|l| {
                    format!(
                        "2026-11-29T10:{:02}:{:02}Z INFO request {} served /api/items/{} in {} ms\n",
                        l % 60,
                        (l * 7) % 60,
                        i * 1000 + l,
                        l * 13 % 997,
                        l % 90 + 3
                    )
                })
                .collect();
            let path = dir.join(format!("service-{i:02}.log"));
            std::fs::write(&path, body).expect("file written");
            path.display().to_string()
        })
        .collect()
}

const LARGEST: &str = r#"const files = await Promise.all(input.paths.map(async (path) =>
  ({path, size: (await tools.call("filesystem__read_text_file", {path})).content.length})));
return files.sort((a, b) => b.size - a.size).slice(0, 3);"#;

const SUM: &str = r#"const sums = await Promise.all(Array.from({length: 20}, (_, i) =>
  tools.call("everything__get-sum", {a: i, b: 3 * i})));
return sums.reduce((total, s) => total + Number(String(s).match(/(-?\d+)\D*$/)[1]), 0);"#;

const JOIN: &str = r#"const graph = await tools.call("memory__search_nodes", {query: "person"});
return Promise.all(graph.entities.map(async (e) => {
  const zone = e.observations.find((o) => o.startsWith("timezone ")).slice(9);
  const now = await tools.call("time__get_current_time", {timezone: zone});
  return {name: e.name, time: now.datetime.slice(11, 16)};
}));"#;

const ZONES: [&str; 10] = [
    "Europe/London",
    "America/New_York",
    "Asia/Tokyo",
    "Europe/Berlin",
    "Australia/Sydney",
    "America/Los_Angeles",
    "Asia/Kolkata",
    "Africa/Nairobi",
    "America/Sao_Paulo",
    "Asia/Singapore",
];

/// The three tasks done call by call, as a model without Code Mode would.
async fn plain(client: &Client, task: &str, paths: &[String]) -> Cost {
    let mut cost = Cost::default();
    match task {
        "largest" => {
            let mut sizes = Vec::new();
            for path in paths {
                let (r, c) = client
                    .call("filesystem__read_text_file", json!({"path": path}))
                    .await;
                cost += c;
                sizes.push(text(&r).len());
            }
            assert_eq!(sizes.len(), 20);
        }
        "sum" => {
            for i in 0..20 {
                let (_, c) = client
                    .call("everything__get-sum", json!({"a": i, "b": 3 * i}))
                    .await;
                cost += c;
            }
        }
        _ => {
            let (r, c) = client
                .call("memory__search_nodes", json!({"query": "person"}))
                .await;
            cost += c;
            let people = r.structured_content.expect("graph")["entities"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            assert_eq!(people.len(), ZONES.len());
            for zone in ZONES {
                let (_, c) = client
                    .call("time__get_current_time", json!({"timezone": zone}))
                    .await;
                cost += c;
            }
        }
    }
    cost
}

async fn scripted(client: &Client, task: &str, paths: &[String]) -> Cost {
    let (code, input) = match task {
        "largest" => (LARGEST, json!({"paths": paths})),
        "sum" => (SUM, Value::Null),
        _ => (JOIN, Value::Null),
    };
    let (result, cost) = client.script(code, input).await;
    match task {
        "largest" => assert_eq!(result.as_array().map(Vec::len), Some(3), "{result}"),
        "sum" => assert_eq!(result, json!((0..20).map(|i| 4 * i).sum::<i64>())),
        _ => assert_eq!(
            result.as_array().map(Vec::len),
            Some(ZONES.len()),
            "{result}"
        ),
    }
    cost
}

/// `tool` called plainly and from a script, `n` calls each: wall time (median), alternating
/// call by call with `pause` before each (so a change of load hits both alike), then
/// meta-server's own CPU time (mean) per call, in one block of each (so the sandbox that a run
/// readies after its report is counted with the runs).
async fn single(client: &Client, pid: u32, tool: &str, args: &Value, n: usize, pause: Duration) {
    let code = format!("return await tools.call({tool:?}, input);");
    let call = async |script: bool| {
        if script {
            client.script(&code, args.clone()).await.1.time
        } else {
            client.call(tool, args.clone()).await.1.time
        }
    };
    let mut walls = [Vec::new(), Vec::new()];
    for _ in 0..n {
        for (script, wall) in walls.iter_mut().enumerate() {
            if !pause.is_zero() {
                tokio::time::sleep(pause).await;
            }
            wall.push(call(script == 1).await);
        }
    }
    let mut cpus = [0.0f64; 2];
    for (script, cpu) in cpus.iter_mut().enumerate() {
        let before = cpu_ms(pid);
        for _ in 0..n {
            if !pause.is_zero() {
                tokio::time::sleep(pause).await;
            }
            call(script == 1).await;
        }
        *cpu = (cpu_ms(pid) - before) / n as f64;
    }
    let [direct, via] = walls.map(median);
    if pause.is_zero() {
        println!("  {tool}:");
    } else {
        println!("  {tool}, {} ms between calls:", pause.as_millis());
    }
    println!(
        "    call_tool                  {:>6.2} ms wall  {:>6.3} ms CPU",
        ms(direct),
        cpus[0]
    );
    println!(
        "    run_script, the same call  {:>6.2} ms wall  {:>6.3} ms CPU  (+{:.2} ms, +{:.0}% wall; +{:.3} ms CPU)",
        ms(via),
        cpus[1],
        ms(via) - ms(direct),
        100.0 * (via.as_secs_f64() / direct.as_secs_f64() - 1.0),
        cpus[1] - cpus[0]
    );
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split(' ').take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// CPU time (user + system, all threads) process `pid` has used so far, in ms.
fn cpu_ms(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc stat");
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let fields: Vec<&str> = stat
        .rsplit_once(") ")
        .expect("stat format")
        .1
        .split(' ')
        .collect();
    let ticks: f64 =
        fields[11].parse::<f64>().expect("utime") + fields[12].parse::<f64>().expect("stime");
    ticks * 1000.0 / clock_ticks()
}

/// Clock ticks per second of /proc times.
fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok()?.trim().parse().ok())
        .unwrap_or(100.0)
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

async fn run() {
    let peers = peers();
    let npm = peers.join("npm/node_modules/@modelcontextprotocol");
    let meta = env!("CARGO_BIN_EXE_meta-server");
    let dir = tempfile::tempdir().expect("temp dir");
    let paths = write_files(dir.path());
    let js = |package: &str| {
        npm.join(package)
            .join("dist/index.js")
            .display()
            .to_string()
    };
    let config = dir.path().join("config.json");
    let servers = json!({"mcpServers": {
        "everything": {"command": "node", "args": [js("server-everything"), "stdio"]},
        "filesystem": {"command": "node", "args": [js("server-filesystem"), dir.path()]},
        "memory": {"command": "node", "args": [js("server-memory")],
                   "env": {"MEMORY_FILE_PATH": dir.path().join("memory.jsonl")}},
        "time": {"command": peers.join("py/bin/mcp-server-time"), "args": ["--local-timezone", "UTC"]},
    }});
    std::fs::write(&config, servers.to_string()).expect("config written");
    let args = |sub: &str| {
        vec![
            "--config".to_owned(),
            config.display().to_string(),
            "--catalog-dir".to_owned(),
            dir.path().join("catalogs").display().to_string(),
            sub.to_owned(),
        ]
    };
    let indexed = std::process::Command::new(meta)
        .args(args("index"))
        .stdout(Stdio::null())
        .status()
        .expect("meta-server index runs");
    assert!(indexed.success(), "meta-server index failed");
    let mut cmd = tokio::process::Command::new(meta);
    cmd.args(args("serve"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::null())
        .spawn()
        .expect("meta-server starts");
    let pid = transport.id().expect("meta-server pid");
    let service = ().serve(transport).await.expect("initialize");
    let client = Client {
        peer: service.peer().clone(),
    };

    let mut entities: Vec<Value> = ZONES
        .iter()
        .enumerate()
        .map(|(i, zone)| json!({"name": format!("person-{i}"), "entityType": "person",
            "observations": [format!("timezone {zone}"), format!("works on project-{}", i % 4), "prefers email over chat"]}))
        .collect();
    entities.extend((0..10).map(|i| {
        json!({"name": format!("project-{i}"), "entityType": "project",
        "observations": [format!("started 2026-0{}-01", i % 9 + 1), "status active"]})
    }));
    client
        .call("memory__create_entities", json!({"entities": entities}))
        .await;

    // Warm-up: every upstream connected, every path taken once.
    for task in ["largest", "sum", "join"] {
        plain(&client, task, &paths).await;
        scripted(&client, task, &paths).await;
    }

    println!("load average {}", load_average());
    println!(
        "| task | path | model tokens (written + read) | wire tokens | wall time, median of {RUNS} |"
    );
    println!("| --- | --- | --- | --- | --- |");
    for (task, label) in [
        ("largest", "read 20 files, return the 3 largest"),
        ("sum", "sum 20 tool results"),
        ("join", "search memory, join with time (10 people)"),
    ] {
        let mut results = Vec::new();
        for path in ["call_tool", "run_script"] {
            let mut costs = Vec::new();
            for _ in 0..RUNS {
                costs.push(if path == "call_tool" {
                    plain(&client, task, &paths).await
                } else {
                    scripted(&client, task, &paths).await
                });
            }
            let cost = costs[0];
            let time = median(costs.iter().map(|c| c.time).collect());
            println!(
                "| {label} | {path} | {} ({} + {}) | {} | {:.1} ms |",
                cost.written + cost.read,
                cost.written,
                cost.read,
                cost.wire,
                ms(time)
            );
            results.push((cost, time));
        }
        let (plain_cost, plain_time) = results[0];
        let (script_cost, script_time) = results[1];
        let saved = |a: usize, b: usize| 100.0 * (1.0 - b as f64 / a as f64);
        println!(
            "| {label} | saved | {:.0}% | {:.0}% | {:.0}% |",
            saved(
                plain_cost.written + plain_cost.read,
                script_cost.written + script_cost.read
            ),
            saved(plain_cost.wire, script_cost.wire),
            100.0 * (1.0 - script_time.as_secs_f64() / plain_time.as_secs_f64())
        );
    }

    println!();
    println!(
        "one call: wall time median of {}, meta-server CPU time mean (load average {}):",
        SINGLE,
        load_average()
    );
    let time = json!({"timezone": "UTC"});
    let tool = "time__get_current_time";
    single(&client, pid, tool, &time, SINGLE, Duration::ZERO).await;
    // Idle between calls, as between a model's turns: every thread has parked.
    single(&client, pid, tool, &time, SINGLE, Duration::from_millis(5)).await;
    // A call that takes 10 ms upstream, like a tool that does real work.
    let slow = json!({"duration": 0.01, "steps": 1});
    single(
        &client,
        pid,
        "everything__trigger-long-running-operation",
        &slow,
        SINGLE / 5,
        Duration::ZERO,
    )
    .await;
    let (mut wall, before) = (Vec::new(), cpu_ms(pid));
    for _ in 0..SINGLE {
        wall.push(client.script("return 1;", Value::Null).await.1.time);
    }
    println!(
        "  run_script, no call          {:>6.2} ms wall  {:>6.3} ms CPU",
        ms(median(wall)),
        (cpu_ms(pid) - before) / SINGLE as f64
    );
    service.cancel().await.expect("meta-server stops");
}
