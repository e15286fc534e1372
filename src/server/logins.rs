//! Logins offered to clients from sessions (see `session::login_offer`): which are out, and
//! when each last completed.

use std::collections::{BTreeSet, HashMap};

use parking_lot::Mutex;

use crate::clock::Instant;

/// The logins one process has offered, by server.
#[derive(Default)]
pub(super) struct Logins {
    /// Servers with a login offered to a client and not finished yet.
    offered: Mutex<BTreeSet<String>>,
    /// When an offered login of each server last completed.
    completed: Mutex<HashMap<String, Instant>>,
}

impl Logins {
    /// Marks a login of `server` as offered; `false` if one is out already.
    pub(super) fn offer(&self, server: &str) -> bool {
        self.offered.lock().insert(server.to_owned())
    }

    /// Records that a login of `server` completed now.
    pub(super) fn complete(&self, server: &str) {
        self.completed
            .lock()
            .insert(server.to_owned(), Instant::now());
    }

    /// Ends the offer of `server`'s login, so a later need offers it again.
    pub(super) fn end(&self, server: &str) {
        self.offered.lock().remove(server);
    }

    /// Whether an offered login of `server` completed after `since`.
    pub(super) fn completed_since(&self, server: &str, since: Instant) -> bool {
        self.completed
            .lock()
            .get(server)
            .is_some_and(|&at| at >= since)
    }
}
