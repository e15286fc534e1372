//! Integration tests: the real `meta-server` binary, driven over stdio and on the command line.
//! Tests that talk to upstream servers use the pinned ones from `scripts/install-peers`.
#![allow(
    clippy::disallowed_types,
    reason = "measures wall time outside any runtime clock"
)]

mod auth;
mod bounds;
mod cli;
mod docs;
#[cfg(feature = "embeddings")]
mod embed;
mod eval;
mod faults;
mod hardening;
mod help;
mod http;
mod install;
mod integrity;
mod learning;
mod load;
mod protocol;
mod saved_index;
mod store;
mod support;
mod terminal;
mod unreachable;
