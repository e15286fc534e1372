//! How many scripts run at once: at most [`MAX_RUNNING`] in the process and, over HTTP, at
//! most [`MAX_PER_PRINCIPAL`] of one principal, so that a few callers cannot fill the process
//! with sandboxes (each may use `MEMORY_BYTES` of heap and `HOST_BYTES` on the host side).
//! A run over the cap waits up to [`WAIT`] for a slot, then gets [`ScriptError::Busy`].

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;

use super::ScriptError;

/// Scripts running at once in the process.
pub(super) const MAX_RUNNING: usize = 4;
/// Scripts of one HTTP principal running at once: one slot stays for the others.
pub(super) const MAX_PER_PRINCIPAL: usize = 3;
/// How long a script waits for a slot before it is refused.
const WAIT: Duration = Duration::from_secs(2);

/// The scripts running, in all and per principal.
#[derive(Default)]
struct Running {
    all: usize,
    by: Option<HashMap<Box<str>, usize>>,
}

static RUNNING: Mutex<Running> = Mutex::new(Running { all: 0, by: None });
/// Told when a slot frees up.
static FREED: Notify = Notify::const_new();

/// A script's place among those running at once, held until its runner is done with it (for a
/// run abandoned in a native call, that is after its report). [`Slot::unlimited`] counts
/// against nothing.
#[derive(Debug)]
pub struct Slot {
    /// Counted: the principal's name, if any.
    counted: Option<Option<Box<str>>>,
}

impl Slot {
    /// A slot outside the cap (tests and tools that run one script at a time).
    pub fn unlimited() -> Self {
        Self { counted: None }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let Some(principal) = self.counted.take() else {
            return;
        };
        {
            let mut running = RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
            running.all -= 1;
            if let (Some(principal), Some(by)) = (principal, running.by.as_mut())
                && let Some(n) = by.get_mut(&principal)
            {
                *n -= 1;
                if *n == 0 {
                    by.remove(&principal);
                }
            }
        }
        FREED.notify_waiters();
    }
}

/// A slot for a script of `principal` (`None` over stdio, where the process has one client),
/// once there is one, waiting up to [`WAIT`]; or why there is none.
pub async fn admit(principal: Option<&str>) -> Result<Slot, ScriptError> {
    admit_within(principal, MAX_RUNNING, MAX_PER_PRINCIPAL, WAIT).await
}

async fn admit_within(
    principal: Option<&str>,
    max_all: usize,
    max_one: usize,
    wait: Duration,
) -> Result<Slot, ScriptError> {
    let until = tokio::time::Instant::now() + wait;
    loop {
        // Registered before looking, so a slot freed in between is not missed.
        let freed = FREED.notified();
        let mut freed = std::pin::pin!(freed);
        freed.as_mut().enable();
        let refused = match take(principal, max_all, max_one) {
            Ok(slot) => return Ok(slot),
            Err(refused) => refused,
        };
        if tokio::time::timeout_at(until, freed).await.is_err() {
            return Err(ScriptError::Busy(refused));
        }
    }
}

/// Which cap kept a script out, as [`ScriptError::Busy`] says it.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum Full {
    #[error(
        "{max} scripts are already running in this server (its limit), and none ended within {} s; run this script again once one has finished",
        WAIT.as_secs()
    )]
    Server { max: usize },
    #[error(
        "{max} of your scripts are already running on this server (the limit per caller), and none ended within {} s; run this script again once one has finished",
        WAIT.as_secs()
    )]
    Caller { max: usize },
}

/// A slot if one is free now, else the cap that is reached.
fn take(principal: Option<&str>, max_all: usize, max_one: usize) -> Result<Slot, Full> {
    let mut running = RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
    if running.all >= max_all {
        return Err(Full::Server { max: max_all });
    }
    if let Some(principal) = principal {
        let mine = running
            .by
            .get_or_insert_default()
            .entry(principal.into())
            .or_default();
        if *mine >= max_one {
            return Err(Full::Caller { max: max_one });
        }
        *mine += 1;
    }
    running.all += 1;
    Ok(Slot {
        counted: Some(principal.map(Into::into)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The counts are process-wide: this test uses principals of its own and caps above what
    /// other tests hold at once.
    #[tokio::test]
    async fn caps_hold_per_process_and_per_principal_and_free_on_drop() {
        let wait = Duration::from_millis(100);
        let held = RUNNING.lock().unwrap().all;
        let max_all = held + 5;
        let a: Vec<Slot> = futures::future::join_all(
            (0..3).map(|_| admit_within(Some("cap-test-a"), max_all, 3, wait)),
        )
        .await
        .into_iter()
        .collect::<Result<_, _>>()
        .expect("three of one principal");
        let refused = admit_within(Some("cap-test-a"), max_all, 3, wait).await;
        assert!(
            matches!(&refused, Err(ScriptError::Busy(Full::Caller { max: 3 }))),
            "{refused:?}"
        );
        let b = admit_within(Some("cap-test-b"), max_all, 3, wait)
            .await
            .expect("another principal");
        // Waits for a slot that frees meanwhile.
        let freeing = async {
            tokio::time::sleep(Duration::from_millis(30)).await;
            drop(b);
        };
        let (again, ()) = tokio::join!(
            admit_within(Some("cap-test-b"), max_all, 3, Duration::from_secs(5)),
            freeing
        );
        let again = again.expect("the freed slot");
        drop(a);
        drop(again);
        assert!(
            RUNNING.lock().unwrap().by.as_ref().is_none_or(|by| {
                !by.contains_key("cap-test-a") && !by.contains_key("cap-test-b")
            })
        );
        // The process cap, with no principal.
        let free = max_all - RUNNING.lock().unwrap().all;
        let all: Vec<Slot> = (0..free)
            .map(|_| take(None, max_all, 3).expect("under the cap"))
            .collect();
        let refused = admit_within(None, max_all, 3, wait).await;
        assert!(
            matches!(&refused, Err(ScriptError::Busy(Full::Server { .. }))),
            "{refused:?}"
        );
        drop(all);
        assert!(Slot::unlimited().counted.is_none());
    }
}
