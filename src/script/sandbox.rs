//! The QuickJS side of a run: a fresh runtime with memory, stack and time limits, the script
//! API (`tools`, `console`), and the script as an async function, run on the request's own task.
//!
//! A keeper thread readies each sandbox before it is needed and tears it down after: a run
//! takes the ready one (or readies its own when runs overlap), runs in place and hands it back.
//! So a run seldom pays for a runtime on its way, no runtime ever serves two runs, and a
//! script's calls and result cross no thread. A script that computes for long without awaiting
//! gives its worker's other tasks to a new worker thread, so it holds up nothing else.

use std::future::Future;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use rquickjs::context::{EvalOptions, intrinsic};
use rquickjs::prelude::{Coerced, FromJs, Func, Opt, Rest};
use rquickjs::{
    AsyncContext, AsyncRuntime, CatchResultExt, CaughtError, Ctx, Exception, Function, Object,
    Promise, Value as JsValue,
};
use serde_json::Value;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::{
    CallRecord, Control, Host, Limits, MEMORY_BYTES, Report, STACK_BYTES, ScriptError, Stop,
    script_value,
};
use crate::surrogates::from_json;

/// Console output kept per run; later lines are counted, not kept.
const MAX_LOG_BYTES: usize = 256 << 10;
/// How long a script may compute without awaiting before its worker's other tasks move to a
/// new worker thread.
const BUSY: Duration = Duration::from_millis(10);
/// Longest wait for the new worker thread to take over those tasks; past it the script goes on
/// and tries again after another [`BUSY`].
const HANDOVER: Duration = Duration::from_millis(50);

/// What a run needs from its caller.
pub(super) struct Job {
    pub host: Arc<dyn Host>,
    pub code: String,
    pub input: Value,
    pub limits: Limits,
    pub cancelled: CancellationToken,
}

/// A sandbox for one run: its runtime, context and the API installed, waiting for the code and
/// input.
pub(super) struct Sandbox {
    shared: Arc<Shared>,
    /// Holds the runtime: dropping it frees both, and the futures of unfinished calls.
    context: AsyncContext,
}

/// Work for the keeper thread.
enum Chore {
    /// A run took the spare: ready another.
    Refill,
    /// A used sandbox, to tear down.
    Free(Sandbox),
}

/// The sandbox ready and waiting, if any.
static SPARE: Mutex<Option<Sandbox>> = Mutex::new(None);
/// The keeper thread's chores; `None` when it could not be started.
static KEEPER: OnceLock<Option<mpsc::Sender<Chore>>> = OnceLock::new();

/// Hands `chore` to the keeper thread, starting it the first time. Without a keeper, a used
/// sandbox is torn down here and runs ready their own.
fn keeper(chore: Chore) {
    let keeper = KEEPER.get_or_init(|| {
        let (send, chores) = mpsc::channel();
        let started = std::thread::Builder::new()
            .name("script-keeper".into())
            .spawn(move || keep(&chores));
        match started {
            Ok(_) => Some(send),
            Err(e) => {
                tracing::warn!(
                    "cannot start the script keeper thread: {e}; each run readies its own sandbox"
                );
                None
            }
        }
    });
    if let Some(send) = keeper {
        // Fails only when the keeper has ended: the chore (a sandbox) is then dropped here.
        let _ = send.send(chore);
    }
}

/// The keeper thread: readies a spare when one is taken, tears down used sandboxes.
fn keep(chores: &mpsc::Receiver<Chore>) {
    // Readying and tearing down is background work: on Linux, where each thread has a nice
    // value of its own, it yields to request threads and the upstreams they wait on when cores
    // are short (a run that finds no spare readies its own).
    // SAFETY: setpriority on this thread's own id only changes its scheduling weight.
    #[cfg(target_os = "linux")]
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19);
    }
    let Ok(events) = tokio::runtime::Builder::new_current_thread().build() else {
        return;
    };
    while let Ok(chore) = chores.recv() {
        match chore {
            Chore::Refill if lock(&SPARE).is_some() => {}
            Chore::Refill => {
                if let Ok(sandbox) = events.block_on(Sandbox::prepare()) {
                    *lock(&SPARE) = Some(sandbox);
                }
            }
            Chore::Free(used) => drop(used),
        }
    }
}

