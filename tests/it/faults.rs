//! The fault matrix: meta-server in front of `examples/fault_server.rs` ("faulty", short
//! timeout) and a second, healthy instance of it. For each fault: an error result (or a cut
//! result), other calls and the other upstream keep answering, no process is left behind, and
//! the next call to the faulty server works (restarting it when it died). No test asserts how
//! long anything took; waits are bounded only so a hang fails instead of blocking the suite.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::{
    Session, children_of, fault_entry, meta_server, processes_with, succeeds, wait_until,
    write_config,
};

/// The faulty server's `timeoutSecs`.
const TIMEOUT_SECS: u64 = 3;

/// One meta-server with fault servers behind it, in its own temp dir.
pub struct Rig {
    dir: tempfile::TempDir,
    /// Appears in the command line of every fault server this rig starts (and nothing else).
    tag: String,
    events: PathBuf,
    pub session: Session,
}

impl Rig {
    /// `servers`: (name, extra fault_server args, timeoutSecs). Catalogs are built first with
    /// `meta-server index` (start-up modes left out), so serving starts nothing by itself.
    pub fn start(servers: &[(&str, &[&str], u64)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let tag = dir.path().join("fault").display().to_string();
        let events = dir.path().join("events.log");
        let catalogs = dir.path().join("catalogs");
        let entries = |plain: bool| -> Value {
            servers
                .iter()
                .map(|(name, extra, timeout)| {
                    let extra: &[&str] = if plain { &[] } else { extra };
                    let entry = fault_entry(Path::new(&tag), &events, extra, *timeout);
                    (name.to_string(), entry)
                })
                .collect::<serde_json::Map<_, _>>()
                .into()
        };
        let index_dir = dir.path().join("index");
        std::fs::create_dir(&index_dir).unwrap();
        let index_config = write_config(&index_dir, entries(true), json!({}));
        succeeds(&mut meta_server(&[
            "--config",
            index_config.to_str().unwrap(),
            "--catalog-dir",
            catalogs.to_str().unwrap(),
            "index",
        ]));
        let config = write_config(dir.path(), entries(false), json!({}));
        let mut session = Session::start(&config, &catalogs);
        session.initialize();
        Self {
            dir,
            tag,
            events,
            session,
        }
    }

    /// Sends `call_tool {name, arguments}` without waiting.
    pub fn send_call(&mut self, id: u64, name: &str, arguments: Value) {
        self.send_call_with_meta(id, name, arguments, None);
    }

    fn send_call_with_meta(&mut self, id: u64, name: &str, arguments: Value, meta: Option<Value>) {
        let mut params =
            json!({"name": "call_tool", "arguments": {"name": name, "arguments": arguments}});
        if let Some(meta) = meta {
            params["_meta"] = meta;
        }
        self.session
            .send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}));
    }

    /// Calls a tool through `call_tool` and returns its result.
    pub fn call(&mut self, id: u64, name: &str, arguments: Value) -> Value {
        self.send_call(id, name, arguments);
        self.collect(&[id]).replies.remove(&id).unwrap()
    }

    /// Reads until every id in `ids` has its reply; keeps notifications and reply order.
    pub fn collect(&mut self, ids: &[u64]) -> Collected {
        let mut got = Collected::default();
        while ids.iter().any(|id| !got.replies.contains_key(id)) {
            let line = self.session.recv_line();
            let message: Value = serde_json::from_str(&line).expect("JSON lines");
            match message.get("id").and_then(Value::as_u64) {
                Some(id) if message.get("method").is_none() => {
                    got.order.push(id);
                    got.replies.insert(id, message["result"].clone());
                }
                _ => got.notifications.push(message),
            }
        }
        got
    }

    /// What the fault servers recorded (FAULT_EVENTS).
    pub fn events(&self) -> String {
        std::fs::read_to_string(&self.events).unwrap_or_default()
    }

    pub fn wait_for_event(&self, event: &str) {
        wait_until(&format!("fault server event \"{event}\""), || {
            self.events().lines().any(|l| l == event).then_some(())
        });
    }

    /// Live fault servers this rig started.
    pub fn fault_processes(&self) -> Vec<u32> {
        processes_with(&self.tag)
    }

    /// Waits until meta-server has exactly `n` live children.
    pub fn expect_children(&self, n: usize) {
        let pid = self.session.pid();
        wait_until(&format!("meta-server to have {n} children"), || {
            (children_of(pid).len() == n).then_some(())
        });
    }

    /// Closes meta-server's stdin; it must exit cleanly and leave no fault server running.
    pub fn finish(self) {
        let Self {
            dir, tag, session, ..
        } = self;
        assert!(session.finish().success());
        wait_until("every fault server to exit", || {
            processes_with(&tag).is_empty().then_some(())
        });
        drop(dir);
    }
}

