//! Catalogs while serving: first run (a server without a catalog listed when first needed),
//! freshness (stale and changed tool lists re-listed), catalogs shared by replicas, and the
//! alwaysLoad servers fixed at start-up, and what searches learn from use (`learning`).
//! `refresh` makes one server's catalog fresh, through `shared` when a store is configured,
//! and `listing` lists and installs it; `reload` applies a changed config.

pub(in crate::server) mod always;
mod book;
mod error;
pub(in crate::server) mod first_run;
pub(in crate::server) mod freshness;
#[cfg(test)]
mod freshness_tests;
pub(in crate::server) mod learning;
mod listing;
pub(in crate::server) mod names;
mod refresh;
pub(in crate::server) mod reload;
pub(in crate::server) mod shared;
mod vectors;

pub(in crate::server) use always::resolve as resolve_listed;
pub use book::Catalogs;
pub(in crate::server) use book::unavailable_of;
pub use error::RefreshError;
pub(in crate::server) use refresh::refresh;
