//! The script's API as QuickJS sees it: `tools` (`call`, `search`, `describe`) and `console`,
//! Rust functions that look at the stop first and measure what the script passes before it
//! is copied to the host.

use std::future::Future;
use std::sync::Arc;

use rquickjs::prelude::{Coerced, FromJs, Func, Opt, Rest};
use rquickjs::{Ctx, Exception, Function, Object, Promise, Value as JsValue, qjs};

use super::{Answer, Hold, Shared, error_text, record_name};
use crate::script::Rejection;
use crate::surrogates::from_json;

/// What the API functions do once the run is stopped: throw `null` at once, doing no work;
/// the interrupt ends the script soon after.
fn halted(ctx: &Ctx<'_>) -> rquickjs::Error {
    ctx.throw(JsValue::new_null(ctx.clone()))
}

/// The length of a JavaScript string in UTF-16 units, read without copying it; its UTF-8 is
/// at least as long.
fn length(ctx: &Ctx<'_>, text: &rquickjs::String<'_>) -> usize {
    let mut length: i64 = 0;
    // SAFETY: a live string of this context; reading `length` of a string does not allocate.
    let read = unsafe { qjs::JS_GetLength(ctx.as_raw().as_ptr(), text.as_raw(), &raw mut length) };
    if read < 0 {
        let _ = ctx.catch();
        return usize::MAX;
    }
    usize::try_from(length).unwrap_or(usize::MAX)
}

/// The script's API as globals: `tools` (`call`, `search`, `describe`) and `console`, frozen.
/// Each function first looks at the stop (and the clock), and does no work once stopped; text
/// the script passes is measured before it is copied to the host.
pub(super) fn install<'js>(ctx: &Ctx<'js>, shared: &Arc<Shared>) -> rquickjs::Result<()> {
    let tools = Object::new(ctx.clone())?;
    let s = shared.clone();
    tools.set(
        "call",
        Func::from(
            move |ctx: Ctx<'js>, name: JsValue<'js>, args: Opt<JsValue<'js>>| {
                if s.control.check() {
                    return Err(halted(&ctx));
                }
                let Some(name) = name.as_string() else {
                    return rejected(&ctx, "tools.call(name, args): name must be a qualified tool name such as \"time__get_current_time\"");
                };
                if !s.fits(length(&ctx, name)) {
                    return Err(halted(&ctx));
                }
                let Ok(name) = name.to_string() else {
                    return rejected(&ctx, "tools.call(name, args): name must be a qualified tool name such as \"time__get_current_time\"");
                };
                let args = match args.0.filter(|a| !a.is_undefined()) {
                    None => "{}".to_owned(),
                    Some(a) if a.is_object() && !a.is_array() && !a.is_function() => {
                        match ctx.json_stringify(a)? {
                            Some(json) if !s.fits(name.len().saturating_add(length(&ctx, &json))) => {
                                return Err(halted(&ctx));
                            }
                            Some(json) => json.to_string()?,
                            None => "{}".to_owned(),
                        }
                    }
                    Some(_) => {
                        let shown = record_name(&name);
                        return rejected(&ctx, &format!("tools.call(\"{shown}\", args): args must be an object of the tool's arguments"));
                    }
                };
                let Some(hold) = s.hold(name.len() + args.len()) else {
                    return Err(halted(&ctx));
                };
                let index = s.start_call(&name);
                answer(&ctx, name.clone(), s.clone().call(index, name, args, hold))
            },
        ),
    )?;
    let s = shared.clone();
    tools.set(
        "search",
        Func::from(
            move |ctx: Ctx<'js>, query: Coerced<rquickjs::String<'js>>, limit: Opt<f64>| {
                let Some(hold) = s.lookup(&ctx, &query.0) else {
                    return Err(halted(&ctx));
                };
                let limit = limit.0.filter(|l| *l >= 0.0).map(|l| l as u32);
                let query = rust_string(&ctx, query.0);
                answer(
                    &ctx,
                    "search_tools".into(),
                    s.clone().ask(hold, move |host| host.search(query, limit)),
                )
            },
        ),
    )?;
    let s = shared.clone();
    tools.set(
        "describe",
        Func::from(move |ctx: Ctx<'js>, name: Coerced<rquickjs::String<'js>>| {
            let Some(hold) = s.lookup(&ctx, &name.0) else {
                return Err(halted(&ctx));
            };
            let name = rust_string(&ctx, name.0);
            answer(
                &ctx,
                "get_tool_details".into(),
                s.clone().ask(hold, move |host| host.describe(name)),
            )
        }),
    )?;
    let console = Object::new(ctx.clone())?;
    for level in ["log", "info", "debug", "warn", "error"] {
        let s = shared.clone();
        console.set(
            level,
            Func::from(move |ctx: Ctx<'js>, args: Rest<JsValue<'js>>| {
                if s.control.check() {
                    return;
                }
                let mut room = s.log_room();
                if room == 0 {
                    return;
                }
                let mut shown = Vec::with_capacity(args.0.len());
                for arg in args.0 {
                    let Some(text) = show(&ctx, arg, room) else {
                        return s.log(level, None);
                    };
                    room = room.saturating_sub(text.len() + 1);
                    shown.push(text);
                }
                s.log(level, Some(shown.join(" ")));
            }),
        )?;
    }
    let freeze: Function = ctx.globals().get::<_, Object>("Object")?.get("freeze")?;
    let globals = ctx.globals();
    globals.set("tools", freeze.call::<_, Object>((tools,))?)?;
    globals.set("console", freeze.call::<_, Object>((console,))?)?;
    Ok(())
}

