//! A fault-injection MCP server over stdio, for meta-server's fault and load tests.
//!
//! Start-up modes (argv):
//! - `--slow-init SECS`: wait SECS seconds before answering `initialize` or `server/discover`.
//! - `--garbage-on-start`: write non-JSON lines to stdout before reading anything.
//! - `--tag TEXT`: ignored; lets a test find its own processes by command line.
//! - `--ttl-ms MS`: `tools/list` says its result stays fresh for MS milliseconds (`ttlMs`).
//! - `--ignore-eof`: keep running after stdin closes (stopping it takes a signal).
//! - `--legacy`: no `server/discover` (-32601), so a client speaks 2025-11-25 with it and its
//!   questions to the client are requests, not input requests of a result.
//! - `--endless KIND`: the `KIND` listing (`tools`, `prompts`, `resources` or `templates`)
//!   never ends: every page has `--page-items N` items (default 100) and a new `nextCursor`.
//! - `--cycle KIND`: the `KIND` listing's pages all give the same `nextCursor`.
//! - `--prompts N`, `--resources N`: that many prompts (`prompt-<i>`) or resources
//!   (`fault://r/<i>`), in one page.
//! - `--templates N` (with `--template-parts P`, default 1): N resource templates; with one
//!   part `fault://t<i>/{id}`, with more P parts, variables and `a`s in turn: every variable
//!   is reachable everywhere in a URI of `a`s, the costliest to match (`aaa...a/a` matches
//!   none of them, and only at its end).
//! - `--completions N`: `completion/complete` answers N values, all said in one result.
//!
//! Resources can be subscribed to (`resources/subscribe`); each subscription is recorded as
//! `subscribed <uri>` (see `FAULT_EVENTS`).
//!
//! Environment:
//! - `FAULT_EVENTS=<file>`: append one line per observed event (`cancelled <tool>`,
//!   `started <tool>`, `after-cancel-done`), so tests can see what reached the server.
//!
//! Tools (selected by name):
//! - `echo {text}`: returns `text`.
//! - `pid`: returns this process's id.
//! - `crash`: exits the process (code 3) mid-call, without answering.
//! - `hang`: never answers; records `cancelled hang` when cancelled.
//! - `garbage`: writes garbage lines to stdout (plain text, a broken JSON line, a JSON value that
//!   is not JSON-RPC), then answers normally with `survived garbage`.
//! - `huge {mb}`: returns `mb` MB of numbered text lines.
//! - `flood {count}`: sends `count` logging notifications and `count` progress notifications
//!   (when the call carries a progress token), then answers `flooded <count>`.
//! - `sleep_then_echo {ms, text}`: sleeps, then returns `text`.
//! - `out_of_order {text, batch}`: waits until `batch` such calls are pending, then answers
//!   them in reverse arrival order.
//! - `progress_after_cancel`: sends progress every 50 ms until cancelled, then keeps sending
//!   20 more with message `after-cancel` on the same token and records `after-cancel-done`.
//! - `elicit {count, pad?}`: asks the client `count` form elicitations at once (records
//!   `elicit refused` for each refused) and answers `answered A, refused R: ` and the first
//!   refusal (`pad`, any string, only makes the call big).

// Logging notifications are deprecated (SEP-2577) but still what servers of the
// `initialize` era send, so the flood uses them.
#![allow(deprecated)]

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    CompletionInfo, ContentBlock, DiscoverRequestMethod, DiscoverResult, ElicitRequest,
    ElicitRequestParams, ElicitationSchema, GetPromptRequestParams, GetPromptResponse,
    GetPromptResult, Implementation, InitializeRequestParams, InitializeResult, InputRequest,
    InputRequiredResult, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, LoggingLevel, LoggingMessageNotificationParam, PaginatedRequestParams,
    ProgressNotificationParam, ProgressToken, Prompt, PromptArgument, PromptMessage,
    ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate, Role, ServerCapabilities, ServerConfig,
    SubscribeRequestParams, Tool, UnsubscribeRequestParams,
};
use rmcp::service::{Peer, RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler, ServiceExt};
use serde_json::{Map, Value, json};
use tokio::sync::oneshot;

