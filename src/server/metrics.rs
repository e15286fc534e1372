//! The counters a serving process keeps for `GET /metrics`: HTTP requests, tool calls by
//! server and outcome with their latencies (the page itself is `session::http::metrics_page`).
//! A named token limited to some servers sees only the series of those servers and of its
//! own calls; other tokens see every series.

use std::collections::BTreeMap;
use std::time::Duration;

use parking_lot::Mutex;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::access::Access;

type Labels = Vec<(&'static str, String)>;

/// Which series a scrape shows.
#[derive(Clone, Copy)]
pub(crate) enum Scope<'a> {
    /// Every series (no token, `META_SERVER_TOKEN`, an unlimited named token).
    All,
    /// A limited named token's: its servers' series, and of the calls only its own.
    Of {
        access: &'a Access,
        principal: &'a str,
    },
}

impl Scope<'_> {
    /// Whether a series of `server` is shown.
    pub(crate) fn sees_server(&self, server: &str) -> bool {
        match self {
            Self::All => true,
            Self::Of { access, .. } => access.sees_server(server),
        }
    }

    fn sees_principal(&self, principal: &str) -> bool {
        match self {
            Self::All => true,
            Self::Of { principal: own, .. } => *own == principal,
        }
    }
}

/// Counters and histograms kept while serving; the rest is read from the state at scrape.
#[derive(Debug, Default)]
pub struct Metrics {
    http_requests: Family<Labels, Counter>,
    /// Tool calls by (server, outcome, principal).
    tool_calls: Mutex<BTreeMap<(String, &'static str, String), Counter>>,
    /// Their latencies by server.
    tool_seconds: Mutex<BTreeMap<String, Histogram>>,
}

/// Latency buckets from 1 ms to about 33 s.
fn latency() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
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
        let principal = principal.unwrap_or("local").to_owned();
        (self.tool_calls.lock())
            .entry((server.to_owned(), outcome, principal))
            .or_default()
            .inc();
        (self.tool_seconds.lock())
            .entry(server.to_owned())
            .or_insert_with(latency)
            .observe(took.as_secs_f64());
    }

    /// A registry holding this process's counters that `scope` shows, to which a page adds
    /// its gauges.
    pub(crate) fn registry(&self, scope: Scope<'_>) -> Registry {
        let mut registry = Registry::with_prefix("meta_server");
        registry.register(
            "http_requests",
            "HTTP requests answered, by method and status",
            self.http_requests.clone(),
        );
        let calls = (self.tool_calls.lock().iter())
            .filter(|((server, _, principal), _)| {
                scope.sees_server(server) && scope.sees_principal(principal)
            })
            .map(|((server, outcome, principal), counter)| {
                let labels = vec![
                    ("server", server.clone()),
                    ("outcome", (*outcome).to_owned()),
                    ("principal", principal.clone()),
                ];
                (labels, counter.clone())
            })
            .collect();
        registry.register_collector(Box::new(Series {
            name: "tool_calls",
            help: "Tool calls through call_tool, by server, outcome and principal (a token's name).",
            kind: MetricType::Counter,
            series: calls,
        }));
        let seconds = (self.tool_seconds.lock().iter())
            .filter(|(server, _)| scope.sees_server(server))
            .map(|(server, histogram)| (vec![("server", server.clone())], histogram.clone()))
            .collect();
        registry.register_collector(Box::new(Series {
            name: "tool_call_duration_seconds",
            help: "Time from call_tool to the shaped result, by server.",
            kind: MetricType::Histogram,
            series: seconds,
        }));
        registry
    }
}

/// One metric family of the series a scrape shows (none: the family is left out, as
/// prometheus-client leaves out an empty one).
#[derive(Debug)]
struct Series<M> {
    name: &'static str,
    help: &'static str,
    kind: MetricType,
    series: Vec<(Labels, M)>,
}

impl<M: EncodeMetric + std::fmt::Debug + Send + Sync + 'static> Collector for Series<M> {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if self.series.is_empty() {
            return Ok(());
        }
        let mut family = encoder.encode_descriptor(self.name, self.help, None, self.kind)?;
        for (labels, metric) in &self.series {
            metric.encode(family.encode_family(labels)?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{TokenConfig, ToolFilter};

    fn text(metrics: &Metrics, scope: Scope<'_>) -> String {
        let mut text = String::new();
        let registry = metrics.registry(scope);
        prometheus_client::encoding::prometheus_text::encode(&mut text, &registry).unwrap();
        text
    }

    #[test]
    fn a_limited_token_sees_its_servers_and_its_own_calls_only() {
        let metrics = Metrics::default();
        let took = Duration::from_millis(3);
        metrics.tool_call("fs", Some("fs-only"), true, took);
        metrics.tool_call("fs", Some("ops"), false, took);
        metrics.tool_call("memory", Some("ops"), true, took);
        let all = text(&metrics, Scope::All);
        for series in [
            r#"meta_server_tool_calls_total{server="fs",outcome="ok",principal="fs-only"} 1"#,
            r#"meta_server_tool_calls_total{server="fs",outcome="error",principal="ops"} 1"#,
            r#"meta_server_tool_calls_total{server="memory",outcome="ok",principal="ops"} 1"#,
            r#"meta_server_tool_call_duration_seconds_count{server="memory"} 1"#,
            "Tool calls through call_tool, by server, outcome and principal (a token's name).\n",
        ] {
            assert!(all.contains(series), "{series} in\n{all}");
        }
        let token = TokenConfig {
            name: "fs-only".into(),
            token: "${T}".into(),
            servers: Some(vec!["fs".into()]),
            deny_tools: ToolFilter::default(),
        };
        let access = Access::of(&token);
        let scope = Scope::Of {
            access: &access,
            principal: "fs-only",
        };
        let limited = text(&metrics, scope);
        assert!(
            limited.contains(r#"{server="fs",outcome="ok",principal="fs-only"} 1"#),
            "{limited}"
        );
        assert!(limited.contains(r#"duration_seconds_count{server="fs"} 2"#));
        assert!(
            !limited.contains("ops") && !limited.contains("memory"),
            "{limited}"
        );
    }
}
