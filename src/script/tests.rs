//! The sandbox against a host of a few fixed tools: results, errors, limits and globals.
//! Real upstream servers are exercised end to end in tests/e2e/test_script.py.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rmcp::model::ContentBlock;
use serde_json::json;

use super::*;

/// Calls running at once, and the most seen; host futures that started and that were dropped.
#[derive(Default)]
struct Load {
    running: AtomicUsize,
    most: AtomicUsize,
    started: AtomicUsize,
    dropped: AtomicUsize,
}

/// Counts a host future as started, and as dropped when it goes.
struct Held(Arc<Load>);

impl Held {
    fn new(load: &Arc<Load>) -> Self {
        load.started.fetch_add(1, Ordering::SeqCst);
        Self(load.clone())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

/// Tools `t__echo` (structured: its arguments), `t__json` (JSON text), `t__text`, `t__fail`
/// (error result), `t__slow` (sleeps `ms`), `t__big` (`n` bytes of text after `ms`) and `t__hang`
/// (never answers); a search for a query
/// that starts with "hang" and a description of `t__hang` never answer either.
#[derive(Default)]
struct Tools {
    load: Arc<Load>,
}

impl Host for Tools {
    fn call(&self, name: String, arguments: Map<String, Value>) -> HostFuture<CallToolResult> {
        let load = self.load.clone();
        let now = load.running.fetch_add(1, Ordering::SeqCst) + 1;
        load.most.fetch_max(now, Ordering::SeqCst);
        Box::pin(async move {
            let result = match name.as_str() {
                "t__echo" => CallToolResult::structured(Value::Object(arguments)),
                "t__json" => CallToolResult::success(vec![ContentBlock::text(r#"{"n": 7}"#)]),
                "t__text" => CallToolResult::success(vec![ContentBlock::text("plain words")]),
                "t__big" => {
                    let ms = arguments.get("ms").and_then(Value::as_u64).unwrap_or(0);
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    let n = arguments.get("n").and_then(Value::as_u64).unwrap_or(1);
                    CallToolResult::success(vec![ContentBlock::text("x".repeat(n as usize))])
                }
                "t__hang" => {
                    let _held = Held::new(&load);
                    std::future::pending::<()>().await;
                    unreachable!()
                }
                "t__slow" => {
                    let ms = arguments.get("ms").and_then(Value::as_u64).unwrap_or(50);
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    CallToolResult::success(vec![ContentBlock::text("slept")])
                }
                _ => CallToolResult::error(vec![ContentBlock::text(format!("no tool {name}"))]),
            };
            load.running.fetch_sub(1, Ordering::SeqCst);
            result
        })
    }

    fn search(&self, query: String, limit: Option<u32>) -> HostFuture<Result<Value, Rejection>> {
        let load = self.load.clone();
        Box::pin(async move {
            if query.starts_with("hang") {
                let _held = Held::new(&load);
                std::future::pending::<()>().await;
            }
            Ok(json!({"query": query, "limit": limit}))
        })
    }

    fn describe(&self, name: String) -> HostFuture<Result<Value, Rejection>> {
        let load = self.load.clone();
        Box::pin(async move {
            if name == "t__hang" {
                let _held = Held::new(&load);
                std::future::pending::<()>().await;
            }
            if name == "t__echo" {
                Ok(json!({"name": name}))
            } else {
                Err(format!("unknown tool \"{name}\"").into())
            }
        })
    }
}

fn host() -> (Arc<Load>, Arc<dyn Host>) {
    let tools = Tools::default();
    (tools.load.clone(), Arc::new(tools))
}

async fn run_with(code: &str, limits: Limits) -> Report {
    let (_, host) = host();
    run(
        host,
        code.into(),
        json!({"who": "world"}),
        limits,
        CancellationToken::new(),
        Slot::unlimited(),
    )
    .await
}

async fn run_code(code: &str) -> Report {
    run_with(code, Limits::default()).await
}

fn ok(report: &Report) -> &Value {
    match &report.outcome {
        Ok(v) => v,
        Err(e) => panic!("script failed: {e}\nlogs: {:?}", report.logs),
    }
}

#[tokio::test]
async fn returns_value_logs_and_reads_input() {
    let r = run_code(r#"console.log("hi", input.who, {a: 1}); console.error("bad"); return {greeting: `hello ${input.who}`};"#).await;
    assert_eq!(ok(&r), &json!({"greeting": "hello world"}));
    assert_eq!(r.logs, ["hi world {\"a\":1}", "error: bad"]);
    assert!(r.calls.is_empty());
}

#[tokio::test]
async fn call_results_become_values_and_errors_throw() {
    let r = run_code(
        r#"
        const echo = await tools.call("t__echo", {x: [1, 2]});
        const json = await tools.call("t__json");
        const text = await tools.call("t__text", {});
        let caught;
        try { await tools.call("t__nope", {}); } catch (e) { caught = {message: e.message, tool: e.tool, isError: e instanceof Error}; }
        return {echo, json, text, caught};
        "#,
    )
    .await;
    assert_eq!(
        ok(&r),
        &json!({"echo": {"x": [1, 2]}, "json": {"n": 7}, "text": "plain words",
                "caught": {"message": "no tool t__nope", "tool": "t__nope", "isError": true}})
    );
    let names: Vec<(&str, bool)> = r.calls.iter().map(|c| (c.name.as_str(), c.ok)).collect();
    assert_eq!(
        names,
        [
            ("t__echo", true),
            ("t__json", true),
            ("t__text", true),
            ("t__nope", false)
        ]
    );
}

#[tokio::test]
async fn search_and_describe_answer_through_the_host() {
    let r = run_code(
        r#"
        const s = await tools.search("read a file", 3);
        const d = await tools.describe("t__echo");
        let missing;
        try { await tools.describe("t__x"); } catch (e) { missing = e.message; }
        return {s, d, missing};
        "#,
    )
    .await;
    assert_eq!(
        ok(&r),
        &json!({"s": {"query": "read a file", "limit": 3}, "d": {"name": "t__echo"},
                "missing": "unknown tool \"t__x\""})
    );
    assert!(r.calls.is_empty(), "search and describe are not tool calls");
}

#[tokio::test]
async fn fan_out_runs_at_most_eight_calls_at_once() {
    let (load, host) = host();
    let code = r#"
        const all = await Promise.all(Array.from({length: 20}, (_, i) => tools.call("t__slow", {ms: 30})));
        return all.length;
    "#;
    let r = run(
        host,
        code.into(),
        Value::Null,
        Limits::default(),
        CancellationToken::new(),
        Slot::unlimited(),
    )
    .await;
    assert_eq!(ok(&r), &json!(20));
    assert_eq!(r.calls.len(), 20);
    assert!(r.calls.iter().all(|c| c.ok && c.name == "t__slow"));
    assert_eq!(load.most.load(Ordering::SeqCst), 8);
}

#[tokio::test]
async fn a_busy_loop_hits_the_time_limit() {
    let limits = Limits {
        timeout: Duration::from_millis(200),
        ..Limits::default()
    };
    let r = run_with("console.log('start'); while (true) {}", limits).await;
    assert_eq!(r.outcome, Err(ScriptError::Timeout { ms: 200 }));
    assert_eq!(r.logs, ["start"], "output before the limit is kept");
}

#[tokio::test]
async fn a_caught_interrupt_still_ends_the_script() {
    let limits = Limits {
        timeout: Duration::from_millis(200),
        ..Limits::default()
    };
    let r = run_with("for (;;) { try { while (true) {} } catch (e) {} }", limits).await;
    assert_eq!(r.outcome, Err(ScriptError::Timeout { ms: 200 }));
}

#[tokio::test]
async fn waiting_on_a_slow_call_hits_the_time_limit() {
    let limits = Limits {
        timeout: Duration::from_millis(200),
        ..Limits::default()
    };
    let r = run_with(
        r#"await tools.call("t__slow", {ms: 5000}); return 1;"#,
        limits,
    )
    .await;
    assert_eq!(r.outcome, Err(ScriptError::Timeout { ms: 200 }));
    assert_eq!(r.calls.len(), 1);
    assert!(!r.calls[0].ok, "a call cut off by the limit is not ok");
}

#[tokio::test]
async fn a_memory_bomb_hits_the_memory_limit() {
    let r =
        run_code(r#"const s = "x".repeat(1 << 20); const a = []; for (;;) a.push(s + a.length);"#)
            .await;
    assert_eq!(r.outcome, Err(ScriptError::Memory { mib: 64 }));
    let r = run_code(r#"const a = []; for (;;) a.push(new Array(1e6).fill(1));"#).await;
    assert_eq!(r.outcome, Err(ScriptError::Memory { mib: 64 }));
}

#[tokio::test]
async fn deep_recursion_hits_the_stack_limit() {
    let r = run_code("function f(n) { return f(n + 1) + 1; } return f(0);").await;
    assert_eq!(r.outcome, Err(ScriptError::Stack));
}

#[tokio::test]
async fn the_call_cap_ends_the_script_even_when_caught() {
    let limits = Limits {
        max_calls: 3,
        ..Limits::default()
    };
    let code = r#"for (let i = 0; i < 10; i++) { try { await tools.call("t__echo", {i}); } catch (e) {} } return "done";"#;
    let r = run_with(code, limits.clone()).await;
    assert_eq!(r.outcome, Err(ScriptError::Calls { max: 3 }));
    assert_eq!(r.calls.len(), 3);
    // Started without awaiting: the fourth never runs.
    let code = r#"for (let i = 0; i < 10; i++) tools.call("t__echo", {i}); return "done";"#;
    let r = run_with(code, limits).await;
    assert_eq!(r.outcome, Err(ScriptError::Calls { max: 3 }));
}

#[tokio::test]
async fn host_globals_are_absent() {
    let r = run_code(
        r#"
        const names = ["require", "process", "fetch", "XMLHttpRequest", "WebSocket", "setTimeout",
                       "setInterval", "std", "os", "module", "exports", "Deno", "Bun", "__dirname", "native"];
        const present = names.filter((n) => typeof globalThis[n] !== "undefined");
        let imported;
        try { await import("fs"); imported = "yes"; } catch (e) { imported = e.message; }
        const viaEval = eval("typeof require") + " " + new Function("return typeof process")();
        const globals = Object.getOwnPropertyNames(new Function("return this")()).sort();
        return {present, imported, viaEval, globals};
        "#,
    )
    .await;
    let v = ok(&r);
    assert_eq!(v["present"], json!([]));
    assert_ne!(v["imported"], json!("yes"));
    assert_eq!(v["viaEval"], json!("undefined undefined"));
    // The built-ins the sandbox adds and the script API, nothing else: no typed arrays,
    // `Proxy`, `WeakRef` or web extras (`atob`, `performance`).
    assert_eq!(
        v["globals"],
        json!([
            "AggregateError",
            "Array",
            "AsyncDisposableStack",
            "BigInt",
            "Boolean",
            "Date",
            "DisposableStack",
            "Error",
            "EvalError",
            "Function",
            "Infinity",
            "InternalError",
            "Iterator",
            "JSON",
            "Map",
            "Math",
            "NaN",
            "Number",
            "Object",
            "Promise",
            "RangeError",
            "ReferenceError",
            "Reflect",
            "RegExp",
            "Set",
            "String",
            "SuppressedError",
            "Symbol",
            "SyntaxError",
            "TypeError",
            "URIError",
            "WeakMap",
            "WeakSet",
            "console",
            "decodeURI",
            "decodeURIComponent",
            "encodeURI",
            "encodeURIComponent",
            "escape",
            "eval",
            "globalThis",
            "input",
            "isFinite",
            "isNaN",
            "parseFloat",
            "parseInt",
            "queueMicrotask",
            "tools",
            "undefined",
            "unescape"
        ])
    );
}

#[tokio::test]
async fn syntax_errors_and_uncaught_throws_are_reported() {
    let r = run_code("return (;").await;
    assert!(
        matches!(&r.outcome, Err(ScriptError::Syntax(m)) if m.starts_with("SyntaxError")),
        "{:?}",
        r.outcome
    );
    let r = run_code("\nthrow new TypeError('nope');").await;
    assert!(
        matches!(&r.outcome, Err(ScriptError::Thrown(m)) if m.starts_with("TypeError: nope") && m.contains(":2:")),
        "line numbers are the script's own: {:?}",
        r.outcome
    );
    let r = run_code("throw {code: 7};").await;
    assert_eq!(r.outcome, Err(ScriptError::Thrown("{\"code\":7}".into())));
}

#[tokio::test]
async fn return_values_must_be_json() {
    assert_eq!(ok(&run_code("return;").await), &Value::Null);
    let r = run_code("return 10n;").await;
    assert!(
        matches!(r.outcome, Err(ScriptError::NotJson(_))),
        "{:?}",
        r.outcome
    );
    let r = run_code("const a = {}; a.self = a; return a;").await;
    assert!(
        matches!(r.outcome, Err(ScriptError::NotJson(_))),
        "{:?}",
        r.outcome
    );
}

#[tokio::test]
async fn cancellation_stops_a_waiting_script() {
    let (_, host) = host();
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        trigger.cancel();
    });
    let r = run(
        host,
        r#"await tools.call("t__slow", {ms: 10000});"#.into(),
        Value::Null,
        Limits::default(),
        cancel,
        Slot::unlimited(),
    )
    .await;
    assert_eq!(r.outcome, Err(ScriptError::Cancelled));
}

/// A script that computes without awaiting runs on a runner thread, not on a worker of the
/// server's runtime: with one worker, a task spawned after the script still runs; and the
/// client's cancel stops the script though it never awaits.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_busy_script_holds_up_no_other_task() {
    let (_, host) = host();
    let cancel = CancellationToken::new();
    let script = tokio::spawn(run(
        host,
        "for (;;) {}".into(),
        Value::Null,
        Limits::default(),
        cancel.clone(),
        Slot::unlimited(),
    ));
    let other = tokio::spawn(async { 42 });
    assert_eq!(other.await.expect("the other task ran"), 42);
    assert!(!script.is_finished(), "the script still runs");
    cancel.cancel();
    let report = script.await.expect("the script task");
    assert_eq!(report.outcome, Err(ScriptError::Cancelled));
}

#[tokio::test]
async fn console_output_is_bounded() {
    let r =
        run_code(r#"for (let i = 0; i < 100000; i++) console.log("line " + i); return 1;"#).await;
    assert_eq!(ok(&r), &json!(1));
    let last = r.logs.last().expect("logs");
    assert!(
        last.starts_with('[') && last.contains("more lines dropped"),
        "{last}"
    );
    let kept: usize = r.logs.iter().map(String::len).sum();
    assert!(kept < 300 << 10);
}

#[test]
fn script_values_follow_structured_then_json_then_text() {
    let mut with_both = CallToolResult::success(vec![ContentBlock::text("[1]")]);
    with_both.structured_content = Some(json!({"a": 1}));
    assert_eq!(script_value(&with_both), Ok(json!({"a": 1})));
    let json_text = CallToolResult::success(vec![ContentBlock::text(" [1, 2] ")]);
    assert_eq!(script_value(&json_text), Ok(json!([1, 2])));
    let text = CallToolResult::success(vec![ContentBlock::text("a"), ContentBlock::text("b")]);
    assert_eq!(script_value(&text), Ok(json!("a\nb")));
    let image = CallToolResult::success(vec![ContentBlock::image("AAAA", "image/png")]);
    assert_eq!(
        script_value(&image),
        Ok(json!([{"type": "image", "data": "AAAA", "mimeType": "image/png"}]))
    );
    let error = CallToolResult::error(vec![ContentBlock::text("boom")]);
    assert_eq!(script_value(&error), Err("boom".into()));
}

#[tokio::test]
async fn every_run_gets_a_fresh_runtime() {
    assert_eq!(
        ok(&run_code("globalThis.left = 1; Object.prototype.polluted = true; return 1;").await),
        &json!(1)
    );
    let r = run_code(r#"const a = []; for (;;) a.push(new Array(1e6).fill(1));"#).await;
    assert_eq!(r.outcome, Err(ScriptError::Memory { mib: 64 }));
    // Runs one after another (the spare path) and at once (threads of their own).
    let runs = (0..4).map(|_| run_code("return [typeof left, ({}).polluted ?? null];"));
    for r in futures::future::join_all(runs).await {
        assert_eq!(ok(&r), &json!(["undefined", null]));
    }
}

#[tokio::test]
async fn bad_api_use_is_a_catchable_type_error() {
    let r = run_code(
        r#"
        const out = [];
        for (const [name, args] of [[42, {}], ["t__echo", [1]], ["t__echo", "x"]]) {
          try { await tools.call(name, args); out.push("no error"); }
          catch (e) { out.push(e instanceof TypeError); }
        }
        const cyclic = {}; cyclic.self = cyclic;
        console.log(new RangeError("shown"), cyclic, undefined, 10n);
        tools.extra = 1;
        return {out, frozen: tools.extra === undefined};
        "#,
    )
    .await;
    assert_eq!(ok(&r), &json!({"out": [true, true, true], "frozen": true}));
    assert!(r.calls.is_empty(), "rejected before any call started");
    let line = &r.logs[0];
    assert!(line.starts_with("RangeError: shown\n    at "), "{line}");
    assert!(line.ends_with(" [object Object] undefined 10"), "{line}");
}

#[tokio::test]
async fn lone_surrogates_become_replacement_characters() {
    // Half an emoji, as `slice` cuts one: in the result, the arguments, the logs and a search.
    let r = run_code(
        r#"const half = "😀".slice(0, 1);
        console.log(`a${half}b`);
        const echoed = await tools.call("t__echo", {s: half});
        const searched = await tools.search(`x${half}`);
        return {whole: "😀😀".slice(0, 3), echoed, query: searched.query};"#,
    )
    .await;
    assert_eq!(
        ok(&r),
        &json!({"whole": "😀\u{FFFD}", "echoed": {"s": "\u{FFFD}"}, "query": "x\u{FFFD}"})
    );
    assert_eq!(r.logs, ["a\u{FFFD}b"]);
    let r = run_code(r#"throw new Error("bad \ud800 input");"#).await;
    assert!(
        matches!(&r.outcome, Err(ScriptError::Thrown(m)) if m.contains("bad \u{FFFD} input")),
        "{:?}",
        r.outcome
    );
}

/// Runs `code` on a thread and runtime of its own and waits at most `within` for its report:
/// a script that never stops fails the test instead of hanging it. The report and how long
/// the run took.
fn run_bounded(
    host: Arc<dyn Host>,
    code: &str,
    limits: Limits,
    cancel: CancellationToken,
    within: Duration,
) -> (Report, Duration) {
    let (done, report) = std::sync::mpsc::channel();
    let code = code.to_owned();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let started = crate::clock::Instant::now();
        let report = runtime.block_on(run(
            host,
            code,
            Value::Null,
            limits,
            cancel,
            Slot::unlimited(),
        ));
        let _ = done.send((report, started.elapsed()));
        // Kept a while, so what the run left on it is not ended by its shutdown.
        std::thread::sleep(Duration::from_secs(10));
    });
    report
        .recv_timeout(within)
        .unwrap_or_else(|_| panic!("no report within {within:?}"))
}

fn timeout(ms: u64) -> Limits {
    Limits {
        timeout: Duration::from_millis(ms),
        ..Limits::default()
    }
}

fn error_text(report: &Report) -> String {
    match &report.outcome {
        Ok(v) => panic!("the script succeeded: {v}"),
        Err(e) => e.to_string(),
    }
}

/// Issue 32, H1: microtasks that keep queuing more never return control to the run; the time
/// limit, and the client's cancellation, still end the script.
#[test]
fn a_microtask_flood_stops_at_the_time_limit_and_on_cancel() {
    let floods = [
        "const f = () => { queueMicrotask(f); queueMicrotask(f); }; f(); await new Promise(() => {});",
        "const f = () => { Promise.resolve().then(f); Promise.resolve().then(f); }; f(); await new Promise(() => {});",
        "const f = async () => { for (;;) await null; }; f(); f(); await new Promise(() => {});",
    ];
    for code in floods {
        let (_, host) = host();
        let (r, took) = run_bounded(
            host,
            code,
            timeout(300),
            CancellationToken::new(),
            Duration::from_secs(10),
        );
        assert_eq!(r.outcome, Err(ScriptError::Timeout { ms: 300 }), "{code}");
        assert!(took < Duration::from_millis(1300), "{code}: {took:?}");
    }
    let (_, host) = host();
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        trigger.cancel();
    });
    let (r, took) = run_bounded(
        host,
        floods[0],
        timeout(60_000),
        cancel,
        Duration::from_secs(10),
    );
    assert_eq!(r.outcome, Err(ScriptError::Cancelled));
    assert!(took < Duration::from_millis(1300), "{took:?}");
}

/// Issue 32, M4: built-ins that copy or allocate much per call (a 20 MB string logged, JSON
/// parsed, strings repeated) stop close to the time limit, even when the script catches
/// what they throw.
#[test]
fn heavy_builtins_stop_near_the_time_limit() {
    let heavy = [
        "const o = 'q'.repeat(20e6); for (;;) console.log(o);",
        "const o = 'q'.repeat(20e6); for (;;) console.log(o, {o});",
        "const t = JSON.stringify(Array.from({length: 2e5}, (_, i) => ({i, s: 'x' + i}))); for (;;) JSON.parse(t);",
        "const t = JSON.stringify(Array.from({length: 2e5}, (_, i) => ({i, s: 'x' + i}))); for (;;) { try { JSON.parse(t); } catch (e) {} }",
        "for (;;) { try { 'q'.repeat(30e6); } catch (e) {} }",
        "const a = Array.from({length: 1e6}, (_, i) => i); for (;;) { try { a.join(','); } catch (e) {} }",
    ];
    for code in heavy {
        let (_, host) = host();
        let (r, took) = run_bounded(
            host,
            code,
            timeout(500),
            CancellationToken::new(),
            Duration::from_secs(20),
        );
        assert_eq!(r.outcome, Err(ScriptError::Timeout { ms: 500 }), "{code}");
        assert!(took < Duration::from_millis(2500), "{code}: {took:?}");
    }
}

/// A single native call that runs far past the limit without allocating (a naive substring
/// search, quadratic) cannot be interrupted; the report still comes on time.
#[test]
fn the_report_comes_on_time_even_when_a_native_call_overruns() {
    let (_, host) = host();
    let code = "const s = 'a'.repeat(1e6), p = 'a'.repeat(5e3) + 'b'; return s.indexOf(p);";
    let (r, took) = run_bounded(
        host,
        code,
        timeout(300),
        CancellationToken::new(),
        Duration::from_secs(60),
    );
    assert_eq!(r.outcome, Err(ScriptError::Timeout { ms: 300 }));
    assert!(took < Duration::from_millis(2300), "{took:?}");
}

/// A long run of awaited answers: each wakes the script. (A wake was lost when tokio's coop
/// budget ran out as the script began to wait, and the run hung to its deadline.)
#[tokio::test]
async fn every_answer_wakes_the_script() {
    let limits = Limits {
        max_calls: 1000,
        ..Limits::default()
    };
    let r = run_with(
        "let n = 0; for (let i = 0; i < 1000; i++) n += (await tools.call('t__echo', {i})).i; return n;",
        limits,
    )
    .await;
    assert_eq!(ok(&r), &json!(499_500));
}

/// Issue 32, H2: `tools.search` and `tools.describe` have a limit of their own.
#[tokio::test]
async fn lookups_have_a_limit_of_their_own() {
    let r = run_code(
        "for (let i = 0; i < 3000; i++) tools.search('read'); await new Promise(() => {});",
    )
    .await;
    let e = error_text(&r);
    assert!(e.contains("tools.search") && e.contains("100"), "{e}");
    let r = run_code(
        "for (let i = 0; ; i++) { try { await tools.describe('t__x' + i); } catch (e) {} }",
    )
    .await;
    let e = error_text(&r);
    assert!(e.contains("tools.describe") && e.contains("100"), "{e}");
    assert!(r.calls.is_empty());
    // Under the limit all is well.
    let r = run_code("for (let i = 0; i < 100; i++) await tools.search('read'); return 1;").await;
    assert_eq!(ok(&r), &json!(1));
}

/// Issue 32, H2: what the script holds on the host side (arguments of calls waiting for a
/// slot, queries, results not yet taken) counts against a budget; past it the script stops.
#[test]
fn host_side_memory_is_bounded() {
    let scripts = [
        // The issue's repro, with fewer but larger queries (the lookup limit comes first).
        "const q = 'hang '.repeat(400000); for (let i = 0; i < 60; i++) tools.search(q); await new Promise(() => {});",
        "const q = 'hang '.repeat(400000); for (let i = 0; i < 60; i++) tools.describe('t__hang' + q); await new Promise(() => {});",
        // Calls with 2 MB arguments, far more than run at once.
        "const big = 'x'.repeat(2e6); for (let i = 0; i < 100; i++) tools.call('t__hang', {big}); await new Promise(() => {});",
        // Results the script does not take: it computes while they arrive.
        "const first = tools.call('t__echo', {}); for (let i = 0; i < 8; i++) tools.call('t__big', {n: 5e6, ms: 200}); await first; for (;;) {}",
    ];
    for code in scripts {
        let (_, host) = host();
        let (r, took) = run_bounded(
            host,
            code,
            timeout(20_000),
            CancellationToken::new(),
            Duration::from_secs(30),
        );
        let e = error_text(&r);
        assert!(
            e.contains("out of memory") && e.contains("host"),
            "{code}: {e}"
        );
        assert!(took < Duration::from_secs(5), "{code}: {took:?}");
    }
}

/// Issue 32, H2: the host's futures for a script's calls, searches and descriptions end when the
/// script ends, whatever ended it.
#[test]
fn nested_work_ends_with_the_script() {
    let (load, host) = host();
    let code = "tools.call('t__hang', {}); tools.call('t__hang', {}); tools.search('hang'); tools.describe('t__hang'); await new Promise(() => {});";
    let (r, _) = run_bounded(
        host,
        code,
        timeout(300),
        CancellationToken::new(),
        Duration::from_secs(10),
    );
    assert_eq!(r.outcome, Err(ScriptError::Timeout { ms: 300 }));
    let deadline = crate::clock::Instant::now() + Duration::from_secs(5);
    while load.dropped.load(Ordering::SeqCst) < 4 && crate::clock::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(load.started.load(Ordering::SeqCst), 4);
    assert_eq!(
        load.dropped.load(Ordering::SeqCst),
        4,
        "every host future was dropped"
    );
}

/// Issue 32, L17: a call record keeps at most the first 200 characters of a tool's name.
#[tokio::test]
async fn call_records_cap_long_names() {
    let r =
        run_code("try { await tools.call('x'.repeat(65536), {}); } catch (e) {} return 1;").await;
    assert_eq!(ok(&r), &json!(1));
    let name = &r.calls[0].name;
    assert!(name.len() < 300, "{} characters kept", name.len());
    assert!(name.starts_with(&"x".repeat(200)), "{name}");
    assert!(name.ends_with("… (65536 characters)"), "{name}");
}

/// Workloads that allocate in every way a script can, each running until stopped.
const CHURN: [&str; 14] = [
    "const d = {a: [1, 2, {b: 'c'.repeat(100)}], n: null}; for (;;) JSON.parse(JSON.stringify([d, d, d]));",
    "let s = ''; for (let i = 0; ; i++) { s += String(i); if (s.length > 1e5) s = s.replace(/[0-4]+/g, 'x').slice(-1000); }",
    "const m = new Map(), t = new Set(); for (let i = 0; ; i++) { m.set('k' + i, {i}); t.add([i]); if (m.size > 5e4) { m.clear(); t.clear(); } }",
    "class P { constructor(x) { this.x = x; this.f = () => this.x; } } let a = []; for (let i = 0; ; i++) { a.push(new P(i)); if (a.length > 3e4) a = a.filter((p) => p.f() % 7 === 0).sort((p, q) => q.x - p.x); }",
    "const f = async (n) => { if (n > 0) await f(n - 1); return [n]; }; for (;;) await Promise.all([f(20), f(10), Promise.resolve().then(() => f(5))]);",
    "function* g() { for (let i = 0; ; i++) yield {i, s: 'v' + i}; } const out = []; for (const v of g()) { out.push(v); if (out.length > 1e4) out.length = 0; }",
    "for (;;) { try { try { throw new RangeError('r' + Math.random()); } finally { [1, 2, 3].map(String); } } catch (e) { e.stack.split('\\n'); } }",
    "for (let i = 0; ; i++) { new Date(i * 1e7).toISOString(); /(\\d+)-(\\d+)/.exec('ab 12-34 cd' + i); }",
    "const w = Array.from({length: 2e4}, (_, i) => 'w' + (i * 7919 % 2e4)); for (;;) w.slice().sort();",
    "for (let i = 0; ; i++) { const o = {}; Object.defineProperty(o, 'g', {get() { return i; }}); o[Symbol('s' + i)] = [o.g]; }",
    "let b = 1n; for (let i = 0; ; i++) { b = (b * 12345678901234567890n + BigInt(i)) % (10n ** 200n); }",
    "for (let i = 0; ; i++) { eval('(function(a){ return a + ' + i + '; })')(i); new Function('x', 'return x * ' + i)(i); Math.max.apply(null, [i, 1, 2]); }",
    "for (let i = 0; ; i++) { String.fromCharCode(i % 65536, 0xd800).normalize('NFC').localeCompare('x'); encodeURIComponent('é' + i); }",
    "const big = []; for (;;) big.push({s: 'x'.repeat(1000), a: new Array(100).fill(big.length)});",
];

/// A stop can come at any allocation: the allocator refuses all but the interrupt's error
/// from then on. Whatever the script was doing, the run reports, the runtime is torn down
/// (QuickJS asserts at teardown that nothing leaked) and the next runs work.
#[test]
fn stops_at_any_point_leave_the_runtime_sound() {
    stop_churn(42, 2);
}

/// The same, longer: `cargo test --lib stops_at_any_point_at_length -- --ignored`.
#[test]
#[ignore = "minutes"]
fn stops_at_any_point_at_length() {
    stop_churn(7, 40);
}

fn stop_churn(seed: u64, rounds: usize) {
    let mut random = seed;
    let mut next = move |n: u64| {
        random = random
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (random >> 33) % n
    };
    for _ in 0..rounds {
        for code in CHURN {
            let (_, host) = host();
            let ms = 5 + next(150);
            let cancel = CancellationToken::new();
            if next(3) == 0 {
                let trigger = cancel.clone();
                let after = Duration::from_millis(next(100));
                std::thread::spawn(move || {
                    std::thread::sleep(after);
                    trigger.cancel();
                });
            }
            let (r, _) = run_bounded(host, code, timeout(ms), cancel, Duration::from_secs(20));
            assert!(
                matches!(
                    r.outcome,
                    Err(ScriptError::Timeout { .. }
                        | ScriptError::Cancelled
                        | ScriptError::Memory { .. })
                ),
                "{code}: {:?}",
                r.outcome
            );
        }
    }
    let (_, host) = host();
    let (r, _) = run_bounded(
        host,
        "return 1 + 1;",
        timeout(5000),
        CancellationToken::new(),
        Duration::from_secs(20),
    );
    assert_eq!(r.outcome, Ok(json!(2)));
}

/// A script that holds all its memory and catches what it can: the interrupt's error still
/// gets made (the allocator's grace past the limit), so it stays uncatchable and ends the
/// script.
#[test]
fn a_script_at_its_memory_limit_cannot_catch_the_interrupt() {
    let (_, host) = host();
    // Big strings first, then small objects, made without calls, to the last bytes.
    let code = "const keep = []; try { for (;;) keep.push('x'.repeat(1 << 16) + keep.length); } catch (e) {}
                let head = null; try { for (;;) head = {next: head}; } catch (e) {}
                for (;;) { try { while (true) {} } catch (e) {} }";
    let (r, _) = run_bounded(
        host,
        code,
        timeout(60_000),
        CancellationToken::new(),
        Duration::from_secs(20),
    );
    assert_eq!(r.outcome, Err(ScriptError::Memory { mib: 64 }));
}
