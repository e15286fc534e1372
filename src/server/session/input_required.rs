//! Calls of 2026-07-28 clients that wait for their client's input (SEP-2322). Such a client
//! takes no requests, so when an upstream asks for sampling, elicitation or roots during its
//! call, the call answers with an `InputRequiredResult` carrying the question, while the
//! upstream call goes on waiting in this process; the client's retry (the same request with
//! `inputResponses` and the `requestState`) hands the answers over and waits for the next turn:
//! the result, or more questions.
//!
//! The rule: a `requestState` is an opaque handle to a call held in memory by the meta-server
//! process that made it (`<process id>.<128 random bits>`), not the call's state itself (the
//! upstream's own state stays with the held call). It is good only in that process, for the
//! principal that made the call and a retry of the same request, for one turn (each
//! `InputRequiredResult` gets a new one), and for [`RETRY_WINDOW`] after it (the call itself
//! stays bounded by the server's `timeoutSecs`).
//! Anywhere else (another replica, a restarted process, after the window) the retry gets an
//! error that says so and that the call must be made again; a load balancer in front of
//! several replicas must send a retry where its first request went.
//!
//! Held calls are bounded ([`Parked`]): in number and in the bytes of their requests, for
//! each principal (its share) and for all together. A call that would go past a bound is
//! refused (and cancelled) when it first asks for input, with an error for its principal
//! alone; a held call keeps a checksum of its request, not the request.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use rand::Rng;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    ClientCapabilities, InputRequest, InputRequests, InputRequiredResult, InputResponses,
};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use xxhash_rust::xxh3::Xxh3;

use crate::upstream::{Inputs, PendingInput};

/// How long a call that asked for input waits for the client's retry before it is dropped
/// (and the upstream request cancelled).
pub(super) const RETRY_WINDOW: Duration = Duration::from_secs(120);

/// Calls waiting for a retry at once in this process, of all principals.
const MAX_HELD: usize = 256;
/// Calls of one principal waiting at once: its share, so that one cannot take every place.
const MAX_HELD_EACH: usize = 32;
/// Bytes of the requests (as JSON) of the calls waiting at once, of all principals: what the
/// calls hold while they wait is about twice this (the call's arguments, the upstream's).
const MAX_HELD_BYTES: usize = 64 << 20;
/// Bytes of the requests of one principal's waiting calls (four bodies at the HTTP limit).
const MAX_HELD_BYTES_EACH: usize = 16 << 20;

/// What a request of the call gets: the call's result, or the questions to answer first.
pub(super) enum Turn<T> {
    Done(T),
    Input(InputRequiredResult),
}

/// The calls of this process waiting for input, by `requestState`.
pub(super) struct Waiting<T> {
    /// Names this process in every `requestState` it makes.
    process: String,
    held: Mutex<HashMap<String, Arc<Held<T>>>>,
    /// The places of every kind of waiting call.
    parked: Arc<Parked>,
}

/// Who made a call and what it was: a retry must match both.
pub(super) struct Made {
    pub principal: Option<Arc<str>>,
    /// The request, without its `inputResponses`, `requestState` and `_meta`.
    pub request: Value,
}

/// What a held call keeps of its [`Made`]: the principal, a checksum of the request (key
/// order aside) and its size. A checksum, not a cryptographic digest, is enough: a retry's
/// request is only compared, never run (the held call runs the request that made it).
struct Kept {
    principal: Option<Arc<str>>,
    request: u128,
    bytes: usize,
}

impl From<&Made> for Kept {
    fn from(made: &Made) -> Self {
        let mut hasher = Xxh3::new();
        let bytes = digest(&made.request, &mut hasher);
        Self {
            principal: made.principal.clone(),
            request: hasher.digest128(),
            bytes,
        }
    }
}