/// `mutex` locked, whether or not a panic poisoned it.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// State the API functions share with the run.
struct Shared {
    control: Arc<Control>,
    /// The run's host and call limits, from its job.
    job: OnceLock<Bound>,
    logs: Mutex<Logs>,
    calls: Mutex<Vec<Call>>,
}

struct Bound {
    host: Arc<dyn Host>,
    server: tokio::runtime::Handle,
    max_calls: usize,
    slots: Semaphore,
}

#[derive(Default)]
struct Logs {
    lines: Vec<String>,
    bytes: usize,
    dropped: usize,
}

struct Call {
    name: String,
    started: Instant,
    /// Milliseconds and success, once the call returned.
    ended: Option<(u64, bool)>,
}

impl Shared {
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
            name: name.to_owned(),
            started: Instant::now(),
            ended: None,
        });
        Some(calls.len() - 1)
    }

    /// `tools.call`: the call's script value, or its error. A call past the cap never answers.
    async fn call(
        self: Arc<Self>,
        index: Option<usize>,
        name: String,
        args: String,
    ) -> Result<Value, String> {
        let (Some(index), Some(job)) = (index, self.job.get()) else {
            return std::future::pending().await;
        };
        let Ok(Value::Object(arguments)) = from_json(&args) else {
            return Err("arguments must be a JSON object".into());
        };
        let outcome = match job.slots.acquire().await {
            Ok(_slot) => {
                lock(&self.calls)[index].started = Instant::now();
                match job.server.spawn(job.host.call(name, arguments)).await {
                    Ok(result) => script_value(&result),
                    Err(e) => Err(format!("the call failed inside meta-server: {e}")),
                }
            }
            Err(_) => Err("the script is ending".into()),
        };
        let call = &mut lock(&self.calls)[index];
        call.ended = Some((millis(call.started), outcome.is_ok()));
        outcome
    }

    /// Runs a host question on the server's runtime.
    async fn ask(
        &self,
        question: impl FnOnce(&dyn Host) -> super::HostFuture<Result<Value, String>>,
    ) -> Result<Value, String> {
        let Some(job) = self.job.get() else {
            return Err("the sandbox has no run".into());
        };
        job.server
            .spawn(question(job.host.as_ref()))
            .await
            .unwrap_or_else(|e| Err(format!("failed inside meta-server: {e}")))
    }

    fn log(&self, level: &str, line: String) {
        let mut logs = lock(&self.logs);
        let line = match level {
            "warn" | "error" => format!("{level}: {line}"),
            _ => line,
        };
        if logs.bytes + line.len() > MAX_LOG_BYTES {
            logs.dropped += 1;
            return;
        }
        logs.bytes += line.len();
        logs.lines.push(line);
    }

    /// The console output and the call records as the report gives them; calls still running
    /// count as failed, with the time they had run.
    fn finish(&self) -> (Vec<String>, Vec<CallRecord>) {
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
            control,
            job: OnceLock::new(),
            logs: Mutex::default(),
            calls: Mutex::default(),
        });
        let installed = context.with(|ctx| install(&ctx, &shared)).await;
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

    /// Runs the job to its report; the sandbox goes to the keeper to be torn down.
    pub(super) async fn run(self, job: Job) -> Report {
        let Job {
            host,
            code,
            input,
            limits,
            cancelled,
        } = job;
        let control = self.shared.control.clone();
        let deadline = Instant::now() + limits.timeout;
        let _ = control.deadline.set(deadline);
        let _ = control.cancelled.set(cancelled.clone());
        let _ = self.shared.job.set(Bound {
            host,
            server: tokio::runtime::Handle::current(),
            max_calls: limits.max_calls,
            slots: Semaphore::new(limits.in_flight),
        });
        let script = self.context.async_with(async move |ctx| {
            let result = evaluate(&ctx, &code, &input).await;
            drop(ctx);
            result
        });
        // Ends only once a stop reason is set.
        let stopped = async {
            tokio::select! {
                () = control.stopped.cancelled() => {}
                () = cancelled.cancelled() => control.stop(Stop::Cancelled),
                () = tokio::time::sleep_until(deadline.into()) => control.stop(Stop::Deadline),
            }
        };
        let outcome = tokio::select! {
            biased;
            () = stopped => None,
            outcome = control.timed(script) => Some(outcome),
        };
        let (logs, calls) = self.shared.finish();
        // A limit hit wins over whatever the script did after it.
        let outcome = match (control.error(&limits), outcome) {
            (Some(limit), _) => Err(limit),
            (None, Some(outcome)) => outcome,
            (None, None) => Err(ScriptError::Sandbox("stopped without a reason".into())),
        };
        // Unfinished calls still hold the host; they go with the runtime.
        keeper(Chore::Free(self));
        Report {
            outcome,
            logs,
            calls,
        }
    }
}

