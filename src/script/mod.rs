//! Code Mode: a model-written JavaScript program run in a fresh QuickJS sandbox, whose only way
//! out is a [`Host`] (tool calls, search, descriptions) that the server supplies.
//!
//! A script runs on a runner thread of its own (see [`runner`]), never on a worker of the
//! server's runtime, so nothing a script does holds up another request; its nested calls run on
//! the server's runtime. Each run gets a fresh QuickJS runtime, so nothing survives from one to
//! the next. Limits on time, memory (the script's heap and what it holds on the host side),
//! stack, calls and lookups end the script with a [`ScriptError`] saying which limit and what
//! to do; scripts running at once are capped per process and per principal ([`admit`]).
//!
//! How a limit stops a script: QuickJS asks the interrupt handler every 10,000 steps, the
//! allocator looks at the clock every 256 KiB or so, the API functions look at entry, and the
//! job loop ([`sandbox`]) between jobs. Once stopped, no job runs again, and the runtime's
//! stack limit is squeezed to nothing: every function call, native or not, and every parse
//! throws at once, so a built-in under way (say a `JSON.parse` of megabytes) is the last work
//! done before QuickJS's uncatchable "interrupted" error ends the script. (Refusing every
//! allocation instead would do the same, but QuickJS's compiler does not survive a refused
//! allocation everywhere: `resolve_labels` writes through a buffer that failed to grow.) A
//! native call that neither allocates nor steps (a quadratic `indexOf` of a long needle in a
//! long string) cannot be stopped from inside: the report is then sent [`ABANDON_AFTER`] past
//! the limit anyway, and the runner thread, at the lowest priority, finishes the call on its
//! own, holding its slot until then.

mod admit;
mod memory;
mod runner;
mod sandbox;
pub mod typescript;

use crate::clock::Instant;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

pub use admit::{Slot, admit};

use rmcp::model::CallToolResult;
use serde::Serialize;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

/// Why a nested call or a host question gives the script no value: the message of the
/// `Error` its promise is rejected with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct Rejection(pub String);

impl From<String> for Rejection {
    fn from(message: String) -> Self {
        Self(message)
    }
}

impl From<&str> for Rejection {
    fn from(message: &str) -> Self {
        Self(message.to_owned())
    }
}

/// A future the host hands to the sandbox; it runs on the server's runtime.
pub type HostFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// What a script can reach beyond its sandbox: implemented by the server, so every nested call
/// takes the same path as a client's own call.
pub trait Host: Send + Sync + 'static {
    /// Calls tool `name` (qualified) with `arguments`; the result has been through result
    /// handling like any result a client receives.
    fn call(&self, name: String, arguments: Map<String, Value>) -> HostFuture<CallToolResult>;
    /// What `search_tools {query, limit}` returns (its structured content), or its error.
    fn search(&self, query: String, limit: Option<u32>) -> HostFuture<Result<Value, Rejection>>;
    /// The full definition of one tool, as `get_tool_details` gives it, or why there is none.
    fn describe(&self, name: String) -> HostFuture<Result<Value, Rejection>>;
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
/// What a run may hold on the host side at once: arguments and names of its calls, its search
/// queries and tool names to describe, results it has not taken yet, its console output.
const HOST_BYTES: usize = 32 << 20;
/// `tools.search` and `tools.describe` requests a script may make in all.
const MAX_LOOKUPS: usize = 100;
/// Characters of a tool name a call record keeps (the house convention for echoed input).
const RECORD_NAME_CHARS: usize = 200;
/// How long past its limit (or the client's cancellation) a run may take to report before its
/// report is made without it: only a native call that QuickJS cannot interrupt takes longer.
const ABANDON_AFTER: Duration = Duration::from_secs(1);
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
    #[error(
        "the script ran out of memory on the host side (limit {mib} MiB for the arguments of calls not yet answered, search queries, names to describe and results not yet taken) and was stopped; await calls before starting many more, and pass smaller arguments"
    )]
    HostMemory { mib: usize },
    #[error("the script overflowed its stack (recursion too deep) and was stopped")]
    Stack,
    #[error(
        "the script tried to start more than max_calls = {max} tool calls and was stopped; raise max_calls (at most 1000) or call fewer tools"
    )]
    Calls { max: usize },
    #[error(
        "the script made more than {max} tools.search and tools.describe requests (the limit per run) and was stopped; search once with a broader query, and describe only the tools you call"
    )]
    Lookups { max: usize },
    #[error(transparent)]
    Busy(admit::Full),
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
    /// A report of a run that never started.
    pub fn failed(error: ScriptError) -> Self {
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
    HostMemory,
    Calls,
    Lookups,
    Cancelled,
}