/// Feeds `value` to `hasher` tagged and length-prefixed, every object's keys sorted (so two
/// values hash alike only if they are equal); returns about the bytes it holds: its text
/// unescaped, a few bytes per item. Never escapes or copies a string.
fn digest(value: &Value, hasher: &mut Xxh3) -> usize {
    let mut text = |tag: &[u8], text: &str| {
        hasher.update(tag);
        hasher.update(&(text.len() as u64).to_le_bytes());
        hasher.update(text.as_bytes());
        text.len() + 2
    };
    match value {
        Value::Null => text(b"n", ""),
        Value::Bool(b) => text(b"b", if *b { "t" } else { "f" }),
        Value::Number(n) => text(b"#", &n.to_string()),
        Value::String(s) => text(b"s", s),
        Value::Array(items) => {
            let size = text(b"[", &items.len().to_string());
            size + items.iter().map(|item| digest(item, hasher)).sum::<usize>()
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let mut size = text(b"{", &keys.len().to_string());
            for key in keys {
                size += digest(&Value::from(key.as_str()), hasher) + digest(&map[key], hasher);
            }
            size
        }
    }
}

/// The places of the calls waiting for input in this process, shared by every kind of call:
/// how many each principal holds and the bytes of their requests, and the totals.
#[derive(Default)]
pub(super) struct Parked(Mutex<Ledger>);

#[derive(Default)]
struct Ledger {
    calls: usize,
    bytes: usize,
    by: HashMap<Option<Arc<str>>, (usize, usize)>,
}

/// A held call's place; dropping it gives the place back.
struct Place {
    parked: Arc<Parked>,
    principal: Option<Arc<str>>,
    bytes: usize,
}

impl Parked {
    /// A place for a call of `kept`'s principal, or the error its client gets.
    fn admit(self: &Arc<Self>, kept: &Kept) -> Result<Place, McpError> {
        let mut ledger = self.0.lock();
        let (calls, bytes) = ledger.by.get(&kept.principal).copied().unwrap_or_default();
        let mb = |bytes: usize| format!("{:.1}", bytes as f64 / f64::from(1 << 20));
        if calls + 1 > MAX_HELD_EACH || bytes + kept.bytes > MAX_HELD_BYTES_EACH {
            let who = match kept.principal.as_deref() {
                Some(name) if name != super::principal::ANONYMOUS => format!("\"{name}\""),
                _ => "this client".to_owned(),
            };
            return Err(McpError::internal_error(
                format!(
                    "{who} already has {calls} calls ({} MiB of requests) waiting for input in this meta-server, and this one ({} MiB) would pass the share of one principal ({MAX_HELD_EACH} calls, {} MiB); answer or cancel some of them, then call again",
                    mb(bytes),
                    mb(kept.bytes),
                    MAX_HELD_BYTES_EACH >> 20
                ),
                None,
            ));
        }
        if ledger.calls + 1 > MAX_HELD || ledger.bytes + kept.bytes > MAX_HELD_BYTES {
            return Err(McpError::internal_error(
                format!(
                    "this meta-server already holds {} calls ({} MiB of requests) of its clients waiting for input, the most it holds ({MAX_HELD} calls, {} MiB); call again when some are answered",
                    ledger.calls,
                    mb(ledger.bytes),
                    MAX_HELD_BYTES >> 20
                ),
                None,
            ));
        }
        ledger.calls += 1;
        ledger.bytes += kept.bytes;
        let mine = ledger.by.entry(kept.principal.clone()).or_default();
        mine.0 += 1;
        mine.1 += kept.bytes;
        Ok(Place {
            parked: self.clone(),
            principal: kept.principal.clone(),
            bytes: kept.bytes,
        })
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut ledger = self.parked.0.lock();
        ledger.calls -= 1;
        ledger.bytes -= self.bytes;
        if let Some(mine) = ledger.by.get_mut(&self.principal) {
            mine.0 -= 1;
            mine.1 -= self.bytes;
            if mine.0 == 0 {
                ledger.by.remove(&self.principal);
            }
        }
    }
}

/// One call held between its client's requests.
struct Held<T> {
    made: Kept,
    /// Its place among the waiting calls, once it waits.
    place: Mutex<Option<Place>>,
    /// Counts the turns taken, so that an expiry set after one turn spares a later one.
    turns: AtomicU64,
    cancel: CancellationToken,
    /// The running call (taken when the call is dropped).
    task: Option<JoinHandle<()>>,
    rounds: tokio::sync::Mutex<Rounds<T>>,
}

/// How long a dropped call has to end itself once cancelled (recording how it ended, e.g.
/// the audit log's `declined` for a confirmation never answered) before it is aborted.
const WIND_DOWN: Duration = Duration::from_secs(5);

