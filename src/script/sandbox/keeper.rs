//! The keeper thread: readies the next sandbox before a run needs it and tears used ones down
//! after, at the lowest priority, so a run seldom pays for a runtime on its way.

use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

use super::{Sandbox, lock};
use crate::script::Slot;

/// Work for the keeper thread.
pub(super) enum Chore {
    /// A run took the spare: ready another.
    Refill,
    /// A used sandbox, to tear down, and the slot of its run, to free after.
    Free(Sandbox, Slot),
}

/// The sandbox ready and waiting, if any.
pub(super) static SPARE: Mutex<Option<Sandbox>> = Mutex::new(None);
/// The keeper thread's chores; `None` when it could not be started.
static KEEPER: OnceLock<Option<mpsc::Sender<Chore>>> = OnceLock::new();

/// Hands `chore` to the keeper thread, starting it the first time. Without a keeper, a used
/// sandbox is torn down here and runs ready their own.
pub(super) fn keeper(chore: Chore) {
    let keeper = KEEPER.get_or_init(|| {
        let (send, chores) = mpsc::channel();
        let started = std::thread::Builder::new()
            .name("script-keeper".into())
            .spawn(move || keep(&chores));
        match started {
            Ok(_) => Some(send),
            Err(e) => {
                tracing::warn!(
                    "cannot start the script keeper thread: {e}; each run readies its own sandbox"
                );
                None
            }
        }
    });
    if let Some(send) = keeper {
        // Fails only when the keeper has ended: the chore (a sandbox) is then dropped here.
        let _ = send.send(chore);
    }
}

/// The keeper thread: readies a spare when one is taken, tears down used sandboxes.
fn keep(chores: &mpsc::Receiver<Chore>) {
    // Readying and tearing down is background work: on Linux, where each thread has a nice
    // value of its own, it yields to request threads and the upstreams they wait on when cores
    // are short (a run that finds no spare readies its own).
    // SAFETY: setpriority on this thread's own id only changes its scheduling weight.
    #[cfg(target_os = "linux")]
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19);
    }
    let Ok(events) = tokio::runtime::Builder::new_current_thread().build() else {
        return;
    };
    while let Ok(chore) = chores.recv() {
        match chore {
            Chore::Refill if lock(&SPARE).is_some() => {}
            Chore::Refill => {
                if let Ok(sandbox) = events.block_on(Sandbox::prepare()) {
                    *lock(&SPARE) = Some(sandbox);
                }
            }
            Chore::Free(used, slot) => {
                drop(used);
                drop(slot);
            }
        }
    }
}
