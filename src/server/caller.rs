//! What the session knows about one tool call: the client's limit, whose results it makes,
//! its cancellation, where its progress goes, and who is behind it (client, session, how its
//! user is asked, what its principal may see). Shared by every path a call takes.

use std::collections::HashSet;
use std::sync::Arc;

use parking_lot::Mutex;

use rmcp::model::ProgressToken;
use rmcp::service::{Peer, RequestContext, RoleServer};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use super::access::Access;
use crate::result::Owner;
use crate::upstream::{Inputs, Origin};

/// Where the client wants progress for this call: its peer and its own progress token.
pub(in crate::server) type ProgressTo = Option<(Peer<RoleServer>, ProgressToken)>;

/// What the session knows about this call.
pub(in crate::server) struct Caller {
    /// The client's own result limit, if known.
    pub client_limit: Option<usize>,
    /// Whose stored results the call may create and read.
    pub owner: Owner,
    /// Who sent it over HTTP (its principal's name); `None` over stdio.
    pub principal: Option<Arc<str>>,
    /// Fires when the client cancels the request.
    pub cancelled: CancellationToken,
    pub progress_to: ProgressTo,
    /// Where an upstream's requests for the client (sampling, elicitation, roots) go.
    pub origin: Origin,
    /// The servers whose own instructions the client was given.
    pub introduced: Introduced,
    /// Who is behind the call: what the audit log records, whom the call policy asks.
    pub who: Who,
}

/// The servers whose own instructions (from their catalogs) a client has been given with
/// their tools' details: once per server in a session; on every answer where no session
/// remembers (2026-07-28, the command line).
#[derive(Clone, Default)]
pub(in crate::server) struct Introduced(Option<Arc<Mutex<HashSet<String>>>>);

impl Introduced {
    /// A session's memory: each server's instructions are given once.
    pub fn per_session() -> Self {
        Self(Some(Arc::default()))
    }

    /// Whether `server`'s instructions are still to be given.
    pub fn is_new(&self, server: &str) -> bool {
        self.0
            .as_ref()
            .is_none_or(|given| !given.lock().contains(server))
    }

    /// Records that `servers`' instructions were given.
    pub fn mark<'a>(&self, servers: impl IntoIterator<Item = &'a str>) {
        if let Some(given) = &self.0 {
            given.lock().extend(servers.into_iter().map(str::to_owned));
        }
    }
}

/// Who is behind a call, a script's nested calls included.
#[derive(Clone, Default)]
pub(in crate::server) struct Who {
    /// The client's own name (`clientInfo.name`).
    pub client: Option<Arc<str>>,
    /// Its session: over HTTP a digest of the MCP session id (never the id), over stdio the
    /// process; `None` for a 2026-07-28 request or no client.
    pub session: Option<Arc<str>>,
    /// How the user is asked to confirm a call.
    pub user: User,
    /// What its principal may see and call.
    pub access: Access,
    /// Whom its searches and selections teach (`None`: nobody, a command-line call).
    pub teacher: Option<Teacher>,
}

impl Who {
    /// Who sent this request from `origin`, whose principal (`None` over stdio) has
    /// `access`; `stateless` for a 2026-07-28 request.
    pub(in crate::server) fn of(
        cx: &RequestContext<RoleServer>,
        origin: &Origin,
        stateless: bool,
        (principal, access): (Option<&str>, Access),
    ) -> Self {
        let http = cx.extensions.get::<http::request::Parts>();
        let process = || format!("stdio-{}", std::process::id());
        let session = match http {
            _ if stateless => None,
            Some(parts) => parts.headers.get("mcp-session-id").map(|id| {
                format!(
                    "s-{}",
                    &crate::checksum::hex(&Sha256::digest(id.as_bytes()))[..16]
                )
                .into()
            }),
            None => Some(process().into()),
        };
        // Over stdio the process is the session learning counts, whatever the revision.
        let learns_in = match http {
            None => Some(process()),
            Some(_) => session.as_deref().map(str::to_owned),
        };
        Self {
            client: cx.client_info().map(|c| c.name.into()),
            teacher: Teacher::of(learns_in.as_deref(), principal),
            session,
            user: match (stateless, origin.inputs()) {
                (false, _) => User::Session(cx.peer.clone()),
                (true, Some(inputs)) => User::Stateless(inputs.clone()),
                // Every 2026-07-28 call carries where it asks; without that, nobody is asked.
                (true, None) => User::Nobody,
            },
            access,
        }
    }
}

/// How the user behind a call is reached.
#[derive(Clone, Default)]
pub(in crate::server) enum User {
    /// Through this 2025-11-25 session, if its client takes elicitation.
    Session(Peer<RoleServer>),
    /// A 2026-07-28 call: asked through its `InputRequiredResult` (a script's nested calls
    /// too, as they run within it).
    Stateless(Inputs),
    /// No client at all (`meta-server call`).
    #[default]
    Nobody,
}

/// The principal of a local client (stdio): one user.
const LOCAL: &str = "local";

/// Whom a session's searches and selections teach: its key among the recent searches, and the
/// digests of its principal and session that the evidence keeps.
#[derive(Clone, Debug)]
pub(in crate::server) struct Teacher {
    pub(in crate::server) session: Arc<str>,
    pub(in crate::server) principal: Arc<str>,
    pub(in crate::server) session_digest: Arc<str>,
}

impl Teacher {
    /// The teacher of a call in `session` (an MCP session or the stdio process) by
    /// `principal` (`None` over stdio); a 2026-07-28 request has no session, and its
    /// principal stands for one. `None` (nothing is learned) without either: a command-line
    /// call.
    pub(in crate::server) fn of(session: Option<&str>, principal: Option<&str>) -> Option<Self> {
        let session: String = match (session, principal) {
            (Some(session), _) => session.to_owned(),
            (None, Some(principal)) => format!("principal:{principal}"),
            (None, None) => return None,
        };
        let principal = principal.unwrap_or(LOCAL);
        Some(Self {
            session_digest: crate::learning::digest(&session).into(),
            session: session.into(),
            principal: crate::learning::digest(principal).into(),
        })
    }
}