#[derive(Default)]
pub struct Collected {
    pub replies: HashMap<u64, Value>,
    pub notifications: Vec<Value>,
    pub order: Vec<u64>,
}

pub fn text(result: &Value) -> String {
    result["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("")
        })
        .unwrap_or_default()
}

fn is_error(result: &Value) -> bool {
    result["isError"] == true
}

fn standard() -> Rig {
    Rig::start(&[("faulty", &[], TIMEOUT_SECS), ("healthy", &[], 30)])
}

fn pid_of(rig: &mut Rig, id: u64, server: &str) -> u32 {
    let result = rig.call(id, &format!("{server}__pid"), json!({}));
    text(&result).parse().expect("pid is a number")
}

#[test]
fn crash_mid_call_is_an_error_and_the_next_call_restarts_the_server() {
    let mut rig = standard();
    let first = pid_of(&mut rig, 10, "faulty");
    let crashed = rig.call(11, "faulty__crash", json!({}));
    assert!(is_error(&crashed), "{crashed}");
    let message = text(&crashed);
    assert!(
        message.contains("closed the connection during tools/call crash")
            && message.contains("crashing on purpose"),
        "{message}"
    );
    wait_until("the crashed server to be gone", || {
        (!rig.fault_processes().contains(&first)).then_some(())
    });
    let second = pid_of(&mut rig, 12, "faulty");
    assert_ne!(first, second, "the next call starts a new process");
    assert_eq!(
        text(&rig.call(13, "healthy__echo", json!({"text": "ok"}))),
        "ok"
    );
    rig.expect_children(2);
    rig.finish();
}

#[test]
fn hang_times_out_and_is_cancelled_while_other_calls_and_servers_answer() {
    let mut rig = standard();
    let faulty = pid_of(&mut rig, 10, "faulty");
    pid_of(&mut rig, 11, "healthy");
    rig.send_call(20, "faulty__hang", json!({}));
    rig.wait_for_event("started hang");
    // While the hang is in flight, the same server and the other one both answer.
    rig.send_call(21, "healthy__echo", json!({"text": "other server"}));
    rig.send_call(22, "faulty__echo", json!({"text": "same server"}));
    let got = rig.collect(&[20, 21, 22]);
    assert_eq!(
        got.order[..2].iter().filter(|id| **id != 20).count(),
        2,
        "{:?}",
        got.order
    );
    assert_eq!(text(&got.replies[&21]), "other server");
    assert_eq!(text(&got.replies[&22]), "same server");
    let hang = &got.replies[&20];
    assert!(is_error(hang), "{hang}");
    assert!(
        text(hang).contains(&format!(
            "did not answer tools/call hang within {TIMEOUT_SECS}s"
        )),
        "{hang}"
    );
    // The timeout was forwarded as notifications/cancelled.
    rig.wait_for_event("cancelled hang");
    assert_eq!(
        pid_of(&mut rig, 23, "faulty"),
        faulty,
        "a hang does not cost the connection"
    );
    rig.expect_children(2);
    rig.finish();
}

#[test]
fn client_cancellation_is_forwarded_to_the_upstream() {
    let mut rig = standard();
    rig.send_call(20, "faulty__hang", json!({}));
    rig.wait_for_event("started hang");
    rig.session.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 20, "reason": "user pressed stop"}}),
    );
    rig.wait_for_event("cancelled hang");
    assert_eq!(
        text(&rig.call(21, "faulty__echo", json!({"text": "after"}))),
        "after"
    );
    rig.expect_children(1);
    rig.finish();
}