/// A listing of one kind, as the command line shaped it.
#[derive(Clone, Copy, Default, PartialEq)]
enum Listing {
    /// All items, one page.
    #[default]
    Plain,
    /// Pages of `page_items` items without end.
    Endless,
    /// Pages whose `nextCursor` is always the same.
    Cycle,
}

#[derive(Clone, Default)]
struct FaultServer {
    slow_init: Option<Duration>,
    ttl_ms: Option<u64>,
    legacy: bool,
    /// How each kind is listed, by kind name.
    listings: std::collections::HashMap<String, Listing>,
    page_items: usize,
    prompts: usize,
    resources: usize,
    templates: usize,
    template_parts: usize,
    completions: usize,
    /// Pending `out_of_order` calls, in arrival order.
    waiting: Arc<Mutex<Vec<oneshot::Sender<()>>>>,
}

fn record(event: &str) {
    if let Some(path) = std::env::var_os("FAULT_EVENTS") {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("FAULT_EVENTS file opens");
        writeln!(file, "{event}").expect("FAULT_EVENTS file writes");
    }
}

fn text(t: impl Into<String>) -> Result<CallToolResponse, McpError> {
    Ok(CallToolResult::success(vec![ContentBlock::text(t.into())]).into())
}

fn tool(name: &str, description: &str, properties: Value, required: &[&str]) -> Tool {
    let schema = json!({"type": "object", "properties": properties, "required": required});
    let Value::Object(schema) = schema else {
        unreachable!()
    };
    Tool::new(name.to_owned(), description.to_owned(), Arc::new(schema))
}

fn tools() -> Vec<Tool> {
    let none = json!({});
    vec![
        tool(
            "echo",
            "Returns its text",
            json!({"text": {"type": "string"}}),
            &["text"],
        ),
        tool("pid", "Returns the server's process id", none.clone(), &[]),
        tool("crash", "Exits the process mid-call", none.clone(), &[]),
        tool("hang", "Never answers", none.clone(), &[]),
        tool(
            "garbage",
            "Writes garbage to stdout, then answers",
            none.clone(),
            &[],
        ),
        tool(
            "huge",
            "Returns mb megabytes of text",
            json!({"mb": {"type": "integer", "minimum": 0}}),
            &["mb"],
        ),
        tool(
            "flood",
            "Sends count notifications, then answers",
            json!({"count": {"type": "integer", "minimum": 0}}),
            &["count"],
        ),
        tool(
            "sleep_then_echo",
            "Sleeps ms milliseconds, then returns text",
            json!({"ms": {"type": "integer", "minimum": 0}, "text": {"type": "string"}}),
            &["ms", "text"],
        ),
        tool(
            "out_of_order",
            "Answers a batch of concurrent calls in reverse order",
            json!({"text": {"type": "string"}, "batch": {"type": "integer", "minimum": 1}}),
            &["text", "batch"],
        ),
        tool(
            "progress_after_cancel",
            "Sends progress until cancelled, and after",
            none,
            &[],
        ),
        tool(
            "elicit",
            "Asks the client count questions at once",
            json!({"count": {"type": "integer", "minimum": 0}, "pad": {"type": "string"}}),
            &["count"],
        ),
    ]
}

