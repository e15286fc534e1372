//! Relaying an upstream's requests for the client (sampling, elicitation, roots) to the client
//! whose call caused them. A connection is shared by every session of the process and MCP
//! 2025-11-25 does not say which call a server request belongs to, so the rule is:
//! - the request goes to the one client whose calls are in flight on the connection;
//! - with calls of several clients in flight it is refused, never guessed, unless all of
//!   them but one are waiting for their client's answer to a request of the server (a
//!   2026-07-28 call parked until its client's retry, a session asked): a call waiting so is
//!   not the one asking anew, so the request goes to the one that is not;
//! - `roots/list` with no call in flight (servers ask right after `initialize`) is answered
//!   with the roots of the client whose call opened the connection; sampling and elicitation
//!   then are refused, as is every request on a connection no client opened (indexing).
//!
//! Which roots a server is given at all, the client's or its configured ones, is `roots.rs`'s
//! rule; a client is asked only where it allows.
//!
//! A 2026-07-28 client takes no requests: its call answers with an `InputRequiredResult`
//! instead, and the answer comes with its retry (see `inputs.rs`).
//!
//! A client that did not declare the capability, a Code Mode script's nested call and the
//! command line all get an MCP error that says why; for sampling and elicitation the tool's
//! result says it too, if the upstream's result does not.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use rmcp::ErrorData as McpError;
#[expect(deprecated, reason = "logging, for 2025-11-25 clients")]
use rmcp::model::LoggingLevel;
use rmcp::model::{ClientRequest, ErrorCode, PingRequest};
use rmcp::service::{Peer, RoleClient, RoleServer, ServiceError};
use tokio::sync::{broadcast, watch};

use super::ask::Ask;
use super::asking::Asking;
use super::inputs::{InputError, Inputs};
use super::roots::Roots;

/// One client session of this process (a fresh id per session).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientId(u64);

impl ClientId {
    /// A new id, never given before in this process.
    pub fn next() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// The least severe log level a client asked for with `logging/setLevel` (none: no logs).
#[expect(deprecated, reason = "logging, for 2025-11-25 clients")]
pub type LogLevel = Arc<Mutex<Option<LoggingLevel>>>;

/// Where a call came from, which decides where the upstream's requests during it go.
#[derive(Clone)]
pub enum Origin {
    /// A 2025-11-25 client session: asked through its peer, within its declared capabilities;
    /// upstream log messages reach it at `log_level` and above.
    Client {
        id: ClientId,
        peer: Peer<RoleServer>,
        log_level: LogLevel,
    },
    /// A nested call of a session's `meta__run_script`: the script cannot answer for the client.
    Script(ClientId),
    /// A 2026-07-28 call, its own caller: asked through the `InputRequiredResult` of the
    /// request it is running for; upstream log messages reach the peer of its first request
    /// from the `logLevel` that request's `_meta` named (none: no logs).
    Stateless {
        id: ClientId,
        inputs: Inputs,
        log: Option<(Peer<RoleServer>, LogLevel)>,
    },
    /// No client at all (`meta-server call`, background indexing).
    Detached,
}

impl Origin {
    /// Who is asked, for telling callers apart: a session's script is not the session.
    fn key(&self) -> (u8, Option<ClientId>) {
        match self {
            Self::Client { id, .. } => (0, Some(*id)),
            Self::Script(id) => (1, Some(*id)),
            Self::Stateless { id, .. } => (2, Some(*id)),
            Self::Detached => (3, None),
        }
    }

    /// Where a 2026-07-28 call asks its client, if this is one.
    pub fn inputs(&self) -> Option<&Inputs> {
        match self {
            Self::Stateless { inputs, .. } => Some(inputs),
            _ => None,
        }
    }

    /// The session this call belongs to, if any.
    pub fn client(&self) -> Option<ClientId> {
        self.key().1
    }

