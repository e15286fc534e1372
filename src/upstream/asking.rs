//! The sampling and elicitation requests of upstreams open at once at each 2025-11-25 client
//! session: a cap, so that servers cannot flood one client with questions (a 2026-07-28
//! client's are bounded by its waiting calls and their queues, see `inputs.rs`).

use std::collections::HashMap;
use std::sync::LazyLock;

use parking_lot::Mutex;
use rmcp::ErrorData as McpError;
use rmcp::model::ErrorCode;

use super::ask::Ask;
use super::relay::ClientId;

/// Requests of upstreams open at once at one client session; past it one is refused.
pub(super) const MAX_OPEN: usize = 16;

/// Open requests by session; a session with none has no entry.
static OPEN: LazyLock<Mutex<HashMap<ClientId, usize>>> = LazyLock::new(Mutex::default);

/// One request of an upstream open at a client session; dropping it closes it.
pub(super) struct Asking(ClientId);

impl Asking {
    /// Opens `server`'s request for `ask` at `client`, or the error the upstream gets.
    pub(super) fn open(client: ClientId, server: &str, ask: Ask) -> Result<Self, McpError> {
        let mut open = OPEN.lock();
        let count = open.entry(client).or_default();
        if *count >= MAX_OPEN {
            return Err(McpError::new(
                ErrorCode::INVALID_REQUEST,
                format!(
                    "server \"{server}\" asked the client for {} while {MAX_OPEN} requests of servers were already open at it, the most meta-server relays to one client at once; ask again when those are answered",
                    ask.what()
                ),
                None,
            ));
        }
        *count += 1;
        Ok(Self(client))
    }
}

impl Drop for Asking {
    fn drop(&mut self) {
        let mut open = OPEN.lock();
        if let Some(count) = open.get_mut(&self.0) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_has_at_most_so_many_requests_open_and_others_are_not_touched() {
        let (one, other) = (ClientId::next(), ClientId::next());
        let mut open: Vec<Asking> = (0..MAX_OPEN)
            .map(|_| Asking::open(one, "up", Ask::Sampling).unwrap())
            .collect();
        let refused = Asking::open(one, "up", Ask::Sampling).err().unwrap();
        assert!(
            refused.message.starts_with("server \"up\" asked the client for sampling while 16 requests of servers were already open at it"),
            "{}",
            refused.message
        );
        let _theirs = Asking::open(other, "up", Ask::Sampling).unwrap();
        open.pop();
        open.push(Asking::open(one, "up", Ask::Sampling).expect("one was answered"));
        drop(open);
        assert!(!OPEN.lock().contains_key(&one), "no entry left behind");
    }
}