#[test]
fn garbage_on_stdout_is_skipped() {
    let mut rig = Rig::start(&[
        ("faulty", &[], TIMEOUT_SECS),
        ("noisy", &["--garbage-on-start"], TIMEOUT_SECS),
    ]);
    let before = pid_of(&mut rig, 10, "faulty");
    let garbage = rig.call(11, "faulty__garbage", json!({}));
    assert!(!is_error(&garbage), "{garbage}");
    assert_eq!(text(&garbage), "survived garbage");
    assert_eq!(
        pid_of(&mut rig, 12, "faulty"),
        before,
        "garbage does not cost the connection"
    );
    let noisy = rig.call(13, "noisy__echo", json!({"text": "after garbage"}));
    assert_eq!(text(&noisy), "after garbage", "{noisy}");
    rig.expect_children(2);
    rig.finish();
}

#[test]
fn slow_initialize_times_out_and_leaves_no_process() {
    let mut rig = Rig::start(&[
        ("slow", &["--slow-init", "30"], TIMEOUT_SECS),
        ("healthy", &[], 30),
    ]);
    let healthy = pid_of(&mut rig, 10, "healthy");
    rig.send_call(20, "slow__echo", json!({"text": "never"}));
    // Connecting "slow" blocks nothing else.
    rig.send_call(21, "healthy__echo", json!({"text": "meanwhile"}));
    let got = rig.collect(&[20, 21]);
    assert_eq!(got.order, [21, 20]);
    assert_eq!(text(&got.replies[&21]), "meanwhile");
    let slow = &got.replies[&20];
    assert!(is_error(slow), "{slow}");
    assert!(
        text(slow).contains(&format!("did not finish connecting within {TIMEOUT_SECS}s")),
        "{slow}"
    );
    // The half-started server is stopped: only the healthy one is left.
    wait_until("the slow server to be stopped", || {
        (rig.fault_processes() == [healthy]).then_some(())
    });
    // The next call tries again (and fails the same way), again leaving nothing behind.
    let again = rig.call(22, "slow__echo", json!({"text": "never"}));
    assert!(
        text(&again).contains("did not finish connecting"),
        "{again}"
    );
    wait_until("the second slow server to be stopped", || {
        (rig.fault_processes() == [healthy]).then_some(())
    });
    rig.expect_children(1);
    rig.finish();
}

/// Peak resident memory of `pid` in kB (VmHWM).
fn peak_rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc status")
}

/// meta-server's peak memory after a 50 MB result stays below this many MB. A 50 MB result
/// is held as a JSON line, a parsed string and the tokenizer's work (about 6x); a leak or a
/// copy per content block would show well above it.
const HUGE_PEAK_MB: u64 = 600;

#[test]
fn huge_results_are_cut_or_refused_within_a_memory_bound() {
    // Producing and moving 50 MB in debug builds is slow; this fault is about size.
    let mut rig = Rig::start(&[("faulty", &[], 120)]);
    // 10 MB (about 2.8 M tokens): under the hard limit, so cut with a notice.
    let cut = rig.call(10, "faulty__huge", json!({"mb": 10}));
    assert!(!is_error(&cut), "{}", &text(&cut)[..200]);
    let shown = text(&cut);
    assert!(
        shown.contains("--- TRUNCATION NOTICE ---"),
        "{}",
        &shown[shown.len() - 500..]
    );
    assert!(
        shown.len() < 1_000_000,
        "cut to the budget, got {} bytes",
        shown.len()
    );
    // 50 MB (about 14 M tokens): over the hard limit, refused with a message.
    let refused = rig.call(11, "faulty__huge", json!({"mb": 50}));
    assert!(is_error(&refused), "{}", &text(&refused)[..200]);
    assert!(
        text(&refused).contains("over the hard limit"),
        "{}",
        text(&refused)
    );
    let peak_mb = peak_rss_kb(rig.session.pid()) / 1024;
    eprintln!("meta-server VmHWM after 10 MB + 50 MB results: {peak_mb} MB");
    assert!(peak_mb < HUGE_PEAK_MB, "meta-server peaked at {peak_mb} MB");
    assert_eq!(
        text(&rig.call(12, "faulty__echo", json!({"text": "small"}))),
        "small"
    );
    rig.expect_children(1);
    rig.finish();
}

