//! The call policy applied to one call of an upstream tool ([`crate::policy`] judges it):
//! refused, let through, or let through once the user confirmed it through an elicitation to
//! the calling client (a request on a 2025-11-25 session; an input request of the call for a
//! 2026-07-28 client). meta-server's own tools and skills are not judged (a script's nested
//! calls are, each on its own).

use std::collections::BTreeMap;
use std::time::Duration;

use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    InputRequest,
};
use rmcp::service::{ElicitationMode, Peer, RoleServer};
use serde_json::{Map, Value};

use super::reply::{self, Reply};
use crate::audit::Outcome;
use crate::config::RESERVED_SERVER;
use crate::library::Entry;
use crate::policy::{self, Hints, Verdict};
use crate::server::State;
use crate::server::caller::{Caller, User};
use crate::upstream::Inputs;

/// How long the user has to answer a confirmation.
const CONFIRM_WAIT: Duration = Duration::from_secs(300);

/// Why a call did not run: its error result and how the audit log says it ended.
pub(in crate::server) struct Refusal {
    pub reply: Reply,
    pub outcome: Outcome,
}

impl Refusal {
    fn new(outcome: Outcome, message: String) -> Self {
        Self {
            reply: reply::error(message),
            outcome,
        }
    }
}

/// Whether the policy lets `caller` call `entry` with `arguments`; asks the user when it says
/// `confirm`.
pub(in crate::server) async fn check(
    state: &State,
    caller: &Caller,
    entry: &Entry,
    arguments: &Map<String, Value>,
) -> Result<(), Refusal> {
    if entry.server == RESERVED_SERVER || entry.skill.is_some() {
        return Ok(());
    }
    let settings = state.settings();
    // Without a policy key for the server every call is allowed: its annotations, which
    // take parsing the tool and reading its approvals, are not needed.
    if !policy::applies(&settings, &entry.server) {
        return Ok(());
    }
    let hints = hints(state, entry);
    match policy::judge(&settings, &entry.server, &entry.qualified, hints) {
        Verdict::Allow => Ok(()),
        Verdict::Deny(why) => Err(Refusal::new(Outcome::Denied, why)),
        Verdict::Confirm { key } => confirm(state, caller, entry, arguments, &key).await,
    }
}

/// What `entry`'s annotations say, as the policy reads them: the strictest of its annotations
/// now and those it had when approved (or first seen, under `trust: off`), so a tool that
/// relabels itself read-only or not destructive gets past no policy.
fn hints(state: &State, entry: &Entry) -> Hints {
    let now = Hints::of(&entry.def.value());
    let library = state.catalogs.library();
    let Some(catalog) = library.catalogs.get(&entry.server) else {
        return now;
    };
    match state.trust.approved_annotations(catalog, &entry.def.name) {
        Some(annotations) => {
            let then = Hints::of(&serde_json::json!({ "annotations": annotations }));
            Hints {
                read_only: now.read_only && then.read_only,
                destructive: now.destructive || then.destructive,
            }
        }
        None => now,
    }
}

/// How the user behind a call is asked.
enum Asker<'a> {
    /// An elicitation request on its 2025-11-25 session.
    Session(&'a Peer<RoleServer>),
    /// An input request in its 2026-07-28 call's `InputRequiredResult`.
    Turn(&'a Inputs),
}

/// Asks the user behind `caller` to confirm the call; refused unless they accept.
async fn confirm(
    state: &State,
    caller: &Caller,
    entry: &Entry,
    arguments: &Map<String, Value>,
    key: &str,
) -> Result<(), Refusal> {
    let qualified = &entry.qualified;
    let cannot_ask = |why: &str| {
        let allow = policy::server_key(&state.settings(), &entry.server, "destructive");
        Refusal::new(
            Outcome::Denied,
            format!(
                "{qualified} may change or delete data and {key} is \"confirm\": the user must approve each call, but {why}. Nothing was done. To let such calls run without asking, the user can set {allow} to \"allow\"."
            ),
        )
    };
    let asker = match &caller.who.user {
        User::Session(peer)
            if peer
                .supported_elicitation_modes()
                .contains(&ElicitationMode::Form) =>
        {
            Asker::Session(peer)
        }
        User::Stateless(inputs) if inputs.takes_forms() => Asker::Turn(inputs),
        User::Session(_) | User::Stateless(_) => {
            return Err(cannot_ask(
                "this client cannot be asked (it did not declare the elicitation capability)",
            ));
        }
        User::Nobody => return Err(cannot_ask("no client is connected to ask")),
    };
    let settings = state.settings();
    let server = settings
        .server(&entry.server)
        .map_or(entry.server.as_str(), |s| s.key.as_str());
    let message = format!(
        "Allow this call? The tool may change or delete data.\nTool: {} (server \"{}\")\nArguments:\n{}\nAsked because {key} is \"confirm\".",
        policy::shown(&entry.def.name),
        policy::shown(server),
        policy::summary(arguments),
    );
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: ElicitationSchema::new(BTreeMap::new()),
    };
    let declined = |what: &str| {
        Refusal::new(
            Outcome::Declined,
            format!(
                "{qualified} was not run: {what}. Nothing was done; do not call it again unless the user asks for it."
            ),
        )
    };
    let answer = match asker {
        Asker::Session(peer) => tokio::select! {
            answer = peer.create_elicitation_with_timeout(params, Some(CONFIRM_WAIT)) => answer,
            () = caller.cancelled.cancelled() => {
                return Err(Refusal::new(Outcome::Error, "cancelled by the client".into()));
            }
        },
        // A 2026-07-28 client: the question goes out in the `InputRequiredResult` of its call,
        // which waits here for the retry (see `session/input_required.rs`).
        Asker::Turn(inputs) => {
            let question = InputRequest::Elicitation(ElicitRequest::new(params));
            // Cancelled here: the client cancelled the call or did not retry it in time.
            let answer = tokio::select! {
                answer = inputs.ask(question) => answer,
                () = caller.cancelled.cancelled() => {
                    return Err(declined("the user did not answer the confirmation"));
                }
            };
            // The client's call ended before it answered (not retried in time).
            let Ok(answer) = answer else {
                return Err(declined("the user did not answer the confirmation"));
            };
            let answer = serde_json::from_value::<ElicitResult>(answer)
                .map_err(|e| format!("its answer is not an elicitation result ({e})"));
            Ok(answer.map_err(|why| {
                Refusal::new(
                    Outcome::Error,
                    format!(
                        "could not ask the user to confirm {qualified}: {why}. Nothing was done."
                    ),
                )
            })?)
        }
    };
    match answer {
        Ok(answer) => match answer.action {
            ElicitationAction::Accept => Ok(()),
            ElicitationAction::Decline => Err(declined("the user declined it when asked")),
            _ => Err(declined("the user cancelled it when asked")),
        },
        Err(rmcp::service::ServiceError::Timeout { .. }) => Err(declined(&format!(
            "the user did not answer the confirmation within {}s",
            CONFIRM_WAIT.as_secs()
        ))),
        Err(e) => Err(Refusal::new(
            Outcome::Error,
            format!("could not ask the user to confirm {qualified}: {e}. Nothing was done."),
        )),
    }
}
