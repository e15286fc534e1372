//! The QuickJS side of a run: a fresh runtime with memory, stack and time limits, the script
//! API (`tools`, `console`), and the script as an async function, run by a runner thread.
//!
//! A keeper thread readies each sandbox before it is needed and tears it down after: a run
//! takes the ready one (or readies its own when runs overlap), runs on a runner thread (see
//! [`super::runner`]) and hands it back. So a run seldom pays for a runtime on its way, and no
//! runtime ever serves two runs.
//!
//! The script runs in a job loop of its own rather than rquickjs's `async_with`, which runs
//! every pending job before it returns: microtasks that keep queuing more would never let it
//! return, and a stop would never be seen. Here the loop runs one job at a time and looks at
//! the stop between jobs; once stopped, no job runs again.

use crate::clock::Instant;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::task::Poll;

use rquickjs::context::{EvalOptions, intrinsic};
use rquickjs::{
    AsyncContext, AsyncRuntime, CatchResultExt, CaughtError, Ctx, Exception, Function, Promise,
    Value as JsValue, qjs,
};
use serde_json::Value;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use super::{
    CallRecord, Control, HOST_BYTES, Host, Limits, MAX_LOOKUPS, MEMORY_BYTES, RECORD_NAME_CHARS,
    Rejection, Report, STACK_BYTES, ScriptError, Slot, Stop, script_value,
};
use crate::surrogates::from_json;

mod api;
mod keeper;

use api::{install, within};
use keeper::{Chore, SPARE, keeper};

/// Console output kept per run; later lines are counted, not kept.
const MAX_LOG_BYTES: usize = 256 << 10;
/// Jobs run between two looks at the clock and the client's cancellation (the stop itself is
/// seen after every job).
const JOBS_PER_CHECK: u32 = 32;

/// What a run needs from its caller.
pub(super) struct Job {
    pub host: Arc<dyn Host>,
    pub code: String,
    pub input: Value,
    pub limits: Limits,
    pub cancelled: CancellationToken,
    /// The server's runtime, where nested calls run.
    pub server: tokio::runtime::Handle,
}

/// A sandbox for one run: its runtime, context and the API installed, waiting for the code and
/// input.
pub(super) struct Sandbox {
    shared: Arc<Shared>,
    /// Holds the runtime: dropping it frees both, and the futures of unfinished calls.
    context: AsyncContext,
}

/// `mutex` locked, whether or not a panic poisoned it.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// State the API functions share with the run.
pub(super) struct Shared {
    control: Arc<Control>,
    /// The run's host and call limits, from its job.
    job: OnceLock<Bound>,
    logs: Mutex<Logs>,
    calls: Mutex<Vec<Call>>,
    /// What the script holds on the host side.
    purse: Purse,
    /// `tools.search` and `tools.describe` requests made.
    lookups: AtomicUsize,
    /// The host's tasks for this run on the server's runtime, aborted when the run ends.
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
    /// What the script's promise settled to, once it has.
    outcome: Mutex<Option<Result<Value, ScriptError>>>,
    settled: AtomicBool,
}

struct Bound {
    host: Arc<dyn Host>,
    server: tokio::runtime::Handle,
    max_calls: usize,
    /// Calls running at once.
    slots: Semaphore,
    /// Searches and descriptions running at once.
    lookup_slots: Semaphore,
}

#[derive(Default)]
struct Logs {
    lines: Vec<String>,
    bytes: usize,
    dropped: usize,
}

struct Call {
    /// The tool's name as the record shows it (capped).
    name: String,
    started: Instant,
    /// Milliseconds and success, once the call returned.
    ended: Option<(u64, bool)>,
}

/// The count of bytes a script holds on the host side, against [`HOST_BYTES`]; cloned into the
/// host's tasks, which count their answers before the script takes them.
#[derive(Clone)]
struct Purse {
    held: Arc<AtomicUsize>,
    control: Arc<Control>,
}

