//! Status writes paced per object. While an object's related objects change one after the
//! other (its pods created, then Running one by one), every change decides a new status;
//! written each time, that is about four status writes per PodReplica converging, most of
//! the host's requests at scale. Two rules hold back a plan that would write only the status
//! (no object written, no Event); the object is then decided again when the wait is over (or
//! on its next change), and that decision, made on what the caches show then, is written:
//! - **settle**: while the object is in motion (its status was written in the last
//!   [`MOTION`], 30 s: the burst that follows its pods' creation), a new status is written only
//!   once it has waited `settle` since the first decision that wanted it, so the changes
//!   that arrive together (sibling pods turning Running within a few hundred milliseconds)
//!   make one write, not one each. An object at rest (a hot swap deciding every object
//!   again, a change after a quiet spell) gets its new status at once;
//! - **interval**: at most one status write per object per `every`.
//!
//! A status in which a condition turns (its `status` changes, or a condition appears or
//! goes: `Ready` once the last pod runs) is never held back either: it is what the status is
//! for, and `kubectl get` shows it as soon as the change it describes.
//!
//! Plans that write objects or Events are never held back, their status included (a
//! plugin's status may be its memory of what it did, like ChaosPod's kill count), so an
//! event still turns into its action at once. Nothing is lost: a status-only plan changes
//! nothing but the status, and the later decision starts from the same stored status.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Entries below which the pacer never sweeps out old ones.
const SWEEP_FLOOR: usize = 1024;

/// An object whose status was written this recently is in motion: its next status settles.
/// Long enough to cover pods that take seconds to run after their creation (up to 11 s
/// after the status written with their creates, converging 1,000 PodReplicas on two
/// loaded cores; with 10 s, a fifth more status writes).
pub const MOTION: Duration = Duration::from_secs(30);

/// When each object's status was last written and since when a new one waits.
#[derive(Debug)]
pub struct StatusPacer {
    every: Duration,
    settle: Duration,
    state: Mutex<State>,
}

/// What the pacer remembers of one object.
#[derive(Debug, Default, Clone, Copy)]
struct Object {
    /// The last status write.
    written: Option<Instant>,
    /// The first decision that wanted the status not yet written.
    wanted: Option<Instant>,
}

#[derive(Debug, Default)]
struct State {
    objects: HashMap<String, Object>,
    /// Size at which the next sweep runs (doubles with what remains).
    sweep_at: usize,
}

impl StatusPacer {
    /// A pacer allowing one status write per object per `every`, each written once it has
    /// waited `settle` (both zero: no pacing).
    pub fn new(every: Duration, settle: Duration) -> Self {
        StatusPacer {
            every,
            settle,
            state: Mutex::new(State {
                objects: HashMap::new(),
                sweep_at: SWEEP_FLOOR,
            }),
        }
    }

    fn off(&self) -> bool {
        self.every.is_zero() && self.settle.is_zero()
    }

    /// A decision wants a new status for the object `uid`: how long that write must wait;
    /// `None`: write it now. The first call for a status not yet written starts its settle.
    pub fn hold(&self, uid: &str) -> Option<Duration> {
        self.hold_at(uid, Instant::now())
    }

    fn hold_at(&self, uid: &str, now: Instant) -> Option<Duration> {
        if self.off() {
            return None;
        }
        let mut state = self.state.lock().expect("pacer lock");
        let object = state.objects.entry(uid.to_string()).or_default();
        let wanted = *object.wanted.get_or_insert(now);
        let mut ready = now;
        if let Some(written) = object.written {
            ready = ready.max(written + self.every);
            if now.saturating_duration_since(written) < MOTION {
                ready = ready.max(wanted + self.settle);
            }
        }
        let wait = ready.saturating_duration_since(now);
        (!wait.is_zero()).then_some(wait)
    }

    /// A decision wants no new status for `uid` (the stored one is right): a later change
    /// settles afresh.
    pub fn satisfied(&self, uid: &str) {
        if self.off() {
            return;
        }
        let mut state = self.state.lock().expect("pacer lock");
        if let Some(object) = state.objects.get_mut(uid) {
            object.wanted = None;
        }
    }

    /// Records a status write of the object `uid`, now.
    pub fn wrote(&self, uid: &str) {
        self.wrote_at(uid, Instant::now());
    }

