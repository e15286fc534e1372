//! The process's one clock: tokio's `Instant`, which is the system's monotonic clock and, in
//! tests with a paused runtime clock, follows that clock, so timeouts, backoff, debounce and
//! login windows are tested without waiting. `clippy.toml` bans std's `Instant` elsewhere.

pub use tokio::time::Instant;
