//! The stdio transport to a child server. Like rmcp's `TokioChildProcess`, but one line (one
//! message) may be as long as the server's `maxMessageMb` allows, far above rmcp's 16 MiB
//! default (server-filesystem sends one 27 MB line for a 13 MB file), and a longer one drops
//! the connection at the limit instead of being read to its end; lines are read as
//! [`wire::decode`] says; and closing stops the child's whole process group.

use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop, ProcessGroup};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::sync::Mutex;

use super::guardian;
use super::wire::{self, Faults};

/// How long a child gets to exit after stdin closes, and again after SIGTERM.
const EXIT_GRACE: Duration = Duration::from_secs(3);
/// How long processes left in the group get after SIGTERM.
const LEFTOVER_GRACE: Duration = Duration::from_millis(200);
const SIGTERM: i32 = 15;
const SIGKILL: i32 = 9;

pub struct ChildTransport {
    child: Option<Box<dyn ChildWrapper>>,
    stdout: BufReader<ChildStdout>,
    stdin: Arc<Mutex<Option<ChildStdin>>>,
    /// The line being read: kept across `receive` calls, which may be cancelled mid-line.
    line: Vec<u8>,
    /// The longest line read, in bytes (newline not counted).
    limit: usize,
    /// Set once a line passed `limit`: nothing more is read.
    overflowed: bool,
    faults: Faults,
}

impl ChildTransport {
    /// Spawns `cmd` as the leader of a new process group, stdio piped. The child dies with
    /// meta-server, however meta-server ends; the guardian stops the rest of its group.
    pub fn spawn(
        mut cmd: Command,
        limit: usize,
        faults: Faults,
    ) -> std::io::Result<(Self, Option<ChildStderr>, Option<u32>)> {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        die_with_parent(&mut cmd);
        guardian::start();
        let mut wrapped = CommandWrap::from(cmd);
        wrapped.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
        let mut child = wrapped.spawn()?;
        let missing = |what| std::io::Error::other(format!("child {what} was not piped"));
        let stdin = child.stdin().take().ok_or_else(|| missing("stdin"))?;
        let stdout = child.stdout().take().ok_or_else(|| missing("stdout"))?;
        let stderr = child.stderr().take();
        let pid = child.id();
        if let Some(pid) = pid {
            guardian::watch(pid);
        }
        Ok((
            Self {
                child: Some(child),
                stdout: BufReader::with_capacity(64 << 10, stdout),
                stdin: Arc::new(Mutex::new(Some(stdin))),
                line: Vec::new(),
                limit,
                overflowed: false,
                faults,
            },
            stderr,
            pid,
        ))
    }

    /// Reads up to the end of the current line into `self.line`; false at end of file, on a
    /// read error, or once the line passed the limit (then the fault is noted).
    async fn read_line(&mut self) -> bool {
        loop {
            let (used, complete) = {
                let available = match self.stdout.fill_buf().await {
                    Ok(available) => available,
                    Err(e) => {
                        tracing::debug!("reading the server's stdout failed: {e}");
                        return false;
                    }
                };
                if available.is_empty() {
                    return false;
                }
                let newline = available.iter().position(|&b| b == b'\n');
                let content = newline.unwrap_or(available.len());
                if self.line.len().saturating_add(content) > self.limit {
                    self.overflowed = true;
                    self.line = Vec::new();
                    self.faults.note(wire::too_large(self.limit));
                    return false;
                }
                let used = newline.map_or(available.len(), |at| at + 1);
                self.line.extend_from_slice(&available[..content]);
                (used, newline.is_some())
            };
            self.stdout.consume(used);
            if complete {
                return true;
            }
        }
    }
}

async fn exited(child: &mut Box<dyn ChildWrapper>) -> Option<ExitStatus> {
    tokio::time::timeout(EXIT_GRACE, child.wait())
        .await
        .ok()?
        .ok()
}

impl Transport<RoleClient> for ChildTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let stdin = self.stdin.clone();
        async move {
            let mut line = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            line.push(b'\n');
            let mut stdin = stdin.lock().await;
            let Some(stdin) = stdin.as_mut() else {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    "the server's stdin is closed",
                ));
            };
            stdin.write_all(&line).await?;
            stdin.flush().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        while !self.overflowed && self.read_line().await {
            let mut line = std::mem::take(&mut self.line);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            if let Some(message) = wire::decode(&mut line) {
                return Some(message);
            }
        }
        None
    }

    /// The MCP stdio shutdown: close stdin, wait, SIGTERM the group, wait, kill the group.
    /// Processes the server started and left behind in its group are stopped too. A server
    /// cut off mid-line is likely blocked writing the rest: it gets SIGTERM at once.
    async fn close(&mut self) -> Result<(), Self::Error> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let _released = Released(child.id());
        drop(self.stdin.lock().await.take());
        let leader_gone = (!self.overflowed && exited(&mut child).await.is_some())
            || (child.signal(SIGTERM).is_ok() && exited(&mut child).await.is_some());
        if !leader_gone {
            return Box::into_pin(child.kill()).await;
        }
        // The leader is gone; its group may not be. Errors mean nobody was left.
        if child.signal(SIGTERM).is_ok() {
            tokio::time::sleep(LEFTOVER_GRACE).await;
            let _ = child.signal(SIGKILL);
        }
        Ok(())
    }
}

/// Tells the guardian, when dropped, that the group led by this pid was stopped.
struct Released(Option<u32>);

impl Drop for Released {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            guardian::release(pid);
        }
    }
}

/// Makes the kernel kill the child when meta-server dies, even by SIGKILL (Linux).
///
/// The signal follows the thread that spawned the child: upstreams are spawned from tokio's
/// worker threads, which live as long as the runtime.
#[cfg(target_os = "linux")]
fn die_with_parent(cmd: &mut Command) {
    // SAFETY: getpid is async-signal-safe.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure runs between fork and exec and calls only prctl and getppid, both
    // async-signal-safe; it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died before the signal was armed.
            if libc::getppid() != parent {
                return Err(std::io::Error::other(
                    "meta-server exited while starting the server",
                ));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_cmd: &mut Command) {}

impl Drop for ChildTransport {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Killing the group is synchronous to start; reaping happens in the background.
            let released = Released(child.id());
            let _ = child.start_kill();
            drop(released);
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                handle.spawn(async move {
                    let _ = child.wait().await;
                });
            }
        }
    }
}