impl Purse {
    /// Counts `bytes` more held on the host side; past the budget the script is stopped and
    /// `None` returned.
    fn hold(&self, bytes: usize) -> Option<Hold> {
        let before = self.held.fetch_add(bytes, Ordering::Relaxed);
        if before.saturating_add(bytes) > HOST_BYTES {
            self.held.fetch_sub(bytes, Ordering::Relaxed);
            self.control.stop(Stop::HostMemory);
            return None;
        }
        Some(Hold {
            held: self.held.clone(),
            bytes,
        })
    }

    /// Whether a JavaScript string of `length` UTF-16 units may still be copied to the host
    /// (its UTF-8 is at least as long); when not, the script is stopped.
    fn fits(&self, length: usize) -> bool {
        let fits = self
            .held
            .load(Ordering::Relaxed)
            .checked_add(length)
            .is_some_and(|n| n <= HOST_BYTES);
        if !fits {
            self.control.stop(Stop::HostMemory);
        }
        fits
    }

    /// The answer to give the script, counted until the script has taken it.
    fn answer(&self, value: Result<Value, Rejection>) -> Result<Answer, Rejection> {
        let json = value?.to_string();
        match self.hold(json.len()) {
            Some(hold) => Ok(Answer { json, _hold: hold }),
            None => Err("the script holds too much on the host side".into()),
        }
    }
}

/// Bytes counted against the run's host budget for as long as this lives.
struct Hold {
    held: Arc<AtomicUsize>,
    bytes: usize,
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.held.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// JSON text of an answer for the script, counted until the script has it.
struct Answer {
    json: String,
    _hold: Hold,
}

impl Shared {
    fn hold(&self, bytes: usize) -> Option<Hold> {
        self.purse.hold(bytes)
    }

    fn fits(&self, length: usize) -> bool {
        self.purse.fits(length)
    }

    /// Records a call the script starts, at once, so the cap holds even for calls it never
    /// awaits. Past `max_calls` the script is stopped and `None` returned.
    fn start_call(&self, name: &str) -> Option<usize> {
        let max_calls = self.job.get().map_or(0, |job| job.max_calls);
        let mut calls = lock(&self.calls);
        if calls.len() >= max_calls {
            self.control.stop(Stop::Calls);
            return None;
        }
        calls.push(Call {
            name: record_name(name),
            started: Instant::now(),
            ended: None,
        });
        Some(calls.len() - 1)
    }

    /// Counts a search or description; past [`MAX_LOOKUPS`] the script is stopped.
    fn start_lookup(&self) -> bool {
        if self.lookups.fetch_add(1, Ordering::Relaxed) >= MAX_LOOKUPS {
            self.control.stop(Stop::Lookups);
            return false;
        }
        true
    }

    /// Runs `work` on the server's runtime as a task of this run: aborted when the run ends,
    /// or when the script's side stops waiting for it (its sandbox torn down).
    fn spawn<T: Send + 'static>(
        &self,
        job: &Bound,
        work: impl Future<Output = T> + Send + 'static,
    ) -> AbortOnDropHandle<T> {
        let task = job.server.spawn(work);
        lock(&self.tasks).push(task.abort_handle());
        AbortOnDropHandle::new(task)
    }

    /// `tools.call`: the call's answer, or its error. A call past the cap never answers.
    /// `hold` counts the name and arguments until the call has returned.
    async fn call(
        self: Arc<Self>,
        index: Option<usize>,
        name: String,
        args: String,
        hold: Hold,
    ) -> Result<Answer, Rejection> {
        let (Some(index), Some(job)) = (index, self.job.get()) else {
            return std::future::pending().await;
        };
        let outcome = match job.slots.acquire().await {
            Ok(_slot) => {
                lock(&self.calls)[index].started = Instant::now();
                match from_json(&args) {
                    Ok(Value::Object(arguments)) => {
                        drop(args);
                        let call = job.host.call(name, arguments);
                        let purse = self.purse.clone();
                        let called = self.spawn(job, async move {
                            let result = call.await;
                            drop(hold);
                            purse.answer(script_value(&result))
                        });
                        called.await.unwrap_or_else(|e| {
                            Err(format!("the call failed inside meta-server: {e}").into())
                        })
                    }
                    _ => Err("arguments must be a JSON object".into()),
                }
            }
            Err(_) => Err("the script is ending".into()),
        };
        let call = &mut lock(&self.calls)[index];
        call.ended = Some((millis(call.started), outcome.is_ok()));
        outcome
    }