/// One page of a listing of `kind` whose items are `all` (made on demand, by index): the
/// items after `cursor` and the next cursor, as the server's `--endless`/`--cycle` say.
fn page<T>(
    server: &FaultServer,
    kind: &str,
    cursor: Option<&str>,
    all: usize,
    item: impl Fn(usize) -> T,
) -> (Vec<T>, Option<String>) {
    let n: usize = cursor.and_then(|c| c.parse().ok()).unwrap_or(0);
    match server.listings.get(kind).copied().unwrap_or_default() {
        Listing::Plain => ((0..all).map(item).collect(), None),
        Listing::Endless => {
            let size = server.page_items;
            let items = (n * size..(n + 1) * size).map(item).collect();
            (items, Some((n + 1).to_string()))
        }
        Listing::Cycle => ((0..all.max(1)).map(item).collect(), Some("1".into())),
    }
}

/// Resource template `i`: `fault://t<i>/{id}`, or with more `parts`, variables and `a`s in
/// turn (`{v0_<i>}a{v2_<i>}a...`).
fn template(i: usize, parts: usize) -> String {
    if parts <= 1 {
        return format!("fault://t{i}/{{id}}");
    }
    (0..parts)
        .map(|k| {
            if k % 2 == 0 {
                format!("{{v{k}_{i}}}")
            } else {
                "a".to_owned()
            }
        })
        .collect()
}

fn arg_u64(args: &Map<String, Value>, key: &str) -> Result<u64, McpError> {
    args.get(key)
        .and_then(Value::as_u64)
        .ok_or_else(|| McpError::invalid_params(format!("{key} must be an integer"), None))
}

fn arg_str(args: &Map<String, Value>, key: &str) -> Result<String, McpError> {
    args.get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| McpError::invalid_params(format!("{key} must be a string"), None))
}

async fn progress(peer: &Peer<RoleServer>, token: &ProgressToken, n: u64, message: &str) {
    let p = ProgressNotificationParam::new(token.clone(), n as f64).with_message(message);
    let _ = peer.notify_progress(p).await;
}

