//! The MCP server the client talks to: three fixed meta-tools over the library of upstream
//! tools. The only module that knows the meta-tools exist.
//!
//! In wings, each depending only on those below it: `session` (the protocol edge: handler,
//! stdio, HTTP, start-up), `tools` (the meta-tools and the one call path) and `passthrough`
//! (upstream prompts, resources and completions), `catalogs` (first
//! run, freshness, shared catalogs, alwaysLoad); beneath them `state` (what one process shares),
//! `caller` (what a session knows about a call), `audit` (the audit line of a call, prompt or
//! read), `logins` (those offered to clients) and `metrics`.

mod access;
mod audit;
mod caller;
mod catalogs;
#[cfg(test)]
mod integrity_tests;
mod logins;
pub mod metrics;
mod passthrough;
mod session;
mod state;
#[cfg(test)]
mod tests;
mod tools;

pub use session::{
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE, HTTP_PATH, HttpError,
    HttpOptions, HttpServer, MetaServer, NamedToken, StartError, StdioError, Token, TokenError,
    overview, serve_stdio,
};
pub use state::State;
pub use tools::{
    Detail, SearchArgs, builtin_catalog, call, definitions, load_library, search_tools,
};