    /// Runs a host question (a search or description) on the server's runtime; `hold` counts
    /// what it was asked until it is answered.
    async fn ask(
        self: Arc<Self>,
        hold: Hold,
        question: impl FnOnce(&dyn Host) -> super::HostFuture<Result<Value, Rejection>>,
    ) -> Result<Answer, Rejection> {
        let Some(job) = self.job.get() else {
            return Err("the sandbox has no run".into());
        };
        let Ok(_slot) = job.lookup_slots.acquire().await else {
            return Err("the script is ending".into());
        };
        let asked = question(job.host.as_ref());
        let purse = self.purse.clone();
        let answered = self.spawn(job, async move {
            let value = asked.await;
            drop(hold);
            purse.answer(value)
        });
        answered
            .await
            .unwrap_or_else(|e| Err(format!("failed inside meta-server: {e}").into()))
    }

    /// Room left for console output, in bytes; with none left the line is counted as dropped.
    fn log_room(&self) -> usize {
        let mut logs = lock(&self.logs);
        let room = MAX_LOG_BYTES.saturating_sub(logs.bytes);
        if room == 0 {
            logs.dropped += 1;
        }
        room
    }

    fn log(&self, level: &str, line: Option<String>) {
        let mut logs = lock(&self.logs);
        let Some(line) = line else {
            logs.dropped += 1;
            return;
        };
        let line = match level {
            "warn" | "error" => format!("{level}: {line}"),
            _ => line,
        };
        if logs.bytes + line.len() > MAX_LOG_BYTES {
            logs.dropped += 1;
            return;
        }
        logs.bytes += line.len();
        // Kept until the report: counted on the host side for good.
        self.purse.held.fetch_add(line.len(), Ordering::Relaxed);
        logs.lines.push(line);
    }

    fn settle(&self, outcome: Result<Value, ScriptError>) {
        let mut settled = lock(&self.outcome);
        if settled.is_none() {
            *settled = Some(outcome);
            self.settled.store(true, Ordering::Release);
        }
    }

    fn settled(&self) -> bool {
        self.settled.load(Ordering::Acquire)
    }

    /// Ends the host's tasks of this run that are still going.
    pub(super) fn abort_tasks(&self) {
        for task in lock(&self.tasks).drain(..) {
            task.abort();
        }
    }

    /// The console output and the call records as the report gives them; calls still running
    /// count as failed, with the time they had run.
    pub(super) fn finish(&self) -> (Vec<String>, Vec<CallRecord>) {
        let mut logs = std::mem::take(&mut *lock(&self.logs));
        if logs.dropped > 0 {
            logs.lines.push(format!(
                "[{} more lines dropped: console output is kept up to {} KiB]",
                logs.dropped,
                MAX_LOG_BYTES >> 10
            ));
        }
        let calls = lock(&self.calls)
            .iter()
            .map(|c| {
                let (ms, ok) = c.ended.unwrap_or((millis(c.started), false));
                CallRecord {
                    name: c.name.clone(),
                    ms,
                    ok,
                }
            })
            .collect();
        (logs.lines, calls)
    }
}

/// A tool's name as a call record keeps it: whole up to [`RECORD_NAME_CHARS`] characters,
/// else its start and how long it was (as results echo client input).
fn record_name(name: &str) -> String {
    match name.char_indices().nth(RECORD_NAME_CHARS) {
        None => name.to_owned(),
        Some((end, _)) => format!("{}… ({} characters)", &name[..end], name.chars().count()),
    }
}

