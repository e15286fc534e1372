//! Shared helpers: paths, configs, and a raw JSON-RPC session over a child's stdio.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::Duration;

use serde_json::{Value, json};

pub const BIN: &str = env!("CARGO_BIN_EXE_meta-server");

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The pinned peers; a missing install fails loudly instead of skipping.
pub fn peers() -> PathBuf {
    let dir =
        std::env::var_os("META_SERVER_PEERS").map_or_else(|| repo().join(".peers"), PathBuf::from);
    assert!(
        dir.join("npm/node_modules/@modelcontextprotocol/server-everything")
            .exists(),
        "pinned MCP servers are missing in {}: run scripts/install-peers",
        dir.display()
    );
    dir
}

pub fn everything_entry() -> Value {
    let js = peers().join("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    json!({"command": "node", "args": [js, "stdio"]})
}

pub fn time_entry() -> Value {
    json!({"command": peers().join("py/bin/mcp-server-time"), "args": ["--local-timezone", "UTC"]})
}

/// Writes `{"mcpServers": servers}` (plus `metaServer`) into `dir/config.json`.
pub fn write_config(dir: &Path, servers: Value, meta: Value) -> PathBuf {
    let path = dir.join("config.json");
    let config = json!({"metaServer": meta, "mcpServers": servers});
    std::fs::write(&path, serde_json::to_string_pretty(&config).unwrap()).unwrap();
    path
}

/// The servers whose catalogs are shipped in `catalogs/`.
pub const SHIPPED: [&str; 4] = ["everything", "filesystem", "memory", "time"];

/// Servers whose commands cannot start: proves a code path starts nothing.
pub fn unstartable(names: &[&str]) -> Value {
    names
        .iter()
        .map(|n| {
            (
                n.to_string(),
                json!({"command": "/nonexistent/never-started"}),
            )
        })
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// The binary with `args`, BM25 only (`META_SERVER_EMBEDDINGS=off`) so results do not depend
/// on whether model assets are installed; tests of the hybrid path set it `on`. Search does not
/// learn from use (`META_SERVER_LEARNING=off`): many tests serve the shipped catalogs, and one
/// test's calls must not move another's rankings; tests of learning set it `on`.
pub fn meta_server(args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env_remove("META_SERVER_CONFIG")
        .env_remove("META_SERVER_CATALOG_DIR")
        .env(meta_server::config::EMBEDDINGS_ENV, "off")
        .env(meta_server::config::LEARNING_ENV, "off");
    cmd
}

/// Runs `cmd` to the end; fails the test, showing its stderr, unless it succeeded.
pub fn succeeds(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs `cmd` to the end; fails the test unless it failed. Returns its stderr.
pub fn fails(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(!out.status.success(), "{cmd:?} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A `meta-server serve` process spoken to in raw JSON-RPC lines.
pub struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

/// Long enough for a slow CI machine; only a hang reaches it.
const REPLY_LIMIT: Duration = Duration::from_secs(30);

impl Session {
    /// A session over the catalogs shipped in `catalogs/`, configured with `servers` only.
    pub fn on_shipped_catalogs(dir: &Path, servers: Value) -> Self {
        let config = write_config(dir, servers, json!({}));
        Self::start(&config, &repo().join("catalogs"))
    }

    pub fn start(config: &Path, catalog_dir: &Path) -> Self {
        Self::start_with(config, catalog_dir, &[], Stdio::null())
    }

    /// Like [`Self::start`], with these environment variables and stderr going to `stderr`.
    pub fn start_with(
        config: &Path,
        catalog_dir: &Path,
        env: &[(&str, &str)],
        stderr: impl Into<Stdio>,
    ) -> Self {
        let mut child = meta_server(&[
            "--config",
            config.to_str().unwrap(),
            "--catalog-dir",
            catalog_dir.to_str().unwrap(),
            "serve",
        ])
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("meta-server starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            stdin: child.stdin.take(),
            child,
            lines,
        }
    }

    pub fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    /// Writes one raw line (for malformed input).
    pub fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// The next line from the server, raw.
    pub fn recv_line(&self) -> String {
        match self.lines.recv_timeout(REPLY_LIMIT) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => {
                panic!("no reply from meta-server within {REPLY_LIMIT:?}")
            }
            Err(RecvTimeoutError::Disconnected) => panic!("meta-server closed stdout"),
        }
    }

    /// Sends a request and returns the raw response line with the same id.
    pub fn request_raw(&mut self, id: u64, method: &str, params: Value) -> String {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let line = self.recv_line();
            let value: Value = serde_json::from_str(&line).expect("server writes JSON lines");
            if value.get("id") == Some(&json!(id)) {
                return line;
            }
        }
    }

    pub fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        serde_json::from_str(&self.request_raw(id, method, params)).unwrap()
    }

    /// `tools/call` of `name`; returns the whole response (result or error).
    pub fn call(&mut self, id: u64, name: &str, arguments: Value) -> Value {
        self.request(
            id,
            "tools/call",
            json!({"name": name, "arguments": arguments}),
        )
    }

    /// initialize + notifications/initialized; returns the initialize result.
    pub fn initialize(&mut self) -> Value {
        let reply = self.request(
            1,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "it", "version": "0"}}),
        );
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        reply["result"].clone()
    }

    /// The meta-server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Closes stdin and waits for a clean exit.
    pub fn finish(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        self.child.wait().unwrap()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The fault-injection upstream (`examples/fault_server.rs`), built by `cargo test`.
pub fn fault_server() -> PathBuf {
    let bin = Path::new(BIN)
        .parent()
        .unwrap()
        .join("examples/fault_server");
    assert!(
        bin.exists(),
        "{} is missing: cargo test builds it",
        bin.display()
    );
    bin
}

/// A config entry for the fault server; `tag` marks its processes, `events` is `FAULT_EVENTS`.
pub fn fault_entry(tag: &Path, events: &Path, extra: &[&str], timeout_secs: u64) -> Value {
    let mut args = vec![json!("--tag"), json!(tag)];
    args.extend(extra.iter().map(|a| json!(a)));
    json!({
        "command": fault_server(),
        "args": args,
        "env": {"FAULT_EVENTS": events},
        "timeoutSecs": timeout_secs,
    })
}

/// pid -> (parent pid, command line) of every process visible in /proc.
pub fn processes() -> Vec<(u32, u32, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let (Ok(stat), Ok(cmd)) = (
            std::fs::read_to_string(entry.path().join("stat")),
            std::fs::read(entry.path().join("cmdline")),
        ) else {
            continue;
        };
        // Field 4 of stat, after the parenthesised command name; zombies count as gone.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r.to_owned()) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.first() == Some(&"Z") {
            continue;
        }
        let Some(ppid) = fields.get(1).and_then(|p| p.parse().ok()) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        out.push((pid, ppid, cmd));
    }
    out
}

/// Live processes whose command line contains `needle`.
pub fn processes_with(needle: &str) -> Vec<u32> {
    processes()
        .into_iter()
        .filter(|(_, _, cmd)| cmd.contains(needle))
        .map(|(pid, _, _)| pid)
        .collect()
}

/// Live direct children of `pid`: the upstreams it started (its guardian is not one).
pub fn children_of(pid: u32) -> Vec<u32> {
    processes()
        .into_iter()
        .filter(|(_, ppid, cmd)| *ppid == pid && !is_guardian(cmd))
        .map(|(pid, _, _)| pid)
        .collect()
}

/// Whether a command line is meta-server's guardian (`meta-server __guard`).
pub fn is_guardian(cmd: &str) -> bool {
    cmd.starts_with(BIN) && cmd.trim_end().ends_with(" __guard")
}

/// Polls an eventual condition; fails after a generous limit so a bug cannot hang the suite.
pub fn wait_until<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + REPLY_LIMIT;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
