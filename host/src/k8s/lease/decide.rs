//! The pure part of leader election: what a replica may do with a Lease as it stands,
//! and the spec it writes to take, renew or give it up. No I/O, no clock: times are
//! arguments, so every rule is tested here without a cluster, with clocks that disagree.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;

/// What a replica may do with a lease as it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The lease is ours: renew it (keeping `acquireTime` and `leaseTransitions`).
    Renew,
    /// The lease is absent, has no holder or has expired: take it.
    Acquire,
    /// Another replica holds a valid lease.
    Held {
        /// The current holder.
        holder: String,
        /// How long, by this replica's clock, until it counts as expired unless renewed.
        expires_in: Duration,
    },
}

/// Decides, without I/O, what `identity` may do with the lease `spec` (`None`: no Lease
/// object), which this replica has seen unchanged for `unchanged_for` by its own monotonic
/// clock (see [`Observer`]). Another holder's lease is valid until it has stayed unchanged
/// for `leaseDurationSeconds` (no duration: expired). The holder's `renewTime` is not
/// compared with this replica's clock, so clocks that disagree (one replica's running
/// ahead or behind) cannot make a live lease look expired, as client-go judges it.
pub fn decide(spec: Option<&LeaseSpec>, identity: &str, unchanged_for: Duration) -> Decision {
    let Some(spec) = spec else {
        return Decision::Acquire;
    };
    let holder = spec.holder_identity.as_deref().unwrap_or_default();
    if holder.is_empty() {
        return Decision::Acquire;
    }
    if holder == identity {
        return Decision::Renew;
    }
    let duration = Duration::from_secs(spec.lease_duration_seconds.unwrap_or(0).max(0) as u64);
    if unchanged_for < duration {
        Decision::Held {
            holder: holder.to_owned(),
            expires_in: duration - unchanged_for,
        }
    } else {
        Decision::Acquire
    }
}

/// Remembers the lease record as last read and since when (this replica's monotonic
/// clock) it has not changed. Every renewal changes `renewTime`, so a lease whose record
/// stays the same has not been renewed.
#[derive(Debug, Default)]
pub struct Observer {
    record: Option<Option<LeaseSpec>>,
    since: Option<Instant>,
}

impl Observer {
    /// Notes the record read at `now`; returns how long it has been unchanged.
    pub fn see(&mut self, spec: Option<&LeaseSpec>, now: Instant) -> Duration {
        let record = Some(spec.cloned());
        if self.record != record || self.since.is_none() {
            self.record = record;
            self.since = Some(now);
        }
        now.saturating_duration_since(self.since.unwrap_or(now))
    }
}

/// This process's term under a lease: it starts with the first successful write of the
/// lease and ends for good once a lease duration has passed, by this process's monotonic
/// clock, since the start of its last successful renewal. By then any other replica may
/// have judged the lease expired and acted on it (taken it, or, for a shard Lease, moved
/// the shard's objects), whatever the lease record says when this process looks again: a
/// process paused (SIGSTOP, a stall) or cut off from the API server for that long never
/// renews or writes under that lease again, even if its next write of the record goes
/// through. It starts anew as a new member, with caches listed afresh. A process that has
/// just started has no term yet: it may take a lease that names it (it lists its caches
/// anyway). Assumed: the monotonic clock runs while the process is paused (it does for
/// SIGSTOP and for a process starved of CPU).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Term {
    last_renewed: Option<Instant>,
}

impl Term {
    /// Whether the term is over at `now`: the lease was held and has not been renewed for
    /// `lease_duration` since.
    pub fn ended(&self, now: Instant, lease_duration: Duration) -> bool {
        self.last_renewed
            .is_some_and(|at| now.saturating_duration_since(at) >= lease_duration)
    }

    /// A write of the lease that started at `started` succeeded, as seen at `now`. Returns
    /// whether the term goes on: `false` when it had ended by `now` (the write may have
    /// landed after the lease could be judged expired), and then it stays ended.
    pub fn renewed(&mut self, started: Instant, now: Instant, lease_duration: Duration) -> bool {
        if self.ended(now, lease_duration) {
            return false;
        }
        self.last_renewed = Some(started);
        true
    }