/// Bytes the allocator grants past the memory limit each time the interrupt handler stops the
/// script: enough for QuickJS's uncatchable "interrupted" error (a backtrace that does not fit
/// is left out). Without the error object the interrupt would throw a catchable `null`, and a
/// script holding all its memory could catch it forever.
const GRACE_BYTES: usize = 16 << 10;
/// The stack limit of a stopped run: less than any call needs.
const SQUEEZED_STACK: rquickjs::qjs::size_t = 1;

/// Shared between the run, QuickJS's interrupt handler, the allocator and the API functions.
#[derive(Default)]
struct Control {
    reason: OnceLock<Stop>,
    stopped: CancellationToken,
    /// Set with the reason; what the allocator reads on every allocation.
    halted: AtomicBool,
    /// Set once the run is over: the runtime is left as it is, to be torn down.
    ended: AtomicBool,
    /// The run's QuickJS runtime, whose stack limit the script's own thread squeezes once the
    /// run is stopped (see the module docs).
    runtime: std::sync::atomic::AtomicPtr<rquickjs::qjs::JSRuntime>,
    squeezed: AtomicBool,
    /// What the allocator still grants past the limit (see [`GRACE_BYTES`]).
    grace: AtomicUsize,
    /// Set when the run starts, as is the caller's cancellation.
    deadline: OnceLock<Instant>,
    cancelled: OnceLock<CancellationToken>,
    /// The runner running the script, to lower its priority when its run is abandoned.
    runner: std::sync::Mutex<Runner>,
}

/// The runner thread of a run, while it runs the run, and whether the run was abandoned.
#[derive(Default)]
struct Runner {
    /// Its thread id (Linux).
    thread: Option<i32>,
    abandoned: bool,
}

impl Control {
    fn stop(&self, reason: Stop) {
        let _ = self.reason.set(reason);
        self.halted.store(true, Ordering::Release);
        self.stopped.cancel();
    }

    fn halted(&self) -> bool {
        self.halted.load(Ordering::Acquire)
    }

    /// On the script's own thread, while it runs: once the run is stopped, squeezes the stack
    /// limit so that every call throws. Whether the run is stopped.
    fn squeeze(&self) -> bool {
        if !self.halted() {
            return false;
        }
        if !self.squeezed.swap(true, Ordering::AcqRel) && !self.ended.load(Ordering::Acquire) {
            let runtime = self.runtime.load(Ordering::Acquire);
            if !runtime.is_null() {
                // SAFETY: the runtime outlives its control's use on its own thread (sandbox
                // teardown sets `ended` first); this only sets its stack limit fields.
                unsafe { rquickjs::qjs::JS_SetMaxStackSize(runtime, SQUEEZED_STACK) };
            }
        }
        true
    }

    /// On the script's own thread: whether the run is stopped, after stopping it if its time
    /// is up or the client cancelled (and squeezing the stack if so).
    fn check(&self) -> bool {
        if self.halted() {
            return self.squeeze();
        }
        if self.deadline.get().is_some_and(|d| Instant::now() >= *d) {
            self.stop(Stop::Deadline);
        } else if self
            .cancelled
            .get()
            .is_some_and(CancellationToken::is_cancelled)
        {
            self.stop(Stop::Cancelled);
        }
        self.squeeze()
    }

    /// The interrupt handler, called by QuickJS as the script runs: whether to stop it now.
    /// When it says so, QuickJS makes an uncatchable error, which the allocator lets through.
    fn interrupted(&self) -> bool {
        let stop = self.check();
        if stop {
            self.grace.store(GRACE_BYTES, Ordering::Relaxed);
        }
        stop
    }

