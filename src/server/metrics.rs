//! The counters a serving process keeps for `GET /metrics`: HTTP requests, tool calls by
//! server and outcome with their latencies (the page itself is `session::http::metrics_page`).

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

type Labels = Vec<(&'static str, String)>;
type Histograms = Family<Labels, Histogram, fn() -> Histogram>;

/// Counters and histograms kept while serving; the rest is read from the state at scrape.
#[derive(Debug)]
pub struct Metrics {
    http_requests: Family<Labels, Counter>,
    tool_calls: Family<Labels, Counter>,
    tool_seconds: Histograms,
    /// The last hour per minute, for the console's charts.
    pub minutes: super::minutes::Minutes,
}

/// Latency buckets from 1 ms to about 33 s.
fn latency() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            http_requests: Family::default(),
            tool_calls: Family::default(),
            tool_seconds: Family::new_with_constructor(latency),
            minutes: Default::default(),
        }
    }
}

impl Metrics {
    /// One HTTP request answered with `status`.
    pub fn http_request(&self, method: &str, status: u16) {
        let method = match method {
            "GET" | "POST" | "DELETE" => method,
            _ => "other",
        };
        self.http_requests
            .get_or_create(&vec![
                ("method", method.to_owned()),
                ("status", status.to_string()),
            ])
            .inc();
    }

    /// One call of a tool of `server` by `principal` (a token's name; `None` over stdio) that
    /// took `took`; `ok` unless its result is an error.
    pub fn tool_call(&self, server: &str, principal: Option<&str>, ok: bool, took: Duration) {
        let outcome = if ok { "ok" } else { "error" };
        self.tool_calls
            .get_or_create(&vec![
                ("server", server.to_owned()),
                ("outcome", outcome.to_owned()),
                ("principal", principal.unwrap_or("local").to_owned()),
            ])
            .inc();
        self.tool_seconds
            .get_or_create(&vec![("server", server.to_owned())])
            .observe(took.as_secs_f64());
        self.minutes.record(server, ok, took);
    }

    /// A registry holding this process's counters, to which a page adds its gauges.
    pub fn registry(&self) -> Registry {
        let mut registry = Registry::with_prefix("meta_server");
        registry.register(
            "http_requests",
            "HTTP requests answered, by method and status",
            self.http_requests.clone(),
        );
        registry.register(
            "tool_calls",
            "Tool calls through call_tool, by server, outcome and principal (a token's name)",
            self.tool_calls.clone(),
        );
        registry.register(
            "tool_call_duration_seconds",
            "Time from call_tool to the shaped result, by server",
            self.tool_seconds.clone(),
        );
        registry
    }
}
