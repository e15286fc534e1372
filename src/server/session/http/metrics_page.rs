//! `GET /metrics`: the process's counters and, read now, its results, store, catalogs,
//! upstreams and sessions, as Prometheus text; a limited named token's page has only its own
//! servers' and its own calls' series.

use std::sync::atomic::Ordering;

use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::server::State;
use crate::server::metrics::Scope;

pub use prometheus_text::CONTENT_TYPE;

/// Label pairs of a metric family.
type Labels = Vec<(&'static str, String)>;

/// The metrics text of `state` now, as `scope` shows it; `sessions` is the number of live
/// sessions.
pub async fn render(state: &State, sessions: usize, scope: Scope<'_>) -> String {
    let mut registry = state.metrics.registry(scope);
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
    let counts = state.catalogs.catalog_counts().into_iter();
    for (server, (l, s)) in counts.filter(|(server, _)| scope.sees_server(server)) {
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
    for server in &state.settings().servers {
        if scope.sees_server(&server.name) && state.manager.is_connected(&server.name).await {
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