fn millis(since: Instant) -> u64 {
    since.elapsed().as_millis() as u64
}

/// The built-ins besides the base objects (`Object`, `Function`, `Array`, `String`, `Number`,
/// `Boolean`, `Symbol`, `BigInt`, the errors, iterators and generators, `Math`, `Reflect`):
/// what data-handling scripts use. Left out, as they cost a third of each fresh context: typed
/// arrays and `ArrayBuffer`, `Proxy`, `WeakRef`, and the web extras (`atob`, `btoa`,
/// `performance`). `Eval` lets the script itself be evaluated.
type Builtins = (
    intrinsic::Eval,
    intrinsic::Json,
    intrinsic::Promise,
    intrinsic::RegExp,
    intrinsic::Date,
    intrinsic::MapSet,
);

impl Sandbox {
    /// A fresh runtime (memory budget, stack limit, interrupt handler) and a context with the
    /// [`Builtins`] and the script API.
    async fn prepare() -> Result<Self, ScriptError> {
        let sandbox = |e: rquickjs::Error| ScriptError::Sandbox(e.to_string());
        let control = Arc::new(Control::default());
        let budget = super::memory::Budget::new(MEMORY_BYTES, control.clone());
        let runtime = AsyncRuntime::new_with_alloc(budget).map_err(sandbox)?;
        runtime.set_max_stack_size(STACK_BYTES).await;
        let watch = control.clone();
        runtime
            .set_interrupt_handler(Some(Box::new(move || watch.interrupted())))
            .await;
        let context = AsyncContext::custom::<Builtins>(&runtime)
            .await
            .map_err(sandbox)?;
        let shared = Arc::new(Shared {
            purse: Purse {
                held: Arc::default(),
                control: control.clone(),
            },
            control,
            job: OnceLock::new(),
            logs: Mutex::default(),
            calls: Mutex::default(),
            lookups: AtomicUsize::new(0),
            tasks: Mutex::default(),
            outcome: Mutex::default(),
            settled: AtomicBool::new(false),
        });
        let installed = context
            .with(|ctx| {
                // SAFETY: the context is live; its runtime lives as long as the sandbox.
                let runtime = unsafe { qjs::JS_GetRuntime(ctx.as_raw().as_ptr()) };
                shared.control.runtime.store(runtime, Ordering::Release);
                install(&ctx, &shared)
            })
            .await;
        installed.map_err(sandbox)?;
        Ok(Self { shared, context })
    }

    /// The spare, or a sandbox readied here when there is none; either way the keeper readies
    /// the next.
    pub(super) async fn take() -> Result<Self, ScriptError> {
        let spare = lock(&SPARE).take();
        keeper(Chore::Refill);
        match spare {
            Some(sandbox) => Ok(sandbox),
            None => Self::prepare().await,
        }
    }

    pub(super) fn control(&self) -> Arc<Control> {
        self.shared.control.clone()
    }

    pub(super) fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// Runs the job to its report, within a tokio runtime of the runner's own; the sandbox
    /// and `slot` go to the keeper, to be torn down and freed.
    pub(super) async fn run(self, job: Job, slot: Slot) -> Report {
        let Job {
            host,
            code,
            input,
            limits,
            cancelled,
            server,
        } = job;
        let shared = self.shared.clone();
        let control = shared.control.clone();
        let _ = control.deadline.set(Instant::now() + limits.timeout);
        let _ = control.cancelled.set(cancelled);
        let _ = shared.job.set(Bound {
            host,
            server,
            max_calls: limits.max_calls,
            slots: Semaphore::new(limits.in_flight),
            lookup_slots: Semaphore::new(limits.in_flight),
        });
        let started = self
            .context
            .with(|ctx| start(&ctx, &shared, &code, &input))
            .await;
        if let Err(e) = started {
            shared.settle(Err(e));
        }
        self.drive().await;
        // No job runs again: what the host still does for the script ends now, and the stack
        // limit is the usual one again for the teardown.
        shared.abort_tasks();
        control.end();
        self.context.runtime().set_max_stack_size(STACK_BYTES).await;
        let (logs, calls) = shared.finish();
        // A limit hit wins over whatever the script did after it.
        let outcome = match (control.error(&limits), lock(&shared.outcome).take()) {
            (Some(limit), _) => Err(limit),
            (None, Some(outcome)) => outcome,
            (None, None) => Err(ScriptError::Sandbox("stopped without a reason".into())),
        };
        keeper(Chore::Free(self, slot));
        Report {
            outcome,
            logs,
            calls,
        }
    }

