//! Result handling: what a client is shown of a large result, and how the rest is recovered.

pub mod truncate;
