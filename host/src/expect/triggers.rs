//! When a change of a related object first asked for each primary since that primary's last
//! decision began: where `wasmop_event_to_action_seconds` starts (the change reaching the
//! host's cache → the first object write of the decision it caused).
//!
//! Changes that arrive while a primary waits for its decision keep the earliest time, as
//! the controller's queue keeps one request per object. A decision that starts takes the
//! time ([`Triggers::take`]); a change arriving after that asks for the next decision.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a request is remembered for a primary that is never decided (deleted before
/// its turn): older ones are dropped when the map has doubled since its last pruning.
const FORGET_AFTER: Duration = Duration::from_secs(600);
/// Below this many waiting primaries the map is never pruned.
const PRUNE_FROM: usize = 1024;

/// The waiting requests of one plugin's primaries, keyed `namespace/name`.
#[derive(Debug)]
pub struct Triggers {
    inner: Mutex<Waiting>,
}

#[derive(Debug)]
struct Waiting {
    since: HashMap<String, Instant>,
    /// Prune when the map reaches this size (amortised: it doubles after each pruning).
    prune_at: usize,
}

impl Default for Triggers {
    fn default() -> Self {
        Triggers {
            inner: Mutex::new(Waiting {
                since: HashMap::new(),
                prune_at: PRUNE_FROM,
            }),
        }
    }
}

/// The key of a primary here and in the per-object backoff: `namespace/name` (an empty
/// namespace for a cluster-scoped object).
pub fn key_of(namespace: Option<&str>, name: &str) -> String {
    format!("{}/{name}", namespace.unwrap_or(""))
}

impl Triggers {
    /// Notes that a related change asked at `now` for the primary `key` to be decided,
    /// unless an earlier change still waits for that decision.
    pub fn asked(&self, key: String, now: Instant) {
        let mut w = self.inner.lock().expect("triggers lock");
        w.since.entry(key).or_insert(now);
        if w.since.len() >= w.prune_at {
            w.since
                .retain(|_, at| now.duration_since(*at) < FORGET_AFTER);
            w.prune_at = (w.since.len() * 2).max(PRUNE_FROM);
        }
    }

    /// When the earliest change still waiting asked for `key`'s decision; the decision
    /// starting now answers it, so it is forgotten.
    pub fn take(&self, key: &str) -> Option<Instant> {
        self.inner.lock().expect("triggers lock").since.remove(key)
    }

    /// Whether a change asked for `key`'s decision and no decision has started since.
    pub fn asks(&self, key: &str) -> bool {
        self.inner
            .lock()
            .expect("triggers lock")
            .since
            .contains_key(key)
    }

    /// Primaries with a request waiting (what the tests look at).
    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.inner.lock().expect("triggers lock").since.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_earliest_change_counts_and_a_decision_answers_it() {
        let t = Triggers::default();
        let t0 = Instant::now();
        t.asked("d/a".into(), t0);
        t.asked("d/a".into(), t0 + Duration::from_millis(5));
        assert_eq!(t.take("d/a"), Some(t0));
        assert_eq!(t.take("d/a"), None, "answered once");
        // A change after the decision began asks for the next one.
        t.asked("d/a".into(), t0 + Duration::from_millis(9));
        assert_eq!(t.take("d/a"), Some(t0 + Duration::from_millis(9)));
        assert_eq!(t.take("d/b"), None);
    }

    #[test]
    fn requests_never_answered_are_forgotten_at_size() {
        let t = Triggers::default();
        let old = Instant::now();
        for i in 0..PRUNE_FROM - 1 {
            t.asked(format!("d/gone-{i}"), old);
        }
        assert_eq!(
            t.waiting(),
            PRUNE_FROM - 1,
            "nothing pruned below the threshold"
        );
        // The next request, long after, reaches the threshold: the stale ones go.
        let later = old + FORGET_AFTER + Duration::from_secs(1);
        t.asked("d/live".into(), later);
        assert_eq!(t.waiting(), 1);
        assert_eq!(t.take("d/live"), Some(later));
        // Recent requests are kept however many there are.
        for i in 0..3 * PRUNE_FROM {
            t.asked(format!("d/new-{i}"), later);
        }
        assert_eq!(t.waiting(), 3 * PRUNE_FROM);
    }
}