    /// When the last successful renewal started, if the lease was ever held.
    pub fn last_renewed(&self) -> Option<Instant> {
        self.last_renewed
    }
}

/// The spec to write when `identity` takes or renews the lease `current` at `now`:
/// `renewTime` is `now`; when the holder changes, `acquireTime` becomes `now` and
/// `leaseTransitions` grows by one (a new Lease starts at 0). Other fields are kept.
pub fn claimed(
    current: Option<&LeaseSpec>,
    identity: &str,
    duration_seconds: i32,
    now: Timestamp,
) -> LeaseSpec {
    let mut spec = current.cloned().unwrap_or_default();
    let same_holder = spec.holder_identity.as_deref() == Some(identity);
    if !same_holder || spec.acquire_time.is_none() {
        spec.acquire_time = Some(MicroTime(now));
    }
    if current.is_none() {
        spec.lease_transitions = Some(0);
    } else if !same_holder {
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
    }
    spec.holder_identity = Some(identity.to_owned());
    spec.lease_duration_seconds = Some(duration_seconds);
    spec.renew_time = Some(MicroTime(now));
    spec
}

/// The spec that gives the lease up at `now`: no holder and a 1 s duration, so that any
/// standby may take it at once; `leaseTransitions` is kept.
pub fn released(current: &LeaseSpec, now: Timestamp) -> LeaseSpec {
    LeaseSpec {
        holder_identity: None,
        lease_duration_seconds: Some(1),
        acquire_time: Some(MicroTime(now)),
        renew_time: Some(MicroTime(now)),
        ..current.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    fn held_by(holder: &str, renewed: i64, duration: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(duration),
            acquire_time: Some(MicroTime(at(renewed - 100))),
            renew_time: Some(MicroTime(at(renewed))),
            lease_transitions: Some(3),
            ..LeaseSpec::default()
        }
    }

    const SECS: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn absent_or_holderless_lease_is_free() {
        assert_eq!(decide(None, "a", SECS(0)), Decision::Acquire);
        let mut spec = held_by("b", 0, 15);
        spec.holder_identity = None;
        assert_eq!(decide(Some(&spec), "a", SECS(0)), Decision::Acquire);
        spec.holder_identity = Some(String::new());
        assert_eq!(decide(Some(&spec), "a", SECS(0)), Decision::Acquire);
    }

    #[test]
    fn another_holders_lease_is_held_until_unchanged_for_its_duration() {
        let spec = held_by("b", 0, 15);
        let held = |left| Decision::Held {
            holder: "b".into(),
            expires_in: SECS(left),
        };
        assert_eq!(decide(Some(&spec), "a", SECS(0)), held(15));
        assert_eq!(decide(Some(&spec), "a", SECS(14)), held(1));
        assert_eq!(decide(Some(&spec), "a", SECS(15)), Decision::Acquire);
    }

    #[test]
    fn skewed_clocks_do_not_matter_only_what_this_replica_saw() {
        // The holder's clock runs an hour behind: its renewTime looks long expired to a
        // replica that compares clocks, but it was just renewed: held.
        let behind = held_by("b", -3600, 15);
        assert!(matches!(
            decide(Some(&behind), "a", SECS(1)),
            Decision::Held { .. }
        ));
        // The holder's clock runs a day ahead: its renewTime looks valid for a day to a
        // replica that compares clocks, but it stopped renewing 16 s ago: free.
        let ahead = held_by("b", 86_400, 15);
        assert_eq!(decide(Some(&ahead), "a", SECS(16)), Decision::Acquire);
    }

    #[test]
    fn a_lease_naming_this_replica_is_taken_by_a_process_without_a_term() {
        // A process that has just started (a new member, caches listed afresh) may take a
        // lease that names it; whether an older term of its own has ended is [`Term`]'s
        // question, not the record's.
        let spec = held_by("a", 0, 15);
        assert_eq!(decide(Some(&spec), "a", SECS(1)), Decision::Renew);
        assert_eq!(decide(Some(&spec), "a", SECS(100)), Decision::Renew);
        assert!(!Term::default().ended(Instant::now(), SECS(15)));
    }

    #[test]
    fn a_term_ends_for_good_a_lease_duration_after_its_last_renewal() {
        let t0 = Instant::now();
        let mut term = Term::default();
        assert!(term.renewed(t0, t0 + SECS(1), SECS(15)));
        // Renewed on time: the term goes on from each renewal's start.
        assert!(term.renewed(t0 + SECS(5), t0 + SECS(6), SECS(15)));
        assert!(!term.ended(t0 + SECS(19), SECS(15)));
        assert!(term.ended(t0 + SECS(20), SECS(15)));
        // Paused: a renewal read before the pause and written after it goes through at
        // the API server (nobody wrote the record), but the term is over all the same.
        assert!(!term.renewed(t0 + SECS(14), t0 + SECS(60), SECS(15)));
        assert!(term.ended(t0 + SECS(61), SECS(15)));
        // And stays over: a later renewal does not revive it.
        assert!(!term.renewed(t0 + SECS(61), t0 + SECS(62), SECS(15)));
        assert_eq!(term.last_renewed(), Some(t0 + SECS(5)));
    }

    #[test]
    fn a_missing_duration_counts_as_expired() {
        let mut spec = held_by("b", 0, 15);
        spec.lease_duration_seconds = None;
        assert_eq!(decide(Some(&spec), "a", SECS(0)), Decision::Acquire);
    }

    #[test]
    fn the_observer_counts_from_the_last_change_it_saw() {
        let t0 = Instant::now();
        let mut seen = Observer::default();
        let first = held_by("b", 0, 15);
        // A replica that has just started must watch a full duration, even if the
        // record looks old.
        assert_eq!(seen.see(Some(&first), t0), SECS(0));
        assert_eq!(seen.see(Some(&first), t0 + SECS(10)), SECS(10));
        // A renewal (new renewTime) starts the count again.
        let renewed = held_by("b", 5, 15);
        assert_eq!(seen.see(Some(&renewed), t0 + SECS(12)), SECS(0));
        assert_eq!(seen.see(Some(&renewed), t0 + SECS(20)), SECS(8));
        // The Lease vanishing is a change too.
        assert_eq!(seen.see(None, t0 + SECS(21)), SECS(0));
    }

    #[test]
    fn new_lease_starts_with_zero_transitions() {
        let spec = claimed(None, "a", 15, at(0));
        assert_eq!(spec.holder_identity.as_deref(), Some("a"));
        assert_eq!(spec.lease_duration_seconds, Some(15));
        assert_eq!(spec.lease_transitions, Some(0));
        assert_eq!(spec.acquire_time, Some(MicroTime(at(0))));
        assert_eq!(spec.renew_time, Some(MicroTime(at(0))));
    }

    #[test]
    fn taking_over_bumps_transitions_and_acquire_time() {
        let old = held_by("b", 0, 15);
        let spec = claimed(Some(&old), "a", 10, at(20));
        assert_eq!(spec.holder_identity.as_deref(), Some("a"));
        assert_eq!(spec.lease_transitions, Some(4));
        assert_eq!(spec.acquire_time, Some(MicroTime(at(20))));
        assert_eq!(spec.renew_time, Some(MicroTime(at(20))));
        assert_eq!(spec.lease_duration_seconds, Some(10));
    }

    #[test]
    fn renewing_keeps_transitions_and_acquire_time() {
        let old = held_by("a", 0, 15);
        let spec = claimed(Some(&old), "a", 15, at(5));
        assert_eq!(spec.lease_transitions, Some(3));
        assert_eq!(spec.acquire_time, Some(MicroTime(at(-100))));
        assert_eq!(spec.renew_time, Some(MicroTime(at(5))));
    }

    #[test]
    fn released_lease_is_free_at_once_and_keeps_transitions() {
        let old = held_by("a", 0, 15);
        let spec = released(&old, at(1));
        assert_eq!(spec.holder_identity, None);
        assert_eq!(spec.lease_duration_seconds, Some(1));
        assert_eq!(spec.lease_transitions, Some(3));
        assert_eq!(decide(Some(&spec), "b", Duration::ZERO), Decision::Acquire);
        // Taking a released lease counts as a transition.
        assert_eq!(
            claimed(Some(&spec), "b", 15, at(1)).lease_transitions,
            Some(4)
        );
    }
}
