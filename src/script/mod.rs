//! Code Mode: a model-written JavaScript program run in a fresh QuickJS sandbox, whose only way
//! out is a [`Host`] (tool calls, search, descriptions) that the server supplies.
//!
//! A script runs on the request's own task; one that computes for long hands its worker's other
//! tasks to a new worker thread, so it holds up nothing else. Each run gets a fresh QuickJS
//! runtime, so nothing survives from one to the next. Limits on time, memory,
//! stack and calls end the script with a [`ScriptError`] saying which limit and what to do.

mod memory;
mod sandbox;
pub mod typescript;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rmcp::model::CallToolResult;
use serde::Serialize;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

/// A future the host hands to the sandbox; it runs on the server's runtime.
pub type HostFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// What a script can reach beyond its sandbox: implemented by the server, so every nested call
/// takes the same path as a client's own call.
pub trait Host: Send + Sync + 'static {
    /// Calls tool `name` (qualified) with `arguments`; the result has been through result
    /// handling like any result a client receives.
    fn call(&self, name: String, arguments: Map<String, Value>) -> HostFuture<CallToolResult>;
    /// What `search_tools {query, limit}` returns (its structured content), or its error.
    fn search(&self, query: String, limit: Option<u32>) -> HostFuture<Result<Value, String>>;
    /// The full definition of one tool, as `get_tool_details` gives it, or why there is none.
    fn describe(&self, name: String) -> HostFuture<Result<Value, String>>;
}

/// Limits of one run that its caller chooses.
#[derive(Debug, Clone)]
pub struct Limits {
    pub timeout: Duration,
    /// Tool calls a script may start in all.
    pub max_calls: usize,
    /// Tool calls running at once; more wait for a free slot.
    pub in_flight: usize,
}

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
const DEFAULT_MAX_CALLS: usize = 50;
/// Memory of every run's runtime.
const MEMORY_BYTES: usize = 64 << 20;
/// Stack QuickJS may use in every run.
const STACK_BYTES: usize = 512 << 10;

impl Default for Limits {
    fn default() -> Self {
        Self {
            timeout: DEFAULT_TIMEOUT,
            max_calls: DEFAULT_MAX_CALLS,
            in_flight: 8,
        }
    }
}

/// One nested tool call, as the result reports it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CallRecord {
    pub name: String,
    pub ms: u64,
    pub ok: bool,
}

/// Why a script did not return a value. Each message says what to do next.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum ScriptError {
    #[error(
        "the script ran past its time limit of {ms} ms and was stopped; do less per run or raise timeout_ms (at most 300000)"
    )]
    Timeout { ms: u64 },
    #[error(
        "the script ran out of memory (limit {mib} MiB) and was stopped; keep less in memory, e.g. reduce each tool result to the fields you need as it arrives"
    )]
    Memory { mib: usize },
    #[error("the script overflowed its stack (recursion too deep) and was stopped")]
    Stack,
    #[error(
        "the script tried to start more than max_calls = {max} tool calls and was stopped; raise max_calls (at most 1000) or call fewer tools"
    )]
    Calls { max: usize },
    #[error("the script was cancelled by the client")]
    Cancelled,
    #[error("the script does not parse: {0}")]
    Syntax(String),
    #[error("the script threw an uncaught error: {0}")]
    Thrown(String),
    #[error(
        "the script's return value cannot be sent as JSON ({0}); return plain objects, arrays, strings, numbers, booleans or null"
    )]
    NotJson(String),
    #[error("the sandbox failed: {0}")]
    Sandbox(String),
}

/// What a run produced: the returned value or why there is none, the console output and the
/// nested calls, in the order they were started.
#[derive(Debug)]
pub struct Report {
    pub outcome: Result<Value, ScriptError>,
    pub logs: Vec<String>,
    pub calls: Vec<CallRecord>,
}

impl Report {
    fn failed(error: ScriptError) -> Self {
        Self {
            outcome: Err(error),
            logs: Vec::new(),
            calls: Vec::new(),
        }
    }
}

/// Why the sandbox was told to stop. The first reason set wins.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Stop {
    Deadline,
    Memory,
    Calls,
    Cancelled,
}

/// Shared between the run and QuickJS's interrupt handler.
#[derive(Default)]
struct Control {
    reason: OnceLock<Stop>,
    stopped: CancellationToken,
    /// Set when the run starts, as is the caller's cancellation.
    deadline: OnceLock<std::time::Instant>,
    cancelled: OnceLock<CancellationToken>,
    /// When the poll of the script now under way began; `None` between polls.
    polled: std::sync::Mutex<Option<std::time::Instant>>,
}

impl Control {
    fn stop(&self, reason: Stop) {
        let _ = self.reason.set(reason);
        self.stopped.cancel();
    }

    fn error(&self, limits: &Limits) -> Option<ScriptError> {
        Some(match self.reason.get()? {
            Stop::Deadline => ScriptError::Timeout {
                ms: limits.timeout.as_millis() as u64,
            },
            Stop::Memory => ScriptError::Memory {
                mib: MEMORY_BYTES >> 20,
            },
            Stop::Calls => ScriptError::Calls {
                max: limits.max_calls,
            },
            Stop::Cancelled => ScriptError::Cancelled,
        })
    }
}

/// Runs `code` as the body of an async function with `input` as a global, until it returns,
/// fails, hits a limit or `cancelled` fires. Runs on the caller's task: must be called within a
/// tokio runtime, where the host's futures run too.
pub async fn run(
    host: Arc<dyn Host>,
    code: String,
    input: Value,
    limits: Limits,
    cancelled: CancellationToken,
) -> Report {
    let sandbox = match sandbox::Sandbox::take().await {
        Ok(sandbox) => sandbox,
        Err(e) => return Report::failed(e),
    };
    let job = sandbox::Job {
        host,
        code,
        input,
        limits,
        cancelled,
    };
    sandbox.run(job).await
}

/// What `tools.call` resolves to: the result's `structuredContent`, else its text parsed as
/// JSON when it is JSON, else its text; a result without text gives its content blocks. An
/// error result is `Err` with its text.
pub fn script_value(result: &CallToolResult) -> Result<Value, String> {
    let texts: Vec<&str> = result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|t| t.text.as_str()))
        .collect();
    let text = texts.join("\n");
    if result.is_error == Some(true) {
        return Err(if text.is_empty() {
            "the tool reported an error without a message".into()
        } else {
            text
        });
    }
    if let Some(structured) = &result.structured_content {
        return Ok(structured.clone());
    }
    if texts.is_empty() {
        return Ok(serde_json::to_value(&result.content).unwrap_or(Value::Null));
    }
    Ok(serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

#[cfg(test)]
mod tests;
