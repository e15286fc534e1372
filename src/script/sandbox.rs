//! The QuickJS side of a run, on a script thread: a fresh runtime with memory, stack and time
//! limits, the script API (`tools`, `console`), and the script as an async function.
//!
//! After a run, its thread reports, offers itself as the spare, tears down and gets a fresh
//! runtime, context and API ready before the next job arrives. So a run seldom pays for a
//! thread or a runtime on its way, yet no runtime ever serves two runs. Runs that overlap start
//! threads of their own; one spare at most is kept.

use std::cell::{OnceCell, RefCell};
use std::future::Future;
use std::rc::Rc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use rquickjs::context::{EvalOptions, intrinsic};
use rquickjs::prelude::{Coerced, FromJs, Func, Opt, Rest};
use rquickjs::{
    AsyncContext, AsyncRuntime, CatchResultExt, CaughtError, Ctx, Exception, Function, Object,
    Promise, Value as JsValue,
};
use serde_json::Value;
use tokio::sync::{Semaphore, oneshot};

use super::{
    CallRecord, Control, Host, Limits, MEMORY_BYTES, Report, STACK_BYTES, ScriptError, Stop,
    script_value,
};

/// Console output kept per run; later lines are counted, not kept.
const MAX_LOG_BYTES: usize = 256 << 10;
/// Stack of a script thread: QuickJS's own limit plus room for the Rust frames around it.
const THREAD_STACK: usize = 8 << 20;

/// What a run needs, sent to its sandbox.
pub(super) struct Job {
    pub host: Arc<dyn Host>,
    pub code: String,
    pub input: Value,
    pub limits: Limits,
    /// The server's runtime, where the host's futures run.
    pub server: tokio::runtime::Handle,
    pub report: oneshot::Sender<Report>,
}

/// A sandbox for one run: its thread takes the job and stops when `control` says so.
pub(super) struct Sandbox {
    job: oneshot::Sender<Job>,
    pub control: Arc<Control>,
}

/// The sandbox ready and waiting, if any.
static SPARE: Mutex<Option<Sandbox>> = Mutex::new(None);

impl Sandbox {
    /// Hands the job to the spare, or to a new thread (which gets ready while the caller
    /// waits) when there is none or its thread is gone. Returns the run's control.
    pub(super) fn start(job: Job) -> std::io::Result<Arc<Control>> {
        let spare = SPARE.lock().unwrap_or_else(PoisonError::into_inner).take();
        let job = match spare {
            Some(sandbox) => match sandbox.job.send(job) {
                Ok(()) => return Ok(sandbox.control),
                Err(job) => job,
            },
            None => job,
        };
        let control = Arc::new(Control::default());
        let mine = control.clone();
        let (send, jobs) = oneshot::channel();
        // Cannot fail: the receiver is alive until the thread ends, which needs the job.
        let _ = send.send(job);
        std::thread::Builder::new()
            .name("script".into())
            .stack_size(THREAD_STACK)
            .spawn(move || serve(jobs, mine))?;
        Ok(control)
    }
}

/// A script thread: gets ready, runs its job, reports, offers itself as the spare, tears down
/// and gets ready again; it ends when another thread is the spare already.
fn serve(mut jobs: oneshot::Receiver<Job>, mut control: Arc<Control>) {
    let Ok(events) = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    else {
        // The job's report sender is dropped with it: the caller sees the sandbox fail.
        return;
    };
    events.block_on(async move {
        loop {
            let ready = prepare(&control).await;
            let Ok(job) = jobs.await else {
                return;
            };
            let used = execute(ready, &control, job).await;
            // Offered before tearing down: a run that takes it waits less than for a new thread.
            let (job, next) = oneshot::channel();
            control = Arc::new(Control::default());
            {
                let mut spare = SPARE.lock().unwrap_or_else(PoisonError::into_inner);
                if spare.is_some() {
                    return;
                }
                *spare = Some(Sandbox {
                    job,
                    control: control.clone(),
                });
            }
            drop(used);
            jobs = next;
        }
    });
}

