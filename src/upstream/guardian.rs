//! Stopping upstream process groups when meta-server dies, even by SIGKILL.
//!
//! A direct child gets `PR_SET_PDEATHSIG` (see `child.rs`), but what it started in its process
//! group (an `npx` wrapper's `node`, a shell's background job) would live on. The guardian is
//! a small second process (`meta-server __guard`, in a process group of its own) that reads
//! `+PGID` / `-PGID` lines from a pipe meta-server holds; when the pipe closes, however
//! meta-server ended, it kills every group still listed and exits. A process that left its
//! group (`setsid`) is out of reach: that is the upstream's own business.

use std::io::{BufRead, Write};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::OnceLock;

use parking_lot::Mutex;

/// The hidden subcommand that runs the guardian side.
pub const SUBCOMMAND: &str = "__guard";

/// The executable to run as the guardian, set by [`arm`]; the guardian itself starts with the
/// first upstream (see [`watch`]), so a process that starts none has no child at all.
static EXE: OnceLock<std::path::PathBuf> = OnceLock::new();
static GUARDIAN: OnceLock<Mutex<Option<ChildStdin>>> = OnceLock::new();

/// Arms the guardian for this process: `exe` is run with [`SUBCOMMAND`] just before the first
/// upstream is spawned. Unarmed (as in library tests) only direct children die with
/// meta-server.
pub fn arm(exe: std::path::PathBuf) {
    let _ = EXE.set(exe);
}

/// Starts the guardian (once), if armed. Without one (it could not start, or nobody armed it)
/// only direct children die with meta-server.
pub(super) fn start() {
    let Some(exe) = EXE.get() else {
        return;
    };
    GUARDIAN.get_or_init(|| {
        let mut cmd = Command::new(exe);
        cmd.arg(SUBCOMMAND)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        #[cfg(unix)]
        {
            // Ctrl-C in a terminal signals the foreground group; the guardian must outlive
            // meta-server's own shutdown.
            use std::os::unix::process::CommandExt;
            cmd.process_group(0);
        }
        match cmd.spawn() {
            Ok(mut child) => Mutex::new(child.stdin.take()),
            Err(e) => {
                tracing::warn!(
                    "cannot start the guardian; upstreams' own children may outlive a killed meta-server: {e}"
                );
                Mutex::new(None)
            }
        }
    });
}

/// Tells the guardian about process group `pgid` (an upstream just spawned).
pub(super) fn watch(pgid: u32) {
    send(&format!("+{pgid}\n"));
}

/// Tells the guardian that group `pgid` was stopped.
pub(super) fn release(pgid: u32) {
    send(&format!("-{pgid}\n"));
}

fn send(line: &str) {
    let Some(guardian) = GUARDIAN.get() else {
        return;
    };
    let mut pipe = guardian.lock();
    if let Some(stdin) = pipe.as_mut()
        && stdin.write_all(line.as_bytes()).is_err()
    {
        tracing::warn!(
            "the guardian is gone; upstreams' own children may outlive a killed meta-server"
        );
        *pipe = None;
    }
}

/// The guardian side: follows the groups listed on stdin; at end of input kills those still
/// listed. A group id is reused only once no process is left in the group, so a listed id
/// still names the upstream's group unless it was stopped without a `-` line.
pub fn run() {
    let mut groups = std::collections::BTreeSet::new();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let (op, id) = line.split_at(line.len().min(1));
        let Ok(pgid) = id.parse::<i32>() else {
            continue;
        };
        match op {
            "+" if pgid > 1 => {
                groups.insert(pgid);
            }
            "-" => {
                groups.remove(&pgid);
            }
            _ => {}
        }
    }
    #[cfg(unix)]
    for pgid in groups {
        // SAFETY: kill has no memory-safety preconditions; a negative pid names a group.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}