impl<T> Drop for Held<T> {
    fn drop(&mut self) {
        self.cancel.cancel();
        self.place.get_mut().take();
        let Some(task) = self.task.take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    let abort = task.abort_handle();
                    if tokio::time::timeout(WIND_DOWN, task).await.is_err() {
                        abort.abort();
                    }
                });
            }
            Err(_) => task.abort(),
        }
    }
}

/// The questions of a call and its result, taken by one request at a time.
struct Rounds<T> {
    asks: mpsc::Receiver<PendingInput>,
    /// Asked and not yet answered, by the key the client answers with.
    open: BTreeMap<String, oneshot::Sender<Value>>,
    /// The questions of `open`, by the same keys.
    questions: BTreeMap<String, InputRequest>,
    /// A 2026-07-28 upstream's round put to the client: its input requests as the server
    /// asked them, and where the retry's `inputResponses` go.
    round: Option<(
        Option<InputRequests>,
        oneshot::Sender<Option<InputResponses>>,
    )>,
    next_key: u64,
    done: oneshot::Receiver<T>,
}

impl<T> Rounds<T> {
    /// Takes `pending` in: an upstream's request under a key of meta-server's, a round as it
    /// is.
    fn take(&mut self, pending: PendingInput) {
        match pending {
            PendingInput::Ask { request, answer } => {
                self.next_key += 1;
                let key = format!("input-{}", self.next_key);
                self.questions.insert(key.clone(), *request);
                self.open.insert(key, answer);
            }
            PendingInput::Round { requests, answer } => self.round = Some((requests, answer)),
        }
    }
}

