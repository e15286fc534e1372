//! Following the config file while serving. It is read again every second and compared by
//! checksum: a read of a small file costs nothing, needs no dependency, and follows what
//! file-watch APIs lose track of (an editor's save by rename, a Kubernetes ConfigMap's symlink
//! swap, a network file system). SIGHUP reads it at once. A new text is applied as a
//! difference (`catalogs/reload.rs`); one that does not load is not, and the log says why.

use std::time::Duration;

use super::handler::MetaServer;
use crate::server::catalogs::reload;

/// How often the file is read.
const POLL: Duration = Duration::from_secs(1);

/// Applies each new text of the config file to `server`'s state until the process ends.
pub(super) async fn follow(server: MetaServer) {
    let path = server.state.settings().source.clone();
    let mut hangup = Hangup::new();
    let mut every = tokio::time::interval(POLL);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    // The first read is compared with the text of the settings in force: a change made while
    // starting is not missed.
    let mut seen = server.state.settings().text_sum;
    let mut unreadable: Option<String> = None;
    loop {
        let asked = tokio::select! {
            _ = every.tick() => false,
            () = hangup.recv() => true,
        };
        if asked {
            tracing::info!(config = %path.display(), "SIGHUP: reading the config again");
        }
        let bytes = match tokio::fs::read(&path).await {
            Ok(bytes) => bytes,
            Err(e) => {
                let message = e.to_string();
                if unreadable.as_ref() != Some(&message) {
                    tracing::warn!(config = %path.display(), "cannot read the config ({message}); the running config stays");
                    unreadable = Some(message);
                }
                continue;
            }
        };
        unreadable = None;
        let sum = crate::checksum::of(&bytes);
        if !asked && seen == sum {
            continue;
        }
        seen = sum;
        let Ok(text) = String::from_utf8(bytes) else {
            tracing::warn!(config = %path.display(), "the config is not UTF-8 text; the running config stays");
            continue;
        };
        match reload::apply(&server.state, &text).await {
            Ok(reloaded) => {
                log(&reloaded.change);
                if let Some(always) = reloaded.always {
                    server.relist_always(always).await;
                }
            }
            Err(e) => tracing::warn!("config not applied: {e}"),
        }
    }
}

/// One line for what a reload changed, and one per setting that waits for a restart.
fn log(change: &crate::config::Change) {
    if change.is_empty() {
        return;
    }
    for key in &change.fixed {
        tracing::warn!(
            "config: {key} changed; it applies when meta-server starts again (the running value stays)"
        );
    }
    tracing::info!(
        added = %change.added.join(", "),
        removed = %change.removed.join(", "),
        changed = %change.changed.join(", "),
        settings = change.settings,
        "config reloaded"
    );
}

/// SIGHUP, where there is one.
struct Hangup {
    #[cfg(unix)]
    signal: Option<tokio::signal::unix::Signal>,
}

impl Hangup {
    fn new() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let signal = signal(SignalKind::hangup())
                .inspect_err(|e| tracing::warn!("cannot watch for SIGHUP: {e}"))
                .ok();
            Self { signal }
        }
        #[cfg(not(unix))]
        Self {}
    }

    /// The next SIGHUP; never, without one.
    async fn recv(&mut self) {
        #[cfg(unix)]
        if let Some(signal) = &mut self.signal {
            signal.recv().await;
            return;
        }
        std::future::pending::<()>().await
    }
}
