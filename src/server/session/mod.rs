//! The protocol edge: what one client session talks to (`handler`), the two revisions it
//! speaks (`revision`), the two transports (`stdio`, `http`), start-up and shutdown (`start`),
//! the config file followed while serving (`config_file`), and what a session says around the
//! tools: the instructions, login offers.

mod config_file;
mod handler;
pub(in crate::server) mod http;
mod input_required;
pub(in crate::server) mod instructions;
mod list_changes;
mod login_offer;
mod pages;
mod principal;
mod revision;
pub(in crate::server) mod start;
mod stdio;
mod subscriptions;
mod whole;

pub use handler::MetaServer;
pub use http::{
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE, HttpError, HttpOptions,
    HttpServer, NamedToken, PATH as HTTP_PATH, Token, TokenError,
};
pub use instructions::overview;
pub use start::StartError;
pub use stdio::{StdioError, serve_stdio};