    /// The same caller, as seen by a script it runs.
    pub fn in_script(&self) -> Self {
        match self.client() {
            Some(id) => Self::Script(id),
            None => Self::Detached,
        }
    }
}

/// The longest the first call of a connection waits for the opener's roots to settle.
pub(super) const SETTLE_LIMIT: Duration = Duration::from_secs(5);

/// Round trips after the opener's roots were answered: the answer may leave after the first
/// ping, and the server's own handling of it takes a few turns of its event loop.
const SETTLE_PINGS: usize = 3;

/// The callers of one connection: who opened it and whose calls are in flight.
#[derive(Clone)]
pub(super) struct Relays(
    Arc<Mutex<Callers>>,
    watch::Sender<RootsAsked>,
    /// The URIs of the server's `notifications/resources/updated`, for its subscribers.
    broadcast::Sender<String>,
    /// What the server is given when it asks for roots.
    Roots,
);

/// Resource updates a subscriber may fall behind by.
const UPDATES: usize = 64;

/// The server's `roots/list` requests so far.
#[derive(Clone, Copy, Default)]
struct RootsAsked {
    pending: u32,
    answered: u32,
}

struct Callers {
    opener: Origin,
    next: u64,
    calls: HashMap<u64, Origin>,
    /// The last sampling or elicitation request refused during each call that can be told
    /// apart, to be said in its result.
    refused: HashMap<u64, String>,
    /// The callers (by [`Origin::key`]) waiting for their client's answer to a request of the
    /// server, and how many such requests each has out.
    waiting: HashMap<(u8, Option<ClientId>), usize>,
}

impl Relays {
    /// The callers of a connection opened for `opener`'s call, whose server is given `roots`.
    pub(super) fn new(opener: Origin, roots: Roots) -> Self {
        let callers = Callers {
            opener,
            next: 0,
            calls: HashMap::new(),
            refused: HashMap::new(),
            waiting: HashMap::new(),
        };
        Self(
            Arc::new(Mutex::new(callers)),
            watch::Sender::default(),
            broadcast::Sender::new(UPDATES),
            roots,
        )
    }

    /// What the server is given when it asks for roots.
    pub(super) fn roots(&self) -> &Roots {
        &self.3
    }

    /// The server's resource updates from now on (see `subscriptions.rs`).
    pub(super) fn updates(&self) -> broadcast::Receiver<String> {
        self.2.subscribe()
    }

    /// The server sent `notifications/resources/updated` for `uri`.
    pub(super) fn resource_updated(&self, uri: String) {
        let _ = self.2.send(uri);
    }

    /// Counts a `roots/list` request as being answered until the guard drops.
    pub(super) fn answering_roots(&self) -> RootsAnswer {
        self.1.send_modify(|r| r.pending += 1);
        RootsAnswer(self.1.clone())
    }

    /// Where the upstream's log messages go, by the rule of its requests for roots: the one
    /// client with calls in flight, else the opener; `None` when that is no client session.
    pub(super) fn log_to(&self) -> Option<(Peer<RoleServer>, LogLevel)> {
        let callers = self.0.lock();
        let mut keys = callers.calls.values().map(Origin::key);
        let first = keys.next();
        if keys.any(|k| Some(k) != first) {
            return None;
        }
        let origin = match first {
            Some(key) => callers.calls.values().find(|o| o.key() == key)?,
            None => &callers.opener,
        };
        match origin {
            Origin::Client {
                peer, log_level, ..
            } => Some((peer.clone(), log_level.clone())),
            Origin::Stateless { log, .. } => log.clone(),
            _ => None,
        }
    }

    /// Lets a server that asks for roots as soon as it is initialized (server-filesystem)
    /// have its roots before the first call: a `ping` round trip shows whether it asked; if
    /// so, its answer is awaited and one more round trip puts it ahead of the call. Only for a
    /// server given roots; the caller bounds the wait.
    pub(super) async fn settle_roots(&self, upstream: &Peer<RoleClient>) {
        if !self.3.given() || ping(upstream).await.is_err() {
            return;
        }
        let mut asked = self.1.subscribe();
        if asked.wait_for(|r| r.pending == 0).await.is_ok() && asked.borrow().answered > 0 {
            for _ in 0..SETTLE_PINGS {
                let _ = ping(upstream).await;
            }
        }
    }

    /// Counts a call of `origin` as in flight until the returned guard drops.
    pub(super) fn enter(&self, origin: Origin) -> InCall {
        let mut callers = self.0.lock();
        let key = callers.next;
        callers.next += 1;
        callers.calls.insert(key, origin);
        InCall {
            relays: self.clone(),
            key,
        }
    }

