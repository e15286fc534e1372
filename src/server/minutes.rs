//! The last hour of tool calls, per minute and server (calls, errors, latency), kept in memory
//! for the console's charts: a ring of 60 minutes, each a small map by server.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use serde::Serialize;

/// Minutes kept.
const KEPT: u64 = 60;

/// One server's calls in one minute.
#[derive(Debug, Default, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Bucket {
    pub calls: u64,
    pub errors: u64,
    /// Summed durations, for the mean.
    pub total_ms: f64,
    pub max_ms: f64,
}

/// One minute (since the epoch) and its buckets by server.
#[derive(Debug, Clone, Serialize)]
pub struct Minute {
    pub minute: u64,
    pub servers: BTreeMap<String, Bucket>,
}

/// The ring of the last [`KEPT`] minutes.
#[derive(Debug, Default)]
pub struct Minutes {
    ring: Mutex<VecDeque<Minute>>,
}

fn now_minute() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
        / 60
}

impl Minutes {
    /// Counts one call of `server` that took `took`, an error unless `ok`.
    pub fn record(&self, server: &str, ok: bool, took: Duration) {
        self.record_at(now_minute(), server, ok, took);
    }

    fn record_at(&self, minute: u64, server: &str, ok: bool, took: Duration) {
        let mut ring = self.ring.lock();
        if ring.back().is_none_or(|m| m.minute < minute) {
            ring.push_back(Minute {
                minute,
                servers: BTreeMap::new(),
            });
        }
        while ring.front().is_some_and(|m| m.minute + KEPT <= minute) {
            ring.pop_front();
        }
        let Some(current) = ring.back_mut() else {
            return;
        };
        let bucket = match current.servers.get_mut(server) {
            Some(bucket) => bucket,
            None => current.servers.entry(server.to_owned()).or_default(),
        };
        let ms = took.as_secs_f64() * 1000.0;
        bucket.calls += 1;
        bucket.errors += u64::from(!ok);
        bucket.total_ms += ms;
        bucket.max_ms = bucket.max_ms.max(ms);
    }

    /// The minutes of the last hour that had calls, oldest first, and the minute it is now.
    pub fn last_hour(&self) -> (u64, Vec<Minute>) {
        let now = now_minute();
        let ring = self.ring.lock();
        let kept = ring.iter().filter(|m| m.minute + KEPT > now).cloned();
        (now, kept.collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minutes_are_counted_per_server_and_an_hour_is_kept() {
        let m = Minutes::default();
        let ms = Duration::from_millis;
        m.record_at(100, "a", true, ms(10));
        m.record_at(100, "a", false, ms(30));
        m.record_at(100, "b", true, ms(5));
        m.record_at(101, "a", true, ms(1));
        let ring = m.ring.lock().clone();
        assert_eq!(ring.len(), 2);
        let a = &ring[0].servers["a"];
        assert_eq!(
            (a.calls, a.errors, a.total_ms, a.max_ms),
            (2, 1, 40.0, 30.0)
        );
        drop(ring);
        m.record_at(160, "a", true, ms(1));
        let minutes: Vec<u64> = m.ring.lock().iter().map(|m| m.minute).collect();
        assert_eq!(minutes, [101, 160], "minute 100 is an hour old");
    }
}