impl Control {
    /// The interrupt handler, called by QuickJS as the script runs: whether to stop it now.
    fn interrupted(&self) -> bool {
        if self.deadline.get().is_some_and(|d| Instant::now() >= *d) {
            self.stop(Stop::Deadline);
        }
        // Seen here while the script computes; while it waits, the run's select sees it.
        if self
            .cancelled
            .get()
            .is_some_and(CancellationToken::is_cancelled)
        {
            self.stop(Stop::Cancelled);
        }
        self.yield_worker();
        self.stopped.is_cancelled()
    }

    /// Polls `script`, noting when each poll began, so that [`Control::yield_worker`] can tell
    /// a script that computes from one that waits.
    async fn timed<F: Future>(&self, script: F) -> F::Output {
        let mut script = std::pin::pin!(script);
        std::future::poll_fn(|cx| {
            *lock(&self.polled) = Some(Instant::now());
            let polled = script.as_mut().poll(cx);
            *lock(&self.polled) = None;
            polled
        })
        .await
    }

    /// Called by the interrupt handler: once the script has computed for [`BUSY`] in one poll,
    /// its worker's other tasks move to a new worker thread (tokio's `block_in_place`) and
    /// this thread carries on with the script alone.
    fn yield_worker(&self) {
        {
            let mut since = lock(&self.polled);
            if !since.is_some_and(|t| t.elapsed() >= BUSY) {
                return;
            }
            // Again after another BUSY while this poll goes on: a handover can fail (below).
            *since = Some(Instant::now());
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if runtime.runtime_flavor() != tokio::runtime::RuntimeFlavor::MultiThread {
            return;
        }
        tokio::task::block_in_place(|| {
            // Leaving at once would take the worker back before the new thread starts (a
            // busy machine takes milliseconds to start one). Once a task spawned now has run,
            // some thread runs the worker's tasks.
            let (ran, wait) = mpsc::sync_channel(1);
            runtime.spawn(async move {
                let _ = ran.send(());
            });
            let _ = wait.recv_timeout(HANDOVER);
        });
    }
}

/// Installs the API, runs the script and turns its return value into JSON.
async fn evaluate<'js>(ctx: &Ctx<'js>, code: &str, input: &Value) -> Result<Value, ScriptError> {
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
    let value: rquickjs::Value = promise.into_future().await.catch(ctx).map_err(failure)?;
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

/// The script's API as globals: `tools` (`call`, `search`, `describe`) and `console`, frozen.
fn install<'js>(ctx: &Ctx<'js>, shared: &Arc<Shared>) -> rquickjs::Result<()> {
    let tools = Object::new(ctx.clone())?;
    let s = shared.clone();
    tools.set(
        "call",
        Func::from(
            move |ctx: Ctx<'js>, name: JsValue<'js>, args: Opt<JsValue<'js>>| {
                let Some(name) = name.as_string().and_then(|n| n.to_string().ok()) else {
                    return rejected(&ctx, "tools.call(name, args): name must be a qualified tool name such as \"time__get_current_time\"");
                };
                let args = match args.0.filter(|a| !a.is_undefined()) {
                    None => "{}".to_owned(),
                    Some(a) if a.is_object() && !a.is_array() && !a.is_function() => {
                        match ctx.json_stringify(a)? {
                            Some(json) => json.to_string()?,
                            None => "{}".to_owned(),
                        }
                    }
                    Some(_) => {
                        return rejected(&ctx, &format!("tools.call(\"{name}\", args): args must be an object of the tool's arguments"));
                    }
                };
                let index = s.start_call(&name);
                answer(&ctx, name.clone(), s.clone().call(index, name, args))
            },
        ),
    )?;
    let s = shared.clone();
    tools.set(
        "search",
        Func::from(
            move |ctx: Ctx<'js>, query: Coerced<rquickjs::String<'js>>, limit: Opt<f64>| {
                let limit = limit.0.filter(|l| *l >= 0.0).map(|l| l as u32);
                let query = rust_string(&ctx, query.0);
                let s = s.clone();
                answer(&ctx, "search_tools".into(), async move {
                    s.ask(|host| host.search(query, limit)).await
                })
            },
        ),
    )?;
    let s = shared.clone();
    tools.set(
        "describe",
        Func::from(move |ctx: Ctx<'js>, name: Coerced<rquickjs::String<'js>>| {
            let name = rust_string(&ctx, name.0);
            let s = s.clone();
            answer(&ctx, "get_tool_details".into(), async move {
                s.ask(|host| host.describe(name)).await
            })
        }),
    )?;
    let console = Object::new(ctx.clone())?;
    for level in ["log", "info", "debug", "warn", "error"] {
        let s = shared.clone();
        console.set(
            level,
            Func::from(move |ctx: Ctx<'js>, args: Rest<JsValue<'js>>| {
                let line: Vec<String> = args.0.into_iter().map(|v| show(&ctx, v)).collect();
                s.log(level, line.join(" "));
            }),
        )?;
    }
    let freeze: Function = ctx.globals().get::<_, Object>("Object")?.get("freeze")?;
    let globals = ctx.globals();
    globals.set("tools", freeze.call::<_, Object>((tools,))?)?;
    globals.set("console", freeze.call::<_, Object>((console,))?)?;
    Ok(())
}