    /// Makes `origin`, a client session or a 2026-07-28 call, the opener of a connection no client opened (a
    /// first-run listing, a skill's warm-up), so its roots are given outside calls. True when
    /// the server had already asked for roots and this client's would be given, so it must be
    /// told they changed.
    pub(super) fn adopt(&self, origin: &Origin) -> bool {
        let mut callers = self.0.lock();
        let answers = matches!(origin, Origin::Client { .. } | Origin::Stateless { .. });
        if !answers || !matches!(callers.opener, Origin::Detached) {
            return false;
        }
        callers.opener = origin.clone();
        let asked = *self.1.borrow();
        asked.pending + asked.answered > 0 && self.3.asks_client()
    }

    /// Whether `client`'s call opened this connection.
    pub(super) fn opened_by(&self, client: ClientId) -> bool {
        self.0.lock().opener.client() == Some(client)
    }

    /// Whom to ask for `ask` on behalf of `server`, or the error the upstream gets. The caller
    /// counts as waiting for its client's answer while the returned guard lives.
    pub(super) fn target_for(&self, server: &str, ask: Ask) -> Result<(Target, Waiting), McpError> {
        let (origin, said) = self.pick(server, ask)?;
        let target = match &origin {
            Origin::Client { peer, id, .. } if ask.offered_by(peer) => {
                let open = match ask {
                    Ask::Roots => None,
                    _ => Some(Asking::open(*id, server, ask)?),
                };
                Some(Target::Peer(peer.clone(), open))
            }
            Origin::Stateless { inputs, .. } if inputs.offer(ask) => {
                Some(Target::Input(inputs.clone()))
            }
            _ => None,
        };
        if let Some(target) = target {
            let key = origin.key();
            *self.0.lock().waiting.entry(key).or_default() += 1;
            let waiting = Waiting {
                relays: self.clone(),
                key,
            };
            return Ok((target, waiting));
        }
        let detail = match origin {
            Origin::Client { .. } | Origin::Stateless { .. } => format!(
                "which this client does not offer (it did not declare the {} capability)",
                ask.capability()
            ),
            Origin::Script(_) => {
                "which a meta__run_script script cannot answer; call the tool directly with call_tool".to_owned()
            }
            Origin::Detached => "but no client is connected to ask".to_owned(),
        };
        let message = format!(
            "server \"{server}\" asked the client for {}, {detail}",
            ask.what()
        );
        // Roots are the session's, often asked whatever the call: only a refused sampling or
        // elicitation is the call's business.
        if said && !matches!(ask, Ask::Roots) {
            let mut callers = self.0.lock();
            let key = origin.key();
            let keys: Vec<u64> = (callers.calls.iter())
                .filter(|(_, o)| o.key() == key)
                .map(|(k, _)| *k)
                .collect();
            for k in keys {
                callers.refused.insert(k, message.clone());
            }
        }
        Err(refusal(message))
    }

    /// Whom `ask` goes to by the rule, and whether that is the caller of calls in flight.
    fn pick(&self, server: &str, ask: Ask) -> Result<(Origin, bool), McpError> {
        let callers = self.0.lock();
        let mut distinct = callers
            .calls
            .values()
            .fold(Vec::<&Origin>::new(), |mut seen, o| {
                if !seen.iter().any(|s| s.key() == o.key()) {
                    seen.push(o);
                }
                seen
            });
        if distinct.len() > 1 {
            let waits = |o: &Origin| callers.waiting.get(&o.key()).is_some_and(|n| *n > 0);
            let free: Vec<&Origin> = distinct.iter().copied().filter(|o| !waits(o)).collect();
            if let [only] = free[..] {
                distinct = vec![only];
            }
        }
        match (distinct.len(), ask) {
            (1, _) => Ok((distinct.remove(0).clone(), true)),
            (0, Ask::Roots) => Ok((callers.opener.clone(), false)),
            (0, _) => Err(refusal(format!(
                "server \"{server}\" asked the client for {} outside of any call; meta-server relays such requests only while a call of this server is in flight",
                ask.what()
            ))),
            _ => Err(refusal(format!(
                "server \"{server}\" asked the client for {} while calls of several clients were in flight on it, so meta-server cannot tell whose call asked and refused rather than guess; call the tool again when the other calls are done",
                ask.what()
            ))),
        }
    }
}

/// Who answers an upstream's request for the client.
pub(super) enum Target {
    /// A 2025-11-25 session, sent the request (open there, for its cap, until answered).
    Peer(Peer<RoleServer>, Option<Asking>),
    /// A 2026-07-28 call, asked in its `InputRequiredResult`.
    Input(Inputs),
}

/// A caller waiting for its client's answer to a request of the server; dropping it ends the
/// wait.
pub(super) struct Waiting {
    relays: Relays,
    key: (u8, Option<ClientId>),
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut callers = self.relays.0.lock();
        if let Some(n) = callers.waiting.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                callers.waiting.remove(&self.key);
            }
        }
    }
}

