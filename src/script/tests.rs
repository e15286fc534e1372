//! The sandbox against a host of a few fixed tools: results, errors, limits and globals.
//! Real upstream servers are exercised end to end in tests/e2e/test_script.py.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rmcp::model::ContentBlock;
use serde_json::json;

use super::*;

/// Calls running at once, and the most seen.
#[derive(Default)]
struct Load {
    running: AtomicUsize,
    most: AtomicUsize,
}

/// Tools `t__echo` (structured: its arguments), `t__json` (JSON text), `t__text`, `t__fail`
/// (error result) and `t__slow` (sleeps `ms`).
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

    fn search(&self, query: String, limit: Option<u32>) -> HostFuture<Result<Value, String>> {
        Box::pin(async move { Ok(json!({"query": query, "limit": limit})) })
    }

    fn describe(&self, name: String) -> HostFuture<Result<Value, String>> {
        Box::pin(async move {
            if name == "t__echo" {
                Ok(json!({"name": name}))
            } else {
                Err(format!("unknown tool \"{name}\""))
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
    )
    .await;
    assert_eq!(r.outcome, Err(ScriptError::Cancelled));
}

/// A script that computes without awaiting hands its worker's other tasks to another thread:
/// with one worker, taken by the script first, a task spawned after it still runs; and the
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