/// State the API functions share with the driver. Lives on the script thread only.
struct Shared {
    control: Arc<Control>,
    /// The run's host and call limits, from its job.
    job: OnceCell<Bound>,
    logs: RefCell<Logs>,
    calls: RefCell<Vec<Call>>,
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
        let mut calls = self.calls.borrow_mut();
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
        self: Rc<Self>,
        index: Option<usize>,
        name: String,
        args: String,
    ) -> Result<Value, String> {
        let (Some(index), Some(job)) = (index, self.job.get()) else {
            return std::future::pending().await;
        };
        let Ok(Value::Object(arguments)) = serde_json::from_str(&args) else {
            return Err("arguments must be a JSON object".into());
        };
        let outcome = match job.slots.acquire().await {
            Ok(_slot) => {
                self.calls.borrow_mut()[index].started = Instant::now();
                match job.server.spawn(job.host.call(name, arguments)).await {
                    Ok(result) => script_value(&result),
                    Err(e) => Err(format!("the call failed inside meta-server: {e}")),
                }
            }
            Err(_) => Err("the script is ending".into()),
        };
        let call = &mut self.calls.borrow_mut()[index];
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
        let mut logs = self.logs.borrow_mut();
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
        let mut logs = std::mem::take(&mut *self.logs.borrow_mut());
        if logs.dropped > 0 {
            logs.lines.push(format!(
                "[{} more lines dropped: console output is kept up to {} KiB]",
                logs.dropped,
                MAX_LOG_BYTES >> 10
            ));
        }
        let calls = self
            .calls
            .borrow()
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

/// A sandbox ready for its run: the API installed, waiting for the code and input.
struct Ready {
    shared: Rc<Shared>,
    /// Holds the runtime: dropping it frees both, and the futures of unfinished calls.
    context: AsyncContext,
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

/// A fresh runtime (memory budget, stack limit, interrupt handler) and a context with the
/// [`Builtins`] and the script API.
async fn prepare(control: &Arc<Control>) -> Result<Ready, ScriptError> {
    let sandbox = |e: rquickjs::Error| ScriptError::Sandbox(e.to_string());
    let budget = super::memory::Budget::new(MEMORY_BYTES, control.clone());
    let runtime = AsyncRuntime::new_with_alloc(budget).map_err(sandbox)?;
    runtime.set_max_stack_size(STACK_BYTES).await;
    let watch = control.clone();
    runtime
        .set_interrupt_handler(Some(Box::new(move || {
            if watch.deadline.get().is_some_and(|d| Instant::now() >= *d) {
                watch.stop(Stop::Deadline);
            }
            watch.stopped.is_cancelled()
        })))
        .await;
    let context = AsyncContext::custom::<Builtins>(&runtime)
        .await
        .map_err(sandbox)?;
    let shared = Rc::new(Shared {
        control: control.clone(),
        job: OnceCell::new(),
        logs: RefCell::default(),
        calls: RefCell::default(),
    });
    let installed = context.with(|ctx| install(&ctx, &shared)).await;
    installed.map_err(sandbox)?;
    Ok(Ready { shared, context })
}

/// Runs the job and sends its report; gives back the used sandbox, for the caller to drop.
async fn execute(
    ready: Result<Ready, ScriptError>,
    control: &Arc<Control>,
    job: Job,
) -> Option<Ready> {
    let Job {
        host,
        code,
        input,
        limits,
        server,
        report,
    } = job;
    let deadline = Instant::now() + limits.timeout;
    let _ = control.deadline.set(deadline);
    let ready = match ready {
        Ok(ready) => ready,
        Err(e) => {
            let _ = report.send(Report::failed(e));
            return None;
        }
    };
    let _ = ready.shared.job.set(Bound {
        host,
        server,
        max_calls: limits.max_calls,
        slots: Semaphore::new(limits.in_flight),
    });
    let script = ready.context.async_with(async |ctx| {
        let result = evaluate(&ctx, &code, &input).await;
        drop(ctx);
        result
    });
    // Ends only once a stop reason is set.
    let stopped = async {
        tokio::select! {
            () = control.stopped.cancelled() => {}
            () = tokio::time::sleep_until(deadline.into()) => control.stop(Stop::Deadline),
        }
    };
    let outcome = tokio::select! {
        biased;
        () = stopped => None,
        outcome = script => Some(outcome),
    };
    let (logs, calls) = ready.shared.finish();
    // A limit hit wins over whatever the script did after it.
    let outcome = match (control.error(&limits), outcome) {
        (Some(limit), _) => Err(limit),
        (None, Some(outcome)) => outcome,
        (None, None) => Err(ScriptError::Sandbox("stopped without a reason".into())),
    };
    let _ = report.send(Report {
        outcome,
        logs,
        calls,
    });
    // Unfinished calls still hold the host; they go with the runtime.
    Some(ready)
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
            serde_json::from_str(&text).map_err(|e| ScriptError::NotJson(e.to_string()))
        }
        Err(e) => Err(match failure(e) {
            ScriptError::Thrown(m) => ScriptError::NotJson(m),
            other => other,
        }),
    }
}

/// The script's API as globals: `tools` (`call`, `search`, `describe`) and `console`, frozen.
fn install<'js>(ctx: &Ctx<'js>, shared: &Rc<Shared>) -> rquickjs::Result<()> {
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
            move |ctx: Ctx<'js>, query: Coerced<String>, limit: Opt<f64>| {
                let limit = limit.0.filter(|l| *l >= 0.0).map(|l| l as u32);
                let s = s.clone();
                answer(&ctx, "search_tools".into(), async move {
                    s.ask(|host| host.search(query.0, limit)).await
                })
            },
        ),
    )?;
    let s = shared.clone();
    tools.set(
        "describe",
        Func::from(move |ctx: Ctx<'js>, name: Coerced<String>| {
            let s = s.clone();
            answer(&ctx, "get_tool_details".into(), async move {
                s.ask(|host| host.describe(name.0)).await
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
        return text.to_string().unwrap_or_default();
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

/// `Name: message` and the stack, as errors are shown to the model.
fn error_text(error: &Exception<'_>) -> String {
    let name: String = error.get("name").unwrap_or_else(|_| "Error".into());
    let mut text = format!("{name}: {}", error.message().unwrap_or_default());
    if let Some(stack) = error.stack().filter(|s| !s.trim().is_empty()) {
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
