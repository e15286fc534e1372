//! What an upstream does on every connection is worth one log line per process, not one per
//! connection: a server asking for what no client gives it, a listing that keeps failing.

use std::collections::HashSet;
use std::sync::LazyLock;

use parking_lot::Mutex;

/// The subjects already told of in this process. Each names a configured server and one of a
/// fixed set of things it did, so the set stays small.
static TOLD: LazyLock<Mutex<HashSet<String>>> = LazyLock::new(Mutex::default);

/// Whether `subject` is told of for the first time in this process (it is remembered).
pub(super) fn first(subject: &str) -> bool {
    TOLD.lock().insert(subject.to_owned())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_subject_is_told_once() {
        let subject = "once-test-server resources/list";
        assert!(super::first(subject));
        assert!(!super::first(subject));
    }
}