    /// Runs the script's jobs one at a time until its promise settles or the run is stopped,
    /// waiting for the host's answers when there is nothing to run.
    async fn drive(&self) {
        let runtime = self.context.runtime().clone();
        let shared = &self.shared;
        let control = &shared.control;
        let mut jobs: u32 = 0;
        loop {
            if shared.settled() || control.halted() {
                return;
            }
            jobs = jobs.wrapping_add(1);
            if jobs.is_multiple_of(JOBS_PER_CHECK) && control.check() {
                return;
            }
            match runtime.execute_pending_job().await {
                Ok(true) => {}
                // A job threw (a microtask's uncaught error): clear it, as a browser reports
                // and goes on.
                Err(failed) => {
                    failed
                        .0
                        .with(|ctx| {
                            let _ = ctx.catch();
                        })
                        .await;
                }
                Ok(false) => {
                    if shared.settled() || control.check() {
                        return;
                    }
                    self.wait().await;
                }
            }
        }
    }

    /// Waits for the host to answer (the scheduler of the script's futures wakes this task),
    /// for the deadline or for the client's cancellation. Sound only when this is first polled
    /// in the same poll of the task as the job loop's last poll of the scheduler, so never
    /// under a coop budget (see [`super::run`]).
    async fn wait(&self) {
        let control = &self.shared.control;
        let deadline = control.deadline.get().copied();
        let cancelled = control.cancelled.get().cloned().unwrap_or_default();
        let mut woken = false;
        tokio::select! {
            biased;
            () = control.stopped.cancelled() => {}
            () = cancelled.cancelled() => control.stop(Stop::Cancelled),
            () = async {
                match deadline {
                    Some(deadline) => tokio::time::sleep_until(deadline).await,
                    None => std::future::pending().await,
                }
            } => control.stop(Stop::Deadline),
            // Pending at first: the job loop's last poll registered this task's waker with
            // the scheduler of the script's futures.
            () = std::future::poll_fn(|_| {
                if std::mem::replace(&mut woken, true) {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            }) => {}
        }
    }
}

/// Sets `input`, evaluates the script and has its promise settle `shared`'s outcome: the
/// returned value as JSON, or why there is none.
fn start<'js>(
    ctx: &Ctx<'js>,
    shared: &Arc<Shared>,
    code: &str,
    input: &Value,
) -> Result<(), ScriptError> {
    let input = ctx
        .json_parse(input.to_string())
        .and_then(|value| ctx.globals().set("input", value));
    input.map_err(|e| ScriptError::Sandbox(format!("cannot set input: {e}")))?;
    // One line, so the script's line numbers in errors are its own.
    let source = format!("(async () => {{{code}\n}})()");
    let mut options = EvalOptions::default();
    options.strict = false;
    options.filename = Some("script".into());
    let promise: Promise = ctx
        .eval_with_options(source, options)
        .catch(ctx)
        .map_err(|e| match failure(e) {
            ScriptError::Thrown(m) => ScriptError::Syntax(m),
            other => other,
        })?;
    let sandbox = |e: rquickjs::Error| ScriptError::Sandbox(e.to_string());
    let s = shared.clone();
    let returned = Function::new(ctx.clone(), move |ctx: Ctx<'js>, value: JsValue<'js>| {
        s.settle(returned(&ctx, value));
    })
    .map_err(sandbox)?;
    let s = shared.clone();
    let rejected = Function::new(ctx.clone(), move |ctx: Ctx<'js>, reason: JsValue<'js>| {
        s.settle(Err(rejection(&ctx, reason)));
    })
    .map_err(sandbox)?;
    // The engine's own `then`, which a script cannot replace (`Promise.prototype.then` can).
    // SAFETY: three live values of this context; the result is owned and freed as a Value.
    let chained = unsafe {
        let chained = qjs::JS_PromiseThen(
            ctx.as_raw().as_ptr(),
            promise.as_raw(),
            returned.as_raw(),
            rejected.as_raw(),
        );
        JsValue::from_raw(ctx.clone(), chained)
    };
    if chained.is_exception() {
        let _ = ctx.catch();
        return Err(ScriptError::Sandbox("cannot await the script".into()));
    }
    Ok(())
}

