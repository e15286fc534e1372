//! The threads that run scripts. A script never runs on a worker of the server's runtime: a
//! native call that QuickJS cannot interrupt (see the module docs of [`super`]) would hold
//! that worker and every task queued on it. Each runner thread has a current-thread tokio
//! runtime for the script's own waiting (its deadline, the answers of nested calls, which run
//! on the server's runtime). Idle runners wait for the next run; a runner whose run was
//! abandoned ends once it is done (it runs at the lowest priority from then on).

use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};

use super::{Control, ScriptError};

/// A run, given the runner's runtime.
pub(super) type Work = Box<dyn FnOnce(&tokio::runtime::Runtime) + Send>;

/// Idle runners kept waiting for the next run; more end when their run is done.
const MAX_IDLE: usize = 4;

/// The idle runners, the last one idle last.
static IDLE: Mutex<Vec<mpsc::Sender<Assignment>>> = Mutex::new(Vec::new());

/// A run and the control of its sandbox (where the runner notes its thread id).
struct Assignment {
    work: Work,
    control: Arc<Control>,
}

/// Hands `work` to an idle runner, or to a new one.
pub(super) fn submit(work: Work, control: Arc<Control>) -> Result<(), ScriptError> {
    let mut assignment = Assignment { work, control };
    loop {
        let idle = IDLE.lock().unwrap_or_else(PoisonError::into_inner).pop();
        let Some(runner) = idle else { break };
        match runner.send(assignment) {
            Ok(()) => return Ok(()),
            // That runner has ended: try the next.
            Err(returned) => assignment = returned.0,
        }
    }
    let (send, receive) = mpsc::channel();
    let _ = send.send(assignment);
    std::thread::Builder::new()
        .name("script".into())
        .spawn(move || serve(&send, &receive))
        .map(drop)
        .map_err(|e| ScriptError::Sandbox(format!("cannot start a thread for the script: {e}")))
}

/// A runner: runs what it is handed until it has been abandoned, the runtime cannot be built,
/// or enough others are idle.
fn serve(me: &mpsc::Sender<Assignment>, assignments: &mpsc::Receiver<Assignment>) {
    #[cfg(target_os = "linux")]
    // SAFETY: gettid has no preconditions.
    let thread = unsafe { libc::gettid() };
    #[cfg(not(target_os = "linux"))]
    let thread = 0;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build();
    while let Ok(Assignment { work, control }) = assignments.recv() {
        let Ok(runtime) = &runtime else {
            // Dropping the work drops its report's sender: the caller reports the failure.
            tracing::warn!("cannot build a runtime for a script thread");
            return;
        };
        control.ran_by(Some(thread));
        work(runtime);
        // Abandoned while it ran: this thread may run at the lowest priority now.
        if control.ran_by(None) {
            return;
        }
        let mut idle = IDLE.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() >= MAX_IDLE {
            return;
        }
        idle.push(me.clone());
    }
}
