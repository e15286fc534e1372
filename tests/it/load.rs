//! Load: many concurrent `call_tool`s over several upstreams, each answered correctly, nothing
//! deadlocked (every reply arrives within the session's bounded wait).

use serde_json::json;

use crate::faults::{Rig, text};

const UPSTREAMS: [&str; 5] = ["s0", "s1", "s2", "s3", "s4"];
const CALLS: u64 = 200;

#[test]
fn two_hundred_concurrent_calls_over_five_upstreams_all_answer_correctly() {
    let servers: Vec<(&str, &[&str], u64)> = UPSTREAMS.iter().map(|s| (*s, &[][..], 60)).collect();
    let mut rig = Rig::start(&servers);
    let ids: Vec<u64> = (1000..1000 + CALLS).collect();
    // All sent before any reply is read; first calls also race to start each upstream. Every
    // fourth call sleeps a little so answers come back interleaved.
    for id in &ids {
        let server = UPSTREAMS[(*id % UPSTREAMS.len() as u64) as usize];
        let payload = format!("call {id} via {server}");
        if id % 4 == 0 {
            let ms = (id % 7) * 10;
            rig.send_call(
                *id,
                &format!("{server}__sleep_then_echo"),
                json!({"ms": ms, "text": payload}),
            );
        } else {
            rig.send_call(*id, &format!("{server}__echo"), json!({"text": payload}));
        }
    }
    let got = rig.collect(&ids);
    for id in &ids {
        let server = UPSTREAMS[(*id % UPSTREAMS.len() as u64) as usize];
        let result = &got.replies[id];
        assert_eq!(result["isError"], false, "{result}");
        assert_eq!(text(result), format!("call {id} via {server}"));
    }
    // One process per upstream: concurrent first calls shared each connection.
    rig.expect_children(UPSTREAMS.len());
    rig.finish();
}