impl<T: Send + 'static> Waiting<T> {
    /// The calls of this process of one kind, in `parked`'s places; every kind names the
    /// process alike.
    pub(super) fn new(parked: Arc<Parked>) -> Arc<Self> {
        static PROCESS: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        let process = PROCESS.get_or_init(|| format!("{:016x}", rand::rng().random::<u64>()));
        Self::named(process.clone(), parked)
    }

    fn named(process: String, parked: Arc<Parked>) -> Arc<Self> {
        Arc::new(Self {
            process,
            held: Mutex::new(HashMap::new()),
            parked,
        })
    }

    /// Starts `run` with the asking end its upstream requests go to and the token that
    /// cancels it, and waits for its first turn.
    pub(super) async fn start<F>(
        self: &Arc<Self>,
        made: Made,
        capabilities: ClientCapabilities,
        first: Option<InputResponses>,
        cancelled: &CancellationToken,
        run: impl FnOnce(Inputs, CancellationToken) -> F,
    ) -> Result<Turn<T>, McpError>
    where
        F: Future<Output = T> + Send + 'static,
    {
        let (inputs, asks) = Inputs::new(capabilities, first);
        let (finish, done) = oneshot::channel();
        let cancel = CancellationToken::new();
        let call = run(inputs, cancel.clone());
        let task = tokio::spawn(async move {
            let _ = finish.send(call.await);
        });
        let held = Arc::new(Held {
            made: Kept::from(&made),
            place: Mutex::new(None),
            turns: AtomicU64::new(0),
            cancel,
            task: Some(task),
            rounds: tokio::sync::Mutex::new(Rounds {
                asks,
                open: BTreeMap::new(),
                questions: BTreeMap::new(),
                round: None,
                next_key: 0,
                done,
            }),
        });
        self.turn(&self.fresh_state(), &held, cancelled).await
    }

    /// A `requestState` never given before: this process's id and 128 random bits.
    fn fresh_state(&self) -> String {
        format!("{}.{:032x}", self.process, rand::rng().random::<u128>())
    }

    /// Hands a retry's answers to the call `state` names and waits for its next turn.
    pub(super) async fn resume(
        self: &Arc<Self>,
        state: &str,
        made: &Made,
        answers: Option<InputResponses>,
        cancelled: &CancellationToken,
    ) -> Result<Turn<T>, McpError> {
        let held = self.held.lock().get(state).cloned();
        let Some(held) = held.filter(|h| h.made.principal == made.principal) else {
            return Err(McpError::invalid_params(self.unknown(state), None));
        };
        if held.made.request != Kept::from(made).request {
            return Err(McpError::invalid_params(
                "this requestState was given for another request: a retry must repeat the request that got it (the same name and arguments), with its inputResponses",
                None,
            ));
        }
        {
            let Ok(mut rounds) = held.rounds.try_lock() else {
                return Err(busy());
            };
            // An upstream's round gets the retry's answers as they are, whatever they hold
            // (the server asks again for what is missing).
            if let Some((_, round)) = rounds.round.take() {
                let _ = round.send(answers);
            } else {
                for (key, answer) in answers.unwrap_or_default() {
                    rounds.questions.remove(&key);
                    if let Some(pending) = rounds.open.remove(&key) {
                        let _ = pending.send(answer);
                    }
                }
            }
        }
        self.turn(state, &held, cancelled).await
    }

    /// Why `state` names no call held here.
    fn unknown(&self, state: &str) -> String {
        let here = state
            .split_once('.')
            .is_some_and(|(process, _)| process == self.process);
        let why = if here {
            format!(
                "its call ended: it was answered, cancelled, or not retried within {} s",
                RETRY_WINDOW.as_secs()
            )
        } else {
            "it was made by another meta-server process (another replica behind the same address, or this one before a restart); a retry must reach the process that made it".to_owned()
        };
        format!(
            "this requestState names no call waiting in this meta-server: {why}. Make the call again, without requestState"
        )
    }

    /// Waits for the call's result or its next questions; the client cancelling the request
    /// cancels the call.
    async fn turn(
        self: &Arc<Self>,
        state: &str,
        held: &Arc<Held<T>>,
        cancelled: &CancellationToken,
    ) -> Result<Turn<T>, McpError> {
        let turn = held.turns.fetch_add(1, Ordering::Relaxed) + 1;
        let Ok(mut rounds) = held.rounds.try_lock() else {
            return Err(busy());
        };
        let rounds = &mut *rounds;
        let mut asking = true;
        loop {
            // An upstream that gave up on a question no longer needs its answer.
            rounds.open.retain(|_, answer| !answer.is_closed());
            let open = &rounds.open;
            rounds.questions.retain(|key, _| open.contains_key(key));
            if rounds
                .round
                .as_ref()
                .is_some_and(|(_, answer)| answer.is_closed())
            {
                rounds.round = None;
            }
            while let Ok(pending) = rounds.asks.try_recv() {
                rounds.take(pending);
            }
            // A round is put alone: its keys are the server's.
            let asked = match &rounds.round {
                Some((requests, _)) => Some(requests.clone()),
                None if !rounds.questions.is_empty() => Some(Some(rounds.questions.clone())),
                None => None,
            };
            if let Some(requests) = asked {
                // Each turn's state is new; the one before it is spent.
                let next = self.fresh_state();
                {
                    let mut place = held.place.lock();
                    if place.is_none() {
                        *place = Some(self.parked.admit(&held.made)?);
                    }
                }
                {
                    let mut waiting = self.held.lock();
                    waiting.remove(state);
                    waiting.insert(next.clone(), held.clone());
                }
                self.expire_later(&next, turn);
                let asked = InputRequiredResult::new(requests, Some(next));
                return Ok(Turn::Input(asked));
            }
            tokio::select! {
                result = &mut rounds.done => {
                    self.held.lock().remove(state);
                    return result.map(Turn::Done).map_err(|_| {
                        McpError::internal_error("the call ended without a result", None)
                    });
                }
                pending = rounds.asks.recv(), if asking => match pending {
                    Some(pending) => rounds.take(pending),
                    None => asking = false,
                },
                () = cancelled.cancelled() => {
                    self.held.lock().remove(state);
                    return Err(McpError::internal_error("the request was cancelled", None));
                }
            }
        }
    }

    /// Drops the call `state` names if no request took a turn after `turn` within the window.
    fn expire_later(self: &Arc<Self>, state: &str, turn: u64) {
        let waiting: Weak<Self> = Arc::downgrade(self);
        let state = state.to_owned();
        tokio::spawn(async move {
            tokio::time::sleep(RETRY_WINDOW).await;
            if let Some(waiting) = waiting.upgrade() {
                let mut held = waiting.held.lock();
                if held
                    .get(&state)
                    .is_some_and(|h| h.turns.load(Ordering::Relaxed) == turn)
                {
                    held.remove(&state);
                }
            }
        });
    }
}

