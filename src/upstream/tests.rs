//! Time-dependent behaviour of the manager on tokio's paused clock, against in-process
//! upstreams: idle stop, and that a call in flight keeps its server up however long it takes.

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::json;

use super::Origin;
use super::in_process::TestUpstream;
use crate::config::ServerConfig;

const IDLE: Duration = Duration::from_secs(300);

fn server() -> ServerConfig {
    let mut config = ServerConfig::catalog_only("up");
    config.idle_timeout = IDLE;
    config.call_timeout = Duration::from_secs(3600);
    config
}

fn arguments(value: serde_json::Value) -> Option<rmcp::model::JsonObject> {
    value.as_object().cloned()
}

#[tokio::test(start_paused = true)]
async fn an_idle_upstream_stops_after_its_idle_timeout_and_restarts_on_the_next_call() {
    let upstream = TestUpstream::new(&["echo"]);
    let manager = upstream.manager(&[server()], None);
    let echo = || {
        manager.call_tool(
            "up",
            "echo",
            arguments(json!({"text": "hi"})),
            None,
            &Origin::Detached,
        )
    };
    echo().await.unwrap().expect("a result");
    assert!(manager.is_connected("up").await);

    tokio::time::sleep(IDLE - Duration::from_secs(1)).await;
    assert!(manager.is_connected("up").await, "not idle long enough yet");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!manager.is_connected("up").await, "stopped once idle");
    assert_eq!(
        upstream.live.load(Ordering::SeqCst),
        0,
        "the upstream saw it close"
    );

    echo().await.unwrap().expect("a result");
    assert!(
        manager.is_connected("up").await,
        "the next call starts it again"
    );
    manager.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_call_in_flight_keeps_its_upstream_past_the_idle_timeout() {
    let upstream = TestUpstream::new(&["sleep"]);
    let manager = upstream.manager(&[server()], None);
    let long = 3 * IDLE.as_secs();
    let call = manager.call_tool(
        "up",
        "sleep",
        arguments(json!({"secs": long})),
        None,
        &Origin::Detached,
    );
    let result = call.await.unwrap().expect("a result, not an error");
    assert_eq!(
        result.content[0].as_text().map(|t| t.text.as_str()),
        Some(format!("slept {long}s").as_str()),
        "a call three idle timeouts long ran to its end"
    );
    tokio::time::sleep(IDLE - Duration::from_secs(1)).await;
    assert!(
        manager.is_connected("up").await,
        "idle time counts from the call's end"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!manager.is_connected("up").await);
}
