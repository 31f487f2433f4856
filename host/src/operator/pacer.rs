//! Status writes paced per object. While an object's related objects change one after the
//! other (its pods created, then Running one by one), every change decides a new status;
//! written each time, that is about four status writes per PodReplica converging, most of
//! the host's requests at scale. A plan that would only write the status (no object
//! written, no Event) within `every` of this object's last status write is not written: the
//! object is decided again when the interval ends (or on its next change), and that
//! decision, made on what the caches show then, is written. Plans that write objects are
//! never held back, so an event still turns into its action at once; the status is at most
//! `every` late. Nothing is lost: a status-only plan changes nothing but the status, and the
//! later decision starts from the same stored status.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Entries below which the pacer never sweeps out old ones.
const SWEEP_FLOOR: usize = 1024;

/// When each object's status was last written, to hold back status-only plans.
#[derive(Debug)]
pub struct StatusPacer {
    every: Duration,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    last: HashMap<String, Instant>,
    /// Size at which the next sweep runs (doubles with what remains).
    sweep_at: usize,
}

impl StatusPacer {
    /// A pacer allowing one status write per object per `every` (zero: no pacing).
    pub fn new(every: Duration) -> Self {
        StatusPacer {
            every,
            state: Mutex::new(State {
                last: HashMap::new(),
                sweep_at: SWEEP_FLOOR,
            }),
        }
    }

    /// How long a status-only write of the object `uid` must wait; `None`: write now.
    pub fn hold(&self, uid: &str) -> Option<Duration> {
        if self.every.is_zero() {
            return None;
        }
        let state = self.state.lock().expect("pacer lock");
        let since = state.last.get(uid)?.elapsed();
        (since < self.every).then(|| self.every - since)
    }

    /// Records a status write of the object `uid`, now.
    pub fn wrote(&self, uid: &str) {
        if self.every.is_zero() {
            return;
        }
        let mut state = self.state.lock().expect("pacer lock");
        state.last.insert(uid.to_string(), Instant::now());
        if state.last.len() >= state.sweep_at {
            let every = self.every;
            state.last.retain(|_, at| at.elapsed() < every);
            state.sweep_at = (state.last.len() * 2).max(SWEEP_FLOOR);
        }
    }

    /// Objects whose last write is remembered (for the tests).
    #[cfg(test)]
    fn remembered(&self) -> usize {
        self.state.lock().expect("pacer lock").last.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_a_second_write_within_the_interval_only() {
        let pacer = StatusPacer::new(Duration::from_millis(80));
        assert_eq!(pacer.hold("a"), None, "never written: write now");
        pacer.wrote("a");
        let wait = pacer.hold("a").expect("held");
        assert!(wait <= Duration::from_millis(80) && wait > Duration::from_millis(40));
        assert_eq!(pacer.hold("b"), None, "another object is not held");
        std::thread::sleep(Duration::from_millis(90));
        assert_eq!(pacer.hold("a"), None, "the interval is over");
    }

    #[test]
    fn zero_never_holds() {
        let pacer = StatusPacer::new(Duration::ZERO);
        pacer.wrote("a");
        assert_eq!(pacer.hold("a"), None);
    }

    #[test]
    fn old_entries_are_swept_as_the_map_grows() {
        let pacer = StatusPacer::new(Duration::from_millis(5));
        for i in 0..SWEEP_FLOOR - 1 {
            pacer.wrote(&format!("old-{i}"));
        }
        std::thread::sleep(Duration::from_millis(10));
        pacer.wrote("new");
        assert_eq!(pacer.remembered(), 1, "only the recent write is kept");
        assert!(pacer.hold("new").is_some());
    }
}