fn busy() -> McpError {
    McpError::invalid_request(
        "another request is already retrying with this requestState; wait for its answer",
        None,
    )
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ElicitRequest, ElicitRequestParams, ElicitationSchema, InputRequest};

    use super::*;

    fn made(principal: &str) -> Made {
        Made {
            principal: Some(principal.into()),
            request: serde_json::json!({"name": "call_tool"}),
        }
    }

    fn question() -> InputRequest {
        let schema = ElicitationSchema::builder().build().unwrap();
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: "name?".into(),
            requested_schema: schema,
        };
        InputRequest::Elicitation(ElicitRequest::new(params))
    }

    fn asked(turn: Result<Turn<String>, McpError>) -> InputRequiredResult {
        match turn {
            Ok(Turn::Input(asked)) => asked,
            Ok(Turn::Done(done)) => panic!("done: {done}"),
            Err(e) => panic!("error: {}", e.message),
        }
    }

    fn refusal(turn: Result<Turn<String>, McpError>) -> String {
        match turn {
            Err(e) => e.message.into_owned(),
            Ok(_) => panic!("a turn was taken"),
        }
    }

    /// A call that asks twice, one question after the other, and returns both answers.
    async fn twice(
        waiting: &Arc<Waiting<String>>,
        cancel: &CancellationToken,
    ) -> InputRequiredResult {
        let run = |inputs: Inputs, _| async move {
            let first = inputs.ask(question()).await.unwrap();
            let second = inputs.ask(question()).await.unwrap();
            format!("{first} {second}")
        };
        let caps = ClientCapabilities::default();
        asked(waiting.start(made("ada"), caps, None, cancel, run).await)
    }

    #[tokio::test]
    async fn answers_go_to_the_waiting_call_turn_by_turn_and_unanswered_ones_are_asked_again() {
        let waiting = Waiting::new(Arc::default());
        let cancel = CancellationToken::new();
        let first = twice(&waiting, &cancel).await;
        let state = first.request_state.clone().unwrap();
        assert_eq!(
            first.input_requests.unwrap().keys().collect::<Vec<_>>(),
            ["input-1"]
        );
        // A retry without the answer is asked the same again, under a new state.
        let again = asked(waiting.resume(&state, &made("ada"), None, &cancel).await);
        assert_eq!(
            again.input_requests.unwrap().keys().collect::<Vec<_>>(),
            ["input-1"]
        );
        let spent = refusal(waiting.resume(&state, &made("ada"), None, &cancel).await);
        assert!(spent.contains("names no call waiting"), "{spent}");
        let state = again.request_state.unwrap();
        let answers = |key: &str, value: &str| Some([(key.to_owned(), Value::from(value))].into());
        let second = asked(
            waiting
                .resume(&state, &made("ada"), answers("input-1", "a"), &cancel)
                .await,
        );
        let spent = state;
        let state = second.request_state.clone().unwrap();
        assert_ne!(state, spent, "each turn has a state of its own");
        assert_eq!(
            second.input_requests.unwrap().keys().collect::<Vec<_>>(),
            ["input-2"]
        );
        match waiting
            .resume(&state, &made("ada"), answers("input-2", "b"), &cancel)
            .await
        {
            Ok(Turn::Done(done)) => assert_eq!(done, "\"a\" \"b\""),
            _ => panic!("the call did not end"),
        }
        let ended = refusal(waiting.resume(&state, &made("ada"), None, &cancel).await);
        assert!(ended.contains("its call ended"), "{ended}");
    }

    #[tokio::test]
    async fn an_upstream_round_reaches_the_client_as_asked_and_its_retry_goes_back_whole() {
        let waiting = Waiting::new(Arc::default());
        let cancel = CancellationToken::new();
        let run = |inputs: Inputs, _| async move {
            let first = inputs.first_answers();
            let asked = [("user_name".to_owned(), question())].into();
            let round_one = inputs.round(Some(asked)).await.unwrap();
            // A round that carries only the server's state.
            let round_two = inputs.round(None).await.unwrap();
            format!("{first:?} {round_one:?} {round_two:?}")
        };
        let caps = ClientCapabilities::default();
        let early = Some([("early".to_owned(), Value::from(1))].into());
        let one = asked(waiting.start(made("ada"), caps, early, &cancel, run).await);
        assert_eq!(
            one.input_requests.unwrap().keys().collect::<Vec<_>>(),
            ["user_name"],
            "the server's own key"
        );
        // Whatever the retry holds goes back: the server judges it.
        let odd = Some([("user_name".to_owned(), Value::from(12345))].into());
        let state = one.request_state.unwrap();
        let two = asked(waiting.resume(&state, &made("ada"), odd, &cancel).await);
        assert!(two.input_requests.is_none(), "a round of state alone");
        let state = two.request_state.unwrap();
        match waiting.resume(&state, &made("ada"), None, &cancel).await {
            Ok(Turn::Done(done)) => assert_eq!(
                done,
                r#"Some({"early": Number(1)}) Some({"user_name": Number(12345)}) None"#
            ),
            _ => panic!("the call did not end"),
        }
    }

    #[tokio::test]
    async fn a_state_is_refused_to_another_principal_request_or_process() {
        let waiting = Waiting::new(Arc::default());
        let cancel = CancellationToken::new();
        let state = twice(&waiting, &cancel).await.request_state.unwrap();
        let stranger = refusal(waiting.resume(&state, &made("bob"), None, &cancel).await);
        assert!(
            stranger.contains("names no call waiting in this meta-server"),
            "{stranger}"
        );
        let mut other = made("ada");
        other.request = serde_json::json!({"name": "search_tools"});
        let other = refusal(waiting.resume(&state, &other, None, &cancel).await);
        assert!(
            other.contains("a retry must repeat the request that got it"),
            "{other}"
        );
        let elsewhere = Waiting::<String>::named("another".into(), Arc::default());
        let said = refusal(elsewhere.resume(&state, &made("ada"), None, &cancel).await);
        assert!(
            said.contains("made by another meta-server process"),
            "{said}"
        );
        // The refusals left the call waiting for its own client.
        asked(waiting.resume(&state, &made("ada"), None, &cancel).await);
    }

    /// Starts a call of `principal` whose request carries `pad` bytes and that asks once.
    async fn park(
        waiting: &Arc<Waiting<String>>,
        principal: &str,
        pad: usize,
    ) -> Result<InputRequiredResult, String> {
        let made = Made {
            principal: Some(principal.into()),
            request: serde_json::json!({"name": "call_tool", "pad": "x".repeat(pad)}),
        };
        let run = |inputs: Inputs, _| async move {
            inputs.ask(question()).await.unwrap();
            "done".to_owned()
        };
        let caps = ClientCapabilities::default();
        match waiting
            .start(made, caps, None, &CancellationToken::new(), run)
            .await
        {
            Ok(Turn::Input(asked)) => Ok(asked),
            Ok(Turn::Done(done)) => panic!("done: {done}"),
            Err(e) => Err(e.message.into_owned()),
        }
    }

    #[tokio::test]
    async fn one_principal_parks_its_share_and_the_others_still_park() {
        let parked = Arc::new(Parked::default());
        // Calls, prompts and reads share the places.
        let (calls, reads) = (Waiting::new(parked.clone()), Waiting::new(parked));
        let mut held = Vec::new();
        for n in 0..MAX_HELD_EACH {
            let waiting = if n % 2 == 0 { &calls } else { &reads };
            held.push(park(waiting, "greedy", 10).await.expect("within its share"));
        }
        let refused = park(&calls, "greedy", 10).await.unwrap_err();
        assert!(
            refused.starts_with("\"greedy\" already has 32 calls (0.0 MiB of requests) waiting for input in this meta-server")
                && refused.contains("the share of one principal (32 calls, 16 MiB)"),
            "{refused}"
        );
        park(&calls, "other", 10)
            .await
            .expect("another principal parks");
        // An answered call gives its place back.
        let state = held[0].request_state.clone().unwrap();
        let answers = Some([("input-1".to_owned(), Value::from("a"))].into());
        let cancel = CancellationToken::new();
        let made = made_with("greedy", 10);
        let done = calls.resume(&state, &made, answers, &cancel).await;
        assert!(matches!(done, Ok(Turn::Done(_))));
        park(&calls, "greedy", 10).await.expect("a place was freed");
    }

    fn made_with(principal: &str, pad: usize) -> Made {
        Made {
            principal: Some(principal.into()),
            request: serde_json::json!({"pad": "x".repeat(pad), "name": "call_tool"}),
        }
    }

    #[tokio::test]
    async fn the_bytes_of_waiting_requests_are_bounded_per_principal_and_in_all() {
        let waiting = Waiting::new(Arc::default());
        let big = 6 << 20;
        park(&waiting, "a", big).await.unwrap();
        park(&waiting, "a", big).await.unwrap();
        let refused = park(&waiting, "a", big).await.unwrap_err();
        assert!(refused.contains("(12.0 MiB of requests)"), "{refused}");
        let mut principals = 1;
        let refused = loop {
            let who = format!("p{principals}");
            if let Err(refused) = park(&waiting, &who, big).await {
                break refused;
            }
            if principals % 2 == 1 {
                park(&waiting, &who, big).await.unwrap();
            }
            principals += 1;
        };
        assert!(
            refused.starts_with("this meta-server already holds")
                && refused.contains("the most it holds (256 calls, 64 MiB)"),
            "{refused}"
        );
        let total = (waiting.parked.0.lock().bytes) >> 20;
        assert!(total <= 64, "{total} MiB held");
    }

    #[tokio::test]
    async fn a_retry_may_order_the_request_keys_its_own_way() {
        let waiting = Waiting::new(Arc::default());
        let first = park(&waiting, "ada", 3).await.unwrap();
        let state = first.request_state.unwrap();
        // The same request, its keys in another order: the same call.
        let cancel = CancellationToken::new();
        let same = made_with("ada", 3);
        let again = asked(waiting.resume(&state, &same, None, &cancel).await);
        let state = again.request_state.unwrap();
        let other = made_with("ada", 4);
        let said = refusal(waiting.resume(&state, &other, None, &cancel).await);
        assert!(said.contains("a retry must repeat the request"), "{said}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_not_retried_within_the_window_is_cancelled_and_ends_itself() {
        let waiting = Waiting::new(Arc::default());
        let cancel = CancellationToken::new();
        let (ended, how) = oneshot::channel::<&str>();
        let run = |inputs: Inputs, stop: CancellationToken| async move {
            let how = tokio::select! {
                answer = inputs.ask(question()) => match answer {
                    Ok(_) => "answered",
                    Err(_) => "unanswered",
                },
                () = stop.cancelled() => "cancelled",
            };
            // What a call records as it ends (its audit line) happens after the cancel.
            tokio::time::sleep(Duration::from_secs(1)).await;
            let _ = ended.send(how);
            how.to_owned()
        };
        let caps = ClientCapabilities::default();
        let first = asked(waiting.start(made("ada"), caps, None, &cancel, run).await);
        tokio::time::sleep(RETRY_WINDOW + Duration::from_secs(1)).await;
        let how = how.await.expect("the call ended itself, not aborted");
        assert_ne!(how, "answered");
        let state = first.request_state.unwrap();
        let said = refusal(waiting.resume(&state, &made("ada"), None, &cancel).await);
        assert!(said.contains("not retried within 120 s"), "{said}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_call_that_does_not_end_is_aborted() {
        let waiting = Waiting::new(Arc::default());
        let cancel = CancellationToken::new();
        let (dropped, gone) = oneshot::channel::<()>();
        let run = |_inputs: Inputs, _stop: CancellationToken| async move {
            let _dropped = dropped;
            std::future::pending::<()>().await;
        };
        let caps = ClientCapabilities::default();
        // The call asks nothing and never ends: the client cancelling its request drops it.
        let cancelled = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            cancelled.cancel();
        });
        assert!(
            waiting
                .start(made("ada"), caps, None, &cancel, run)
                .await
                .is_err()
        );
        tokio::time::sleep(WIND_DOWN + Duration::from_secs(1)).await;
        assert!(gone.await.is_err(), "the call was aborted");
    }
}
