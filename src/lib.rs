//! meta-server: one MCP entry in front of many MCP servers.
//!
//! Clients see three fixed meta-tools (`search_tools`, `get_tool_details`, `call_tool`); the
//! tools of every configured upstream live in a persisted catalog, searched with BM25, and
//! upstreams are started only when one of their tools is called. See `ARCHITECTURE.md`.

pub mod atomic_file;
pub mod audit;
pub mod auth;
pub mod binary;
pub mod budget;
pub mod catalog;
pub mod checksum;
pub mod cli;
pub mod clients;
pub mod clock;
pub mod config;
pub mod echo;
pub mod hidden;
pub mod learning;
pub mod library;
pub mod policy;
pub mod redact;
pub mod result;
pub mod script;
pub mod search;
pub mod server;
pub mod skills;
pub mod store;
pub mod surrogates;
pub mod telemetry;
pub mod trust;
pub mod upstream;
pub mod verbatim;