/// The script's return value as JSON.
fn returned<'js>(ctx: &Ctx<'js>, value: JsValue<'js>) -> Result<Value, ScriptError> {
    match ctx.json_stringify(value).catch(ctx) {
        Ok(None) => Ok(Value::Null),
        Ok(Some(text)) => {
            let text = text
                .to_string()
                .map_err(|e| ScriptError::NotJson(e.to_string()))?;
            from_json(&text).map_err(|e| ScriptError::NotJson(e.to_string()))
        }
        Err(e) => Err(match failure(e) {
            ScriptError::Thrown(m) => ScriptError::NotJson(m),
            other => other,
        }),
    }
}

/// Why the script's promise was rejected.
fn rejection<'js>(ctx: &Ctx<'js>, reason: JsValue<'js>) -> ScriptError {
    let _ = ctx;
    match reason.as_object().cloned().and_then(Exception::from_object) {
        Some(error) => failure(CaughtError::Exception(error)),
        None => failure(CaughtError::Value(reason)),
    }
}

/// Characters of an error's message or stack shown; the rest is left out (an error can carry
/// any string the script gives it).
const MAX_ERROR_CHARS: usize = 64 << 10;

/// `Name: message` and the stack, as errors are shown to the model.
fn error_text(error: &Exception<'_>) -> String {
    let property = |key: &str| {
        let value: Option<rquickjs::String> = error.get(key).ok().flatten();
        value.map(|s| {
            within(error.ctx(), s, MAX_ERROR_CHARS)
                .unwrap_or_else(|| format!("[{key} longer than {} KiB]", MAX_ERROR_CHARS >> 10))
        })
    };
    let name = property("name").unwrap_or_else(|| "Error".into());
    let mut text = format!("{name}: {}", property("message").unwrap_or_default());
    if let Some(stack) = property("stack").filter(|s| !s.trim().is_empty()) {
        text.push('\n');
        text.push_str(stack.trim_end());
    }
    text
}

/// What an uncaught exception means: a stack overflow, or the script's own error. (Limits
/// that stop the script are known from [`Control`] and take precedence.)
fn failure(error: CaughtError<'_>) -> ScriptError {
    match error {
        CaughtError::Exception(e) => {
            let message = e.message().unwrap_or_default();
            let name: String = e.get("name").unwrap_or_else(|_| "Error".into());
            if name == "RangeError" && message.contains("call stack") {
                return ScriptError::Stack;
            }
            ScriptError::Thrown(error_text(&e))
        }
        CaughtError::Value(v) => {
            let ctx = v.ctx().clone();
            let shown = ctx
                .json_stringify(v)
                .ok()
                .flatten()
                .and_then(|s| s.to_string().ok())
                .unwrap_or_else(|| "a value that is not an Error".into());
            ScriptError::Thrown(shown)
        }
        CaughtError::Error(e) => ScriptError::Sandbox(e.to_string()),
    }
}