impl FaultServer {
    async fn out_of_order(
        &self,
        reply: String,
        batch: usize,
    ) -> Result<CallToolResponse, McpError> {
        let (tx, rx) = oneshot::channel();
        let release = {
            let mut waiting = self.waiting.lock().expect("waiting lock");
            waiting.push(tx);
            if waiting.len() >= batch {
                std::mem::take(&mut *waiting)
            } else {
                Vec::new()
            }
        };
        if !release.is_empty() {
            // Last in, first out; the pause lets each answer go out before the next.
            tokio::spawn(async move {
                for tx in release.into_iter().rev() {
                    let _ = tx.send(());
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            });
        }
        let _ = rx.await;
        text(reply)
    }
}

impl ServerHandler for FaultServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_logging()
                .enable_prompts()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_completions()
                .build(),
        )
        .with_server_info(Implementation::new("fault-server", "0.1.0"))
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        if let Some(delay) = self.slow_init {
            tokio::time::sleep(delay).await;
        }
        cx.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn discover(&self, _cx: RequestContext<RoleServer>) -> Result<DiscoverResult, McpError> {
        if self.legacy {
            return Err(McpError::method_not_found::<DiscoverRequestMethod>());
        }
        if let Some(delay) = self.slow_init {
            tokio::time::sleep(delay).await;
        }
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            self.get_info(),
        ))
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        let all = tools();
        let (items, next) = page(self, "tools", cursor, all.len(), |i| {
            let mut tool = all[i % all.len()].clone();
            if i >= all.len() {
                tool.name = format!("{}_{i}", tool.name).into();
            }
            tool
        });
        let mut result = ListToolsResult::with_all_items(items);
        result.next_cursor = next;
        result.ttl_ms = self.ttl_ms;
        Ok(result)
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        let (items, next) = page(self, "prompts", cursor, self.prompts, |i| {
            let argument = PromptArgument::new("topic").with_required(false);
            Prompt::new(
                format!("prompt-{i}"),
                Some(format!("Prompt number {i}")),
                Some(vec![argument]),
            )
        });
        let mut result = ListPromptsResult::with_all_items(items);
        result.next_cursor = next;
        Ok(result)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let message = PromptMessage::new_text(Role::User, request.name);
        Ok(GetPromptResult::new(vec![message]).into())
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        let (items, next) = page(self, "resources", cursor, self.resources, |i| {
            Resource::new(format!("fault://r/{i}"), format!("resource-{i}"))
        });
        let mut result = ListResourcesResult::with_all_items(items);
        result.next_cursor = next;
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        let (items, next) = page(self, "templates", cursor, self.templates, |i| {
            ResourceTemplate::new(template(i, self.template_parts), format!("template-{i}"))
        });
        let mut result = ListResourceTemplatesResult::with_all_items(items);
        result.next_cursor = next;
        Ok(result)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let text = format!("read {}", request.uri.len());
        let contents = ResourceContents::text(text, request.uri);
        Ok(ReadResourceResult::new(vec![contents]).into())
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        record(&format!("subscribed {}", request.uri));
        Ok(())
    }

    async fn unsubscribe(
        &self,
        _request: UnsubscribeRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Ok(())
    }

    async fn complete(
        &self,
        _request: CompleteRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let values = (0..self.completions)
            .map(|i| format!("value-{i}"))
            .collect();
        // Built as a struct: CompletionInfo::new refuses more than MCP's 100 values.
        let mut completion = CompletionInfo::default();
        completion.values = values;
        completion.total = Some(self.completions as u32);
        Ok(CompleteResult::new(completion))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let answers = request.input_responses;
        let args = request.arguments.unwrap_or_default();
        let token = cx.meta.get_progress_token();
        match request.name.as_ref() {
            "echo" => text(arg_str(&args, "text")?),
            "pid" => text(std::process::id().to_string()),
            "crash" => {
                eprintln!("fault_server: crashing on purpose");
                std::process::exit(3);
            }
            "hang" => {
                record("started hang");
                cx.ct.cancelled().await;
                record("cancelled hang");
                Err(McpError::internal_error("cancelled", None))
            }
            "garbage" => {
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(
                    b"this is not json\n{\"jsonrpc\": \"2.0\", \"id\n\x01\x02 binary\n[1, 2, 3]\n",
                );
                let _ = out.flush();
                drop(out);
                text("survived garbage")
            }
            "huge" => {
                let bytes = arg_u64(&args, "mb")? as usize * 1_000_000;
                let mut body = String::with_capacity(bytes + 64);
                let mut n = 0u64;
                while body.len() < bytes {
                    body.push_str(&format!(
                        "line {n:08} the quick brown fox jumps over the lazy dog\n"
                    ));
                    n += 1;
                }
                text(body)
            }
            "flood" => {
                let count = arg_u64(&args, "count")?;
                for n in 0..count {
                    let log = LoggingMessageNotificationParam::new(
                        LoggingLevel::Info,
                        json!(format!("flood {n}")),
                    );
                    let _ = cx.peer.notify_logging_message(log).await;
                    if let Some(token) = &token {
                        progress(&cx.peer, token, n, "flood").await;
                    }
                }
                text(format!("flooded {count}"))
            }
            "sleep_then_echo" => {
                tokio::time::sleep(Duration::from_millis(arg_u64(&args, "ms")?)).await;
                text(arg_str(&args, "text")?)
            }
            "out_of_order" => {
                let batch = arg_u64(&args, "batch")?.max(1) as usize;
                self.out_of_order(arg_str(&args, "text")?, batch).await
            }
            "progress_after_cancel" => {
                let Some(token) = token else {
                    return Err(McpError::invalid_params("needs a progress token", None));
                };
                record("started progress_after_cancel");
                let mut n = 0;
                loop {
                    tokio::select! {
                        () = cx.ct.cancelled() => break,
                        () = tokio::time::sleep(Duration::from_millis(50)) => {
                            progress(&cx.peer, &token, n, "before-cancel").await;
                            n += 1;
                        }
                    }
                }
                record("cancelled progress_after_cancel");
                for _ in 0..20 {
                    progress(&cx.peer, &token, n, "after-cancel").await;
                    n += 1;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                record("after-cancel-done");
                Err(McpError::internal_error("cancelled", None))
            }
            "elicit" => {
                let count = arg_u64(&args, "count")?;
                let question = |n| {
                    let schema = ElicitationSchema::builder()
                        .optional_string("answer")
                        .build()
                        .expect("a valid schema");
                    ElicitRequestParams::FormElicitationParams {
                        meta: None,
                        message: format!("question {n}"),
                        requested_schema: schema,
                    }
                };
                // A 2026-07-28 client takes no requests: the questions go in the result.
                if cx.protocol_version().is_some_and(|v| !v.has_initialize()) {
                    if let Some(answers) = answers {
                        return text(format!("answered {}, refused 0: ", answers.len()));
                    }
                    let asked = (0..count).map(|n| {
                        let request = ElicitRequest::new(question(n));
                        (format!("q{n}"), InputRequest::Elicitation(request))
                    });
                    let asked = InputRequiredResult::new(Some(asked.collect()), None);
                    return Ok(CallToolResponse::InputRequired(asked));
                }
                let peer = &cx.peer;
                let ask = |n| async move {
                    let answer = peer.create_elicitation(question(n)).await;
                    if answer.is_err() {
                        record("elicit refused");
                    }
                    answer
                };
                let answers = futures::future::join_all((0..count).map(ask)).await;
                let refused: Vec<String> = answers
                    .iter()
                    .filter_map(|a| a.as_ref().err().map(ToString::to_string))
                    .collect();
                let first = refused.first().cloned().unwrap_or_default();
                let answered = answers.len() - refused.len();
                text(format!(
                    "answered {answered}, refused {}: {first}",
                    refused.len()
                ))
            }
            other => Err(McpError::invalid_params(
                format!("unknown tool {other}"),
                None,
            )),
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut server = FaultServer {
        page_items: 100,
        template_parts: 1,
        ..FaultServer::default()
    };
    let count = |arg: Option<String>| -> Result<usize, Box<dyn std::error::Error>> {
        Ok(arg.ok_or("a count is missing")?.parse()?)
    };
    let mut args = std::env::args().skip(1);
    let mut garbage_on_start = false;
    let mut ignore_eof = false;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--slow-init" => {
                let secs: u64 = args.next().ok_or("--slow-init needs seconds")?.parse()?;
                server.slow_init = Some(Duration::from_secs(secs));
            }
            "--ttl-ms" => {
                server.ttl_ms = Some(args.next().ok_or("--ttl-ms needs milliseconds")?.parse()?);
            }
            "--endless" | "--cycle" => {
                let kind = args.next().ok_or("--endless and --cycle need a kind")?;
                let listing = if arg == "--endless" {
                    Listing::Endless
                } else {
                    Listing::Cycle
                };
                server.listings.insert(kind, listing);
            }
            "--page-items" => server.page_items = count(args.next())?,
            "--prompts" => server.prompts = count(args.next())?,
            "--resources" => server.resources = count(args.next())?,
            "--templates" => server.templates = count(args.next())?,
            "--template-parts" => server.template_parts = count(args.next())?,
            "--completions" => server.completions = count(args.next())?,
            "--garbage-on-start" => garbage_on_start = true,
            "--ignore-eof" => ignore_eof = true,
            "--legacy" => server.legacy = true,
            "--tag" => {
                args.next().ok_or("--tag needs a value")?;
            }
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    if garbage_on_start {
        let mut out = std::io::stdout().lock();
        out.write_all(b"fault_server starting (not json)\n{\"half\": \n")?;
        out.flush()?;
    }
    server
        .serve(rmcp::transport::stdio())
        .await?
        .waiting()
        .await?;
    if ignore_eof {
        // Lives on after its client closed stdin, as some servers do.
        std::future::pending::<()>().await;
    }
    Ok(())
}
