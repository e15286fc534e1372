//! The stdio transport to a child server. Like rmcp's `TokioChildProcess`, but it accepts
//! lines far above rmcp's 16 MiB default (server-filesystem sends one 27 MB line for a 13 MB
//! file) and stops the child's whole process group.

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop, ProcessGroup};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::process::{ChildStderr, ChildStdin, ChildStdout, Command};

/// The longest JSON-RPC line accepted from a child; longer lines are dropped by rmcp.
pub const MAX_LINE_BYTES: usize = 512 << 20;
/// How long a child gets to exit after stdin closes, and again after SIGTERM.
const EXIT_GRACE: Duration = Duration::from_secs(3);
/// How long processes left in the group get after SIGTERM.
const LEFTOVER_GRACE: Duration = Duration::from_millis(200);
const SIGTERM: i32 = 15;
const SIGKILL: i32 = 9;

pub struct ChildTransport {
    child: Option<Box<dyn ChildWrapper>>,
    io: AsyncRwTransport<RoleClient, ChildStdout, ChildStdin>,
}

impl ChildTransport {
    /// Spawns `cmd` as the leader of a new process group, stdio piped.
    pub fn spawn(mut cmd: Command) -> std::io::Result<(Self, Option<ChildStderr>, Option<u32>)> {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut wrapped = CommandWrap::from(cmd);
        wrapped.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
        let mut child = wrapped.spawn()?;
        let missing = |what| std::io::Error::other(format!("child {what} was not piped"));
        let stdin = child.stdin().take().ok_or_else(|| missing("stdin"))?;
        let stdout = child.stdout().take().ok_or_else(|| missing("stdout"))?;
        let stderr = child.stderr().take();
        let pid = child.id();
        let io = AsyncRwTransport::new_client(stdout, stdin).with_max_line_length(MAX_LINE_BYTES);
        Ok((
            Self {
                child: Some(child),
                io,
            },
            stderr,
            pid,
        ))
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
        self.io.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.io.receive()
    }

    /// The MCP stdio shutdown: close stdin, wait, SIGTERM the group, wait, kill the group.
    /// Processes the server started and left behind in its group are stopped too.
    async fn close(&mut self) -> Result<(), Self::Error> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let _ = self.io.close().await;
        let leader_gone = exited(&mut child).await.is_some()
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

impl Drop for ChildTransport {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Killing the group is synchronous to start; reaping happens in the background.
            let _ = child.start_kill();
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                handle.spawn(async move {
                    let _ = child.wait().await;
                });
            }
        }
    }
}