#[test]
fn notification_flood_is_absorbed_and_its_progress_relayed() {
    // A debug build needs a few seconds for 10,000 notifications: this fault is about volume,
    // so the timeout is generous.
    let mut rig = Rig::start(&[("faulty", &[], 60), ("healthy", &[], 30)]);
    let count = 5000;
    let meta = json!({"progressToken": "flood-token"});
    rig.send_call_with_meta(10, "faulty__flood", json!({"count": count}), Some(meta));
    let got = rig.collect(&[10]);
    assert_eq!(text(&got.replies[&10]), format!("flooded {count}"));
    let progress: Vec<&Value> = got
        .notifications
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .collect();
    assert!(
        progress
            .iter()
            .all(|p| p["params"]["progressToken"] == "flood-token"),
        "progress carries the client's own token"
    );
    // Relayed progress may be thinned (a bounded backlog), never multiplied.
    assert!(
        !progress.is_empty() && progress.len() <= count,
        "{}",
        progress.len()
    );
    assert!(
        got.notifications
            .iter()
            .all(|n| n["method"] == "notifications/progress"),
        "logging from the upstream is not relayed"
    );
    assert_eq!(
        text(&rig.call(11, "healthy__echo", json!({"text": "fine"}))),
        "fine"
    );
    assert_eq!(
        text(&rig.call(12, "faulty__echo", json!({"text": "fine"}))),
        "fine"
    );
    rig.expect_children(2);
    rig.finish();
}

#[test]
fn out_of_order_answers_reach_their_callers() {
    let mut rig = standard();
    let ids: Vec<u64> = (10..15).collect();
    for id in &ids {
        rig.send_call(
            *id,
            "faulty__out_of_order",
            json!({"text": format!("for {id}"), "batch": ids.len()}),
        );
    }
    let got = rig.collect(&ids);
    for id in &ids {
        assert_eq!(text(&got.replies[id]), format!("for {id}"));
    }
    // Mixed sleeps: the answers cross, each still reaches its own caller.
    let sleeps: Vec<(u64, u64)> = (20..26).map(|id| (id, (26 - id) * 40)).collect();
    for (id, ms) in &sleeps {
        let server = if id % 2 == 0 { "faulty" } else { "healthy" };
        rig.send_call(
            *id,
            &format!("{server}__sleep_then_echo"),
            json!({"ms": ms, "text": format!("slept {id}")}),
        );
    }
    let ids: Vec<u64> = sleeps.iter().map(|(id, _)| *id).collect();
    let got = rig.collect(&ids);
    for id in &ids {
        assert_eq!(text(&got.replies[id]), format!("slept {id}"));
    }
    rig.expect_children(2);
    rig.finish();
}

#[test]
fn progress_is_relayed_until_cancel_and_dropped_after() {
    let mut rig = standard();
    let meta = json!({"progressToken": 777});
    rig.send_call_with_meta(20, "faulty__progress_after_cancel", json!({}), Some(meta));
    let mut seen = Vec::new();
    wait_until("two progress notifications relayed", || {
        let line = rig.session.recv_line();
        let message: Value = serde_json::from_str(&line).unwrap();
        seen.push(message);
        let relayed = seen
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .count();
        (relayed >= 2).then_some(())
    });
    for p in &seen {
        assert_eq!(p["params"]["progressToken"], 777, "{p}");
        assert_eq!(p["params"]["message"], "before-cancel", "{p}");
    }
    rig.session.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 20}}),
    );
    rig.wait_for_event("cancelled progress_after_cancel");
    rig.wait_for_event("after-cancel-done");
    // A round trip through the same upstream pipe, which carried the late progress first.
    rig.send_call(21, "faulty__echo", json!({"text": "after"}));
    let got = rig.collect(&[21]);
    assert_eq!(text(&got.replies[&21]), "after");
    let late: Vec<&Value> = got
        .notifications
        .iter()
        .filter(|n| n["params"]["message"] == "after-cancel")
        .collect();
    assert!(
        late.is_empty(),
        "progress after the cancel was relayed: {late:?}"
    );
    rig.expect_children(1);
    rig.finish();
}