    /// Takes `bytes` from the grace, if they fit.
    fn graced(&self, bytes: usize) -> bool {
        self.grace
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                left.checked_sub(bytes)
            })
            .is_ok()
    }

    fn error(&self, limits: &Limits) -> Option<ScriptError> {
        Some(match self.reason.get()? {
            Stop::Deadline => ScriptError::Timeout {
                ms: limits.timeout.as_millis() as u64,
            },
            Stop::Memory => ScriptError::Memory {
                mib: MEMORY_BYTES >> 20,
            },
            Stop::HostMemory => ScriptError::HostMemory {
                mib: HOST_BYTES >> 20,
            },
            Stop::Calls => ScriptError::Calls {
                max: limits.max_calls,
            },
            Stop::Lookups => ScriptError::Lookups { max: MAX_LOOKUPS },
            Stop::Cancelled => ScriptError::Cancelled,
        })
    }

    /// The run is over: nothing squeezes its stack any more, and the runtime is torn down.
    fn end(&self) {
        self.ended.store(true, Ordering::Release);
    }

    /// Marks the run abandoned and lowers its runner thread, if it still runs it, to the
    /// lowest priority: the run is stuck in a native call and may compute for long yet. The
    /// runner ends when done rather than serve another run.
    fn abandon(&self) {
        let mut runner = self
            .runner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        runner.abandoned = true;
        #[cfg(target_os = "linux")]
        if let Some(thread) = runner.thread {
            // SAFETY: setpriority only changes the scheduling weight of that thread.
            unsafe {
                libc::setpriority(libc::PRIO_PROCESS, thread as libc::id_t, 19);
            }
        }
    }

    /// Notes the runner thread `thread` as running the run (`Some`) or done with it (`None`);
    /// when done, whether the run was abandoned.
    fn ran_by(&self, thread: Option<i32>) -> bool {
        let mut runner = self
            .runner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        runner.thread = thread;
        runner.abandoned
    }
}

/// Runs `code` as the body of an async function with `input` as a global, until it returns,
/// fails, hits a limit or `cancelled` fires. The script runs on a runner thread; its nested
/// calls run on the current tokio runtime, so this must be called within one. `slot` (see
/// [`admit`]) is held until the runner is done with the run, which for a run abandoned in a
/// long native call is after the report.
pub async fn run(
    host: Arc<dyn Host>,
    code: String,
    input: Value,
    limits: Limits,
    cancelled: CancellationToken,
    slot: Slot,
) -> Report {
    let sandbox = match sandbox::Sandbox::take().await {
        Ok(sandbox) => sandbox,
        Err(e) => return Report::failed(e),
    };
    let control = sandbox.control();
    let shared = sandbox.shared();
    let deadline = Instant::now() + limits.timeout;
    let job = sandbox::Job {
        host,
        code,
        input,
        limits: limits.clone(),
        cancelled: cancelled.clone(),
        server: tokio::runtime::Handle::current(),
    };
    let (reported, report) = tokio::sync::oneshot::channel();
    // Unconstrained: with its budget spent, tokio's `select!` returns before polling its
    // branches, and the run's wait for the host would miss the one wake it counts on (see
    // `Sandbox::wait`). The runner's runtime has this one future, so it yields to nobody.
    let work = move |runtime: &tokio::runtime::Runtime| {
        let run = tokio::task::coop::unconstrained(sandbox.run(job, slot));
        let _ = reported.send(runtime.block_on(run));
    };
    if let Err(e) = runner::submit(Box::new(work), control.clone()) {
        return Report::failed(e);
    }
    // A caller that stops waiting (its request dropped) stops the script.
    let mut dropped = StopOnDrop(Some(control.clone()));
    let late = async {
        tokio::select! {
            () = tokio::time::sleep_until(deadline) => {}
            () = cancelled.cancelled() => {}
            () = control.stopped.cancelled() => {}
        }
        tokio::time::sleep(ABANDON_AFTER).await;
    };
    let report = tokio::select! {
        report = report => report.ok(),
        () = late => None,
    };
    dropped.0 = None;
    report.unwrap_or_else(|| {
        // The runner is stuck in a native call (or gone): report what is known without it.
        control.stop(if cancelled.is_cancelled() {
            Stop::Cancelled
        } else {
            Stop::Deadline
        });
        control.abandon();
        shared.abort_tasks();
        tracing::warn!("a script ran on past its limit in a native call; reported without it");
        let (logs, calls) = shared.finish();
        let outcome = control.error(&limits).unwrap_or(ScriptError::Cancelled);
        Report {
            outcome: Err(outcome),
            logs,
            calls,
        }
    })
}

/// Stops the run when dropped while armed: its caller no longer waits for it.
struct StopOnDrop(Option<Arc<Control>>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if let Some(control) = &self.0 {
            control.stop(Stop::Cancelled);
        }
    }
}

/// What `tools.call` resolves to: the result's `structuredContent`, else its text parsed as
/// JSON when it is JSON, else its text; a result without text gives its content blocks. An
/// error result is `Err` with its text.
pub fn script_value(result: &CallToolResult) -> Result<Value, Rejection> {
    let texts: Vec<&str> = result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|t| t.text.as_str()))
        .collect();
    let text = texts.join("\n");
    if result.is_error == Some(true) {
        return Err(Rejection(if text.is_empty() {
            "the tool reported an error without a message".into()
        } else {
            text
        }));
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
