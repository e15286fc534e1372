//! What `GET /metrics` shows, in the Prometheus text format: HTTP requests, tool calls by
//! server and outcome with their latencies, what result handling stored (or could not keep),
//! shared-store errors, catalog listings, live upstreams and sessions.

use std::sync::atomic::Ordering;
use std::time::Duration;

use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::State;

pub use prometheus_text::CONTENT_TYPE;

type Labels = Vec<(&'static str, String)>;
type Histograms = Family<Labels, Histogram, fn() -> Histogram>;

/// Counters and histograms kept while serving; the rest is read from the state at scrape.
#[derive(Debug)]
pub struct Metrics {
    http_requests: Family<Labels, Counter>,
    tool_calls: Family<Labels, Counter>,
    tool_seconds: Histograms,
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

    /// One call of a tool of `server` that took `took`; `ok` unless its result is an error.
    pub fn tool_call(&self, server: &str, ok: bool, took: Duration) {
        let outcome = if ok { "ok" } else { "error" };
        self.tool_calls
            .get_or_create(&vec![
                ("server", server.to_owned()),
                ("outcome", outcome.to_owned()),
            ])
            .inc();
        self.tool_seconds
            .get_or_create(&vec![("server", server.to_owned())])
            .observe(took.as_secs_f64());
    }
}

/// The metrics text of `state` now; `sessions` is the number of live sessions.
pub async fn render(state: &State, sessions: usize) -> String {
    let metrics = &state.metrics;
    let mut registry = Registry::with_prefix("meta_server");
    registry.register(
        "http_requests",
        "HTTP requests answered, by method and status",
        metrics.http_requests.clone(),
    );
    registry.register(
        "tool_calls",
        "Tool calls through call_tool, by server and outcome",
        metrics.tool_calls.clone(),
    );
    registry.register(
        "tool_call_duration_seconds",
        "Time from call_tool to the shaped result, by server",
        metrics.tool_seconds.clone(),
    );
    let counts = state.results.counts();
    let load = |n: &std::sync::atomic::AtomicU64| n.load(Ordering::Relaxed);
    registry.register(
        "results_stored",
        "Full results stored for reading back",
        ConstCounter::new(load(&counts.stored)),
    );
    registry.register(
        "results_stored_bytes",
        "Bytes of the full results stored",
        ConstCounter::new(load(&counts.stored_bytes)),
    );
    registry.register(
        "results_unkept",
        "Results cut without their full version kept (the store was unreachable)",
        ConstCounter::new(load(&counts.unkept)),
    );
    if let Some(held) = state.results.store().held_bytes() {
        registry.register(
            "results_held_bytes",
            "Bytes of stored results this process holds in memory and on disk",
            ConstGauge::new(i64::try_from(held).unwrap_or(i64::MAX)),
        );
    }
    if let Some(store) = &state.shared {
        let stats = store.stats();
        let errors: Family<Labels, Counter> = Family::default();
        for (op, n) in &stats.errors {
            errors
                .get_or_create(&vec![("op", (*op).to_owned())])
                .inc_by(*n);
        }
        registry.register(
            "store_errors",
            "Failed operations on the shared store, by kind",
            errors,
        );
        registry.register(
            "store_up",
            "1 while the shared store answers",
            ConstGauge::new(i64::from(stats.up)),
        );
    }
    let (listed, shared): (Family<Labels, Counter>, Family<Labels, Counter>) = Default::default();
    for (server, (l, s)) in state.catalog_counts() {
        if l > 0 {
            listed
                .get_or_create(&vec![("server", server.clone())])
                .inc_by(l);
        }
        if s > 0 {
            shared.get_or_create(&vec![("server", server)]).inc_by(s);
        }
    }
    registry.register(
        "catalog_listings",
        "Tool lists this process fetched from an upstream, by server",
        listed,
    );
    registry.register(
        "catalogs_shared",
        "Catalogs this process took from the shared store, by server",
        shared,
    );
    let mut live = 0;
    for server in &state.settings.servers {
        if state.manager.is_connected(&server.name).await {
            live += 1;
        }
    }
    registry.register(
        "upstreams_live",
        "Upstream servers connected now",
        ConstGauge::new(live),
    );
    registry.register(
        "sessions",
        "MCP sessions open on this process",
        ConstGauge::new(i64::try_from(sessions).unwrap_or(i64::MAX)),
    );
    let mut text = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_text::encode(&mut text, &registry);
    text
}