impl Shared {
    /// A search or description's start: the stop and the clock looked at, the lookup
    /// counted, its text (`asked`) measured and counted on the host side; `None` when the
    /// script is (now) stopped.
    fn lookup(&self, ctx: &Ctx<'_>, asked: &rquickjs::String<'_>) -> Option<Hold> {
        if self.control.check() || !self.start_lookup() || !self.fits(length(ctx, asked)) {
            return None;
        }
        // Counted from the JavaScript length; the UTF-8 copy is at least as long, and its
        // exact length is counted once the question is asked.
        self.hold(length(ctx, asked))
    }
}

/// A promise settled by `reply` on the runtime's own scheduler: with the answer's JSON, or
/// rejected with an `Error` whose `tool` is `tool`. (Not rquickjs's `Promised`: when settling
/// fails, as it does while a script is being stopped, that prints to stdout, which belongs to
/// the protocol.)
fn answer<'js>(
    ctx: &Ctx<'js>,
    tool: String,
    reply: impl Future<Output = Result<Answer, Rejection>> + 'js,
) -> rquickjs::Result<Promise<'js>> {
    let (promise, resolve, reject) = ctx.promise()?;
    let ctx = ctx.clone();
    ctx.clone().spawn(async move {
        // Fails only when the script is being stopped: nobody waits for the answer then.
        let _ = match reply.await {
            Ok(answer) => ctx
                .json_parse(answer.json)
                .and_then(|v| resolve.call::<_, ()>((v,))),
            Err(Rejection(message)) => Exception::from_message(ctx.clone(), &message)
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

/// A console argument as text: strings as they are, errors with their stack, the rest as
/// JSON; `None` when it is longer than `room` bytes, measured before it is copied.
fn show<'js>(ctx: &Ctx<'js>, value: JsValue<'js>, room: usize) -> Option<String> {
    if let Some(text) = value.as_string() {
        return within(ctx, text.clone(), room);
    }
    if let Some(error) = value.as_object().cloned().and_then(Exception::from_object) {
        return Some(error_text(&error)).filter(|text| text.len() <= room);
    }
    let text = match ctx.json_stringify(value.clone()) {
        Ok(Some(json)) => json,
        Ok(None) => Coerced::<rquickjs::String>::from_js(ctx, value).ok()?.0,
        Err(_) => {
            // Cyclic or BigInt: clear the exception, show what String() would.
            let _ = ctx.catch();
            Coerced::<rquickjs::String>::from_js(ctx, value).ok()?.0
        }
    };
    within(ctx, text, room)
}

/// `text` as Rust text if it is at most `room` bytes, measured before it is copied.
pub(super) fn within<'js>(
    ctx: &Ctx<'js>,
    text: rquickjs::String<'js>,
    room: usize,
) -> Option<String> {
    if length(ctx, &text) > room {
        return None;
    }
    Some(rust_string(ctx, text)).filter(|text| text.len() <= room)
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