    fn wrote_at(&self, uid: &str, now: Instant) {
        if self.off() {
            return;
        }
        let mut state = self.state.lock().expect("pacer lock");
        state.objects.insert(
            uid.to_string(),
            Object {
                written: Some(now),
                wanted: None,
            },
        );
        if state.objects.len() >= state.sweep_at {
            // Forgotten: objects written longer than `every` ago with nothing waiting (a
            // status waiting for longer than its settle and interval is stale too).
            // Writes within MOTION are kept: they decide whether a new status settles.
            let keep = (self.every.max(self.settle) * 2).max(MOTION);
            state.objects.retain(|_, o| {
                let recent =
                    |t: Option<Instant>| t.is_some_and(|t| now.saturating_duration_since(t) < keep);
                recent(o.written) || recent(o.wanted)
            });
            state.sweep_at = (state.objects.len() * 2).max(SWEEP_FLOOR);
        }
    }

    /// Objects remembered (for the tests).
    #[cfg(test)]
    fn remembered(&self) -> usize {
        self.state.lock().expect("pacer lock").objects.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn holds_a_second_write_within_the_interval_only() {
        let pacer = StatusPacer::new(80 * MS, Duration::ZERO);
        let t = Instant::now();
        assert_eq!(pacer.hold_at("a", t), None, "never written: write now");
        pacer.wrote_at("a", t);
        assert_eq!(pacer.hold_at("a", t + 30 * MS), Some(50 * MS));
        assert_eq!(
            pacer.hold_at("b", t + 30 * MS),
            None,
            "another object is not held"
        );
        assert_eq!(
            pacer.hold_at("a", t + 90 * MS),
            None,
            "the interval is over"
        );
    }

    #[test]
    fn a_new_status_waits_its_settle_from_the_first_decision_that_wanted_it() {
        let pacer = StatusPacer::new(Duration::ZERO, 60 * MS);
        let t = Instant::now();
        pacer.wrote_at("a", t - 100 * MS);
        assert_eq!(pacer.hold_at("a", t), Some(60 * MS));
        // A second change meanwhile does not restart the settle.
        assert_eq!(pacer.hold_at("a", t + 40 * MS), Some(20 * MS));
        assert_eq!(pacer.hold_at("a", t + 60 * MS), None, "settled: write now");
        pacer.wrote_at("a", t + 60 * MS);
        assert_eq!(
            pacer.hold_at("a", t + 100 * MS),
            Some(60 * MS),
            "the next status settles afresh"
        );
    }

    #[test]
    fn a_status_no_longer_wanted_settles_afresh_when_wanted_again() {
        let pacer = StatusPacer::new(Duration::ZERO, 40 * MS);
        let t = Instant::now();
        pacer.wrote_at("a", t);
        assert!(pacer.hold_at("a", t).is_some());
        pacer.satisfied("a");
        assert_eq!(pacer.hold_at("a", t + 50 * MS), Some(40 * MS));
    }

    #[test]
    fn settle_and_interval_both_hold() {
        let pacer = StatusPacer::new(100 * MS, 20 * MS);
        let t = Instant::now();
        pacer.wrote_at("a", t);
        assert_eq!(
            pacer.hold_at("a", t + 10 * MS),
            Some(90 * MS),
            "the interval is the longer"
        );
        assert_eq!(pacer.hold_at("a", t + 100 * MS), None, "both are over");
        pacer.wrote_at("b", t);
        assert_eq!(
            pacer.hold_at("b", t + 95 * MS),
            Some(20 * MS),
            "the settle is the longer"
        );
    }

    #[test]
    fn an_object_at_rest_gets_its_new_status_at_once() {
        let pacer = StatusPacer::new(100 * MS, 500 * MS);
        let t = Instant::now();
        assert_eq!(pacer.hold_at("never", t), None, "never written");
        pacer.wrote_at("a", t);
        assert_eq!(
            pacer.hold_at("a", t + MOTION - MS),
            Some(500 * MS),
            "still in motion: settles"
        );
        pacer.wrote_at("b", t);
        assert_eq!(
            pacer.hold_at("b", t + MOTION),
            None,
            "written MOTION ago: at rest"
        );
    }

    #[test]
    fn zero_never_holds() {
        let pacer = StatusPacer::new(Duration::ZERO, Duration::ZERO);
        pacer.wrote("a");
        assert_eq!(pacer.hold("a"), None);
        assert_eq!(pacer.remembered(), 0);
    }

    #[test]
    fn old_entries_are_swept_as_the_map_grows() {
        let pacer = StatusPacer::new(5 * MS, Duration::ZERO);
        let t = Instant::now();
        for i in 0..SWEEP_FLOOR - 1 {
            pacer.wrote_at(&format!("old-{i}"), t);
        }
        pacer.wrote_at("new", t + MOTION + 20 * MS);
        assert_eq!(pacer.remembered(), 1, "only the recent write is kept");
        assert!(pacer.hold_at("new", t + MOTION + 21 * MS).is_some());
    }
}