/// A `roots/list` request being answered; dropping it counts it answered.
pub(super) struct RootsAnswer(watch::Sender<RootsAsked>);

impl Drop for RootsAnswer {
    fn drop(&mut self) {
        self.0.send_modify(|r| {
            r.pending -= 1;
            r.answered += 1;
        });
    }
}

async fn ping(upstream: &Peer<RoleClient>) -> Result<(), ServiceError> {
    upstream
        .send_request(ClientRequest::PingRequest(PingRequest::default()))
        .await
        .map(drop)
}

/// A call in flight on a connection; dropping it ends the call.
pub(super) struct InCall {
    relays: Relays,
    key: u64,
}

impl InCall {
    /// The last request of the server refused during this call, taken.
    pub(super) fn refused(&self) -> Option<String> {
        self.relays.0.lock().refused.remove(&self.key)
    }
}

impl Drop for InCall {
    fn drop(&mut self) {
        let mut callers = self.relays.0.lock();
        callers.calls.remove(&self.key);
        callers.refused.remove(&self.key);
    }
}

/// Says in the log, in words, that an upstream's sampling or elicitation request was refused:
/// once per process for each server and reason (servers ask on every connection). A refused
/// roots request is not said here: the server is given its configured roots (`list_roots`).
pub(super) fn tell(ask: Ask, refusal: &str) {
    if matches!(ask, Ask::Roots) || !super::once::first(refusal) {
        return;
    }
    tracing::warn!("{refusal}; it was told no (said once)");
}

fn refusal(message: String) -> McpError {
    McpError::new(ErrorCode::INVALID_REQUEST, message, None)
}

/// The client's answer as the upstream's: the client's own error passes through.
pub(super) fn answer<T>(
    server: &str,
    ask: Ask,
    answer: Result<T, ServiceError>,
) -> Result<T, McpError> {
    answer.map_err(|e| match e {
        ServiceError::McpError(e) => e,
        other => McpError::internal_error(
            format!(
                "the client did not answer server \"{server}\"'s request for {}: {other}",
                ask.what()
            ),
            None,
        ),
    })
}

/// A 2026-07-28 client's answer (its `inputResponses` entry) as the upstream's.
pub(super) fn input_answer<T: serde::de::DeserializeOwned>(
    server: &str,
    ask: Ask,
    answer: Result<serde_json::Value, InputError>,
) -> Result<T, McpError> {
    let value = answer.map_err(|e| {
        McpError::internal_error(
            format!(
                "the client did not answer server \"{server}\"'s request for {}: {e}",
                ask.what()
            ),
            None,
        )
    })?;
    serde_json::from_value(value).map_err(|e| {
        McpError::invalid_params(
            format!(
                "the client's answer to server \"{server}\"'s request for {} is not a valid result: {e}",
                ask.what()
            ),
            None,
        )
    })
}

#[cfg(test)]
mod tests {
    use rmcp::service::ElicitationMode;

    use super::*;

    fn refused(relays: &Relays, ask: Ask) -> String {
        match relays.target_for("up", ask) {
            Ok(_) => panic!("a client was picked"),
            Err(e) => e.message.into_owned(),
        }
    }

    /// A 2026-07-28 call of `id` that declared no capabilities.
    fn stateless(id: ClientId) -> Origin {
        let (inputs, _) = Inputs::new(rmcp::model::ClientCapabilities::default(), None);
        Origin::Stateless {
            id,
            inputs,
            log: None,
        }
    }

    #[test]
    fn a_request_goes_to_the_one_caller_in_flight_and_says_why_it_cannot() {
        let relays = Relays::new(Origin::Detached, Roots::new(None, true));
        let script = relays.enter(Origin::Script(ClientId::next()));
        let said = refused(&relays, Ask::Sampling);
        assert!(said.starts_with("server \"up\" asked the client for sampling, which a meta__run_script script cannot answer; call the tool directly with call_tool"), "{said}");
        drop(script);
        let _modern = relays.enter(stateless(ClientId::next()));
        let said = refused(&relays, Ask::Elicitation(ElicitationMode::Url));
        assert!(said.contains("for URL-mode elicitation, which this client does not offer (it did not declare the elicitation (url) capability)"), "{said}");
    }