/// A promise settled by `reply` on the runtime's own scheduler: with the JSON value, or
/// rejected with an `Error` whose `tool` is `tool`. (Not rquickjs's `Promised`: when settling
/// fails, as it does while a script is being stopped, that prints to stdout, which belongs to
/// the protocol.)
fn answer<'js>(
    ctx: &Ctx<'js>,
    tool: String,
    reply: impl Future<Output = Result<Value, String>> + 'js,
) -> rquickjs::Result<Promise<'js>> {
    let (promise, resolve, reject) = ctx.promise()?;
    let ctx = ctx.clone();
    ctx.clone().spawn(async move {
        // Fails only when the script is being stopped: nobody waits for the answer then.
        let _ = match reply.await {
            Ok(value) => ctx
                .json_parse(value.to_string())
                .and_then(|v| resolve.call::<_, ()>((v,))),
            Err(message) => Exception::from_message(ctx.clone(), &message)
                .and_then(|e| e.set("tool", tool).map(|()| e))
                .and_then(|e| reject.call::<_, ()>((e,))),
        };
    });
    Ok(promise)
}

/// A promise rejected at once with a `TypeError`.
fn rejected<'js>(ctx: &Ctx<'js>, message: &str) -> rquickjs::Result<Promise<'js>> {
    let (promise, _resolve, reject) = ctx.promise()?;
    let _ = Exception::throw_type(ctx, message);
    reject.call::<_, ()>((ctx.catch(),))?;
    Ok(promise)
}

/// A console argument as text: strings as they are, errors with their stack, the rest as JSON.
fn show<'js>(ctx: &Ctx<'js>, value: JsValue<'js>) -> String {
    if let Some(text) = value.as_string() {
        return rust_string(ctx, text.clone());
    }
    if let Some(error) = value.as_object().cloned().and_then(Exception::from_object) {
        return error_text(&error);
    }
    match ctx.json_stringify(value.clone()) {
        Ok(Some(json)) => json.to_string().unwrap_or_default(),
        Ok(None) => Coerced::<String>::from_js(ctx, value).map_or_else(|_| String::new(), |c| c.0),
        Err(_) => {
            // Cyclic or BigInt: clear the exception, show what String() would.
            let _ = ctx.catch();
            Coerced::<String>::from_js(ctx, value).map_or_else(|_| String::new(), |c| c.0)
        }
    }
}

/// A JavaScript string as Rust text. One holding lone surrogates (half an emoji cut by `slice`),
/// which UTF-8 cannot, reads with U+FFFD in their place (see [`crate::surrogates`]).
fn rust_string<'js>(ctx: &Ctx<'js>, s: rquickjs::String<'js>) -> String {
    s.to_string().unwrap_or_else(|_| {
        ctx.json_stringify(s)
            .ok()
            .flatten()
            .and_then(|json| json.to_string().ok())
            .and_then(|json| from_json(&json).ok())
            .unwrap_or_default()
    })
}

/// `Name: message` and the stack, as errors are shown to the model.
fn error_text(error: &Exception<'_>) -> String {
    let property = |key: &str| {
        let value: Option<rquickjs::String> = error.get(key).ok().flatten();
        value.map(|s| rust_string(error.ctx(), s))
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
