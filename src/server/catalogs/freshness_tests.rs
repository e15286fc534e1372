//! Keeping catalogs fresh, on tokio's paused clock against an in-process upstream: a burst of
//! `tools/list_changed` is one re-listing, after the quiet time; a changed prompt list too.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::json;

use super::freshness;
use crate::catalog::Catalog;
use crate::config::Settings;
use crate::server::State;
use crate::upstream::in_process::TestUpstream;

/// A serving state whose one server, `up`, is `upstream`, with catalogs in `dir`, watched.
fn serving(dir: &std::path::Path, upstream: &TestUpstream) -> Arc<State> {
    let config = json!({"metaServer": {"skillsDirs": []}, "mcpServers": {"up": {"command": "/nonexistent"}}});
    let mut settings = Settings::parse(&dir.join("config.json"), &config.to_string()).unwrap();
    settings.catalog_dir = dir.join("catalogs");
    let (library, _) = crate::server::load_library(&settings).unwrap();
    let state = State::with_manager(settings, library, |servers, events| {
        upstream.manager(servers, Some(events))
    });
    tokio::spawn(freshness::watch(state.clone()));
    state
}

#[tokio::test(start_paused = true)]
async fn a_burst_of_list_changed_is_one_relisting_after_the_quiet_time() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = TestUpstream::new(&["alpha"]);
    let state = serving(dir.path(), &upstream);
    let lists = || upstream.lists.load(Ordering::SeqCst);

    // Connecting a server without a catalog lists it at once.
    state.manager.connect("up").await.unwrap();
    tokio::time::sleep(Duration::from_millis(1)).await;
    let first = lists();
    assert!(first >= 1, "listed when it connected");
    assert!(state.catalogs.library().get("up__alpha").is_some());

    upstream.set_tools(&["alpha", "beta"]);
    for _ in 0..5 {
        upstream.announce_change().await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // 100 ms after the last announcement: still inside its quiet time.
    assert_eq!(lists(), first, "nothing is re-listed during a burst");
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(lists(), first + 1, "one re-listing after the burst");
    assert!(state.catalogs.library().get("up__beta").is_some());
    let catalog = Catalog::load_server(&state.settings().catalog_dir, "up")
        .unwrap()
        .unwrap();
    assert_eq!(catalog.tools.len(), 2, "the new list is persisted");
    state.manager.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_changed_prompt_list_is_recorded_after_the_quiet_time() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = TestUpstream::new(&["alpha"]);
    upstream.set_prompts(&["greet"]);
    let state = serving(dir.path(), &upstream);
    let prompts = |state: &State| {
        let catalog = Catalog::load_server(&state.settings().catalog_dir, "up")
            .unwrap()
            .unwrap();
        let listed = catalog.prompts.unwrap();
        listed.iter().map(|p| p["name"].clone()).collect::<Vec<_>>()
    };
    state.manager.connect("up").await.unwrap();
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(prompts(&state), [json!("greet")]);

    upstream.set_prompts(&["greet", "review"]);
    upstream.announce_prompts_change().await;
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert_eq!(prompts(&state), [json!("greet"), json!("review")]);
    state.manager.shutdown().await;
}