    #[test]
    fn calls_of_several_clients_make_a_request_refused_not_guessed() {
        let relays = Relays::new(Origin::Detached, Roots::new(None, true));
        let one = ClientId::next();
        let _a = relays.enter(stateless(one));
        let _b = relays.enter(stateless(one));
        assert!(
            refused(&relays, Ask::Roots).contains("did not declare the roots capability"),
            "one client, two calls"
        );
        let _c = relays.enter(stateless(ClientId::next()));
        for ask in [Ask::Sampling, Ask::Roots] {
            let said = refused(&relays, ask);
            assert!(
                said.contains("while calls of several clients were in flight on it"),
                "{said}"
            );
        }
        // A session's script is not the session: its requests cannot be answered the same way.
        let relays = Relays::new(Origin::Detached, Roots::new(None, true));
        let _own = relays.enter(stateless(one));
        let _script = relays.enter(stateless(one).in_script());
        assert!(refused(&relays, Ask::Sampling).contains("several clients"));
    }

    #[test]
    #[expect(deprecated, reason = "sampling, relayed for 2025-11-25 servers")]
    fn a_caller_waiting_for_its_client_is_not_the_one_asking_anew() {
        let relays = Relays::new(Origin::Detached, Roots::new(None, true));
        let (parked, busy) = (ClientId::next(), ClientId::next());
        let capable = |id| {
            let caps = rmcp::model::ClientCapabilities::builder()
                .enable_sampling()
                .build();
            let (inputs, asks) = Inputs::new(caps, None);
            (
                Origin::Stateless {
                    id,
                    inputs,
                    log: None,
                },
                asks,
            )
        };
        let ((a, _a_asks), (b, _b_asks)) = (capable(parked), capable(busy));
        let _a = relays.enter(a);
        // A asks its client and waits (a 2026-07-28 call parked until its client's retry).
        let (_, a_waits) = relays.target_for("up", Ask::Sampling).expect("A alone");
        let _b = relays.enter(b);
        assert_eq!(
            relays.pick("up", Ask::Sampling).unwrap().0.client(),
            Some(busy)
        );
        let (_, b_waits) = relays
            .target_for("up", Ask::Sampling)
            .expect("B, not refused");
        // Both waiting: nobody can be told apart.
        assert!(refused(&relays, Ask::Sampling).contains("several clients"));
        drop(a_waits);
        assert_eq!(
            relays.pick("up", Ask::Sampling).unwrap().0.client(),
            Some(parked)
        );
        drop(b_waits);
        assert!(refused(&relays, Ask::Sampling).contains("several clients"));
    }

    #[test]
    fn a_refusal_is_kept_for_the_result_of_the_call_it_was_told_apart_for() {
        let relays = Relays::new(Origin::Detached, Roots::new(None, true));
        let script = relays.enter(Origin::Script(ClientId::next()));
        refused(&relays, Ask::Roots);
        assert_eq!(script.refused(), None, "roots are not the call's business");
        let said = refused(&relays, Ask::Sampling);
        assert_eq!(script.refused().as_deref(), Some(said.as_str()));
        assert_eq!(script.refused(), None, "taken once");
        let other = relays.enter(stateless(ClientId::next()));
        refused(&relays, Ask::Sampling);
        assert_eq!(
            (script.refused(), other.refused()),
            (None, None),
            "nobody's to keep"
        );
    }

    #[test]
    fn outside_calls_only_roots_are_asked_and_of_the_opener() {
        let opener = ClientId::next();
        let relays = Relays::new(stateless(opener), Roots::new(None, true));
        assert!(
            refused(&relays, Ask::Roots).contains("did not declare the roots capability"),
            "the opener is asked"
        );
        let said = refused(&relays, Ask::Sampling);
        assert!(said.contains("outside of any call"), "{said}");
        assert!(relays.opened_by(opener) && !relays.opened_by(ClientId::next()));
        let indexing = Relays::new(Origin::Detached, Roots::new(None, true));
        assert!(refused(&indexing, Ask::Roots).contains("no client is connected to ask"));
    }
}
