//! The pure part of leader election: what a replica may do with a Lease as it stands,
//! and the spec it writes to take, renew or give it up. No I/O, no clock: `now` is an
//! argument, so every rule is tested here without a cluster.

use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

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
        /// When the lease expires unless renewed.
        expires: Timestamp,
    },
}

/// Decides, without I/O, what `identity` may do with the lease `spec` (`None`: no Lease
/// object) at time `now`. A holder's lease is valid while `now <= renewTime +
/// leaseDurationSeconds` (`acquireTime` stands in for a missing `renewTime`; with neither,
/// or no duration, the lease counts as expired).
pub fn decide(spec: Option<&LeaseSpec>, identity: &str, now: Timestamp) -> Decision {
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
    let renewed = spec.renew_time.as_ref().or(spec.acquire_time.as_ref());
    let duration = SignedDuration::from_secs(spec.lease_duration_seconds.unwrap_or(0).into());
    match renewed.and_then(|t| t.0.checked_add(duration).ok()) {
        Some(expires) if now <= expires => Decision::Held {
            holder: holder.to_owned(),
            expires,
        },
        _ => Decision::Acquire,
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

    #[test]
    fn absent_or_holderless_lease_is_free() {
        assert_eq!(decide(None, "a", at(0)), Decision::Acquire);
        let mut spec = held_by("b", 0, 15);
        spec.holder_identity = None;
        assert_eq!(decide(Some(&spec), "a", at(0)), Decision::Acquire);
        spec.holder_identity = Some(String::new());
        assert_eq!(decide(Some(&spec), "a", at(0)), Decision::Acquire);
    }

    #[test]
    fn valid_lease_of_another_is_held_until_it_expires() {
        let spec = held_by("b", 0, 15);
        let held = Decision::Held {
            holder: "b".into(),
            expires: at(15),
        };
        assert_eq!(decide(Some(&spec), "a", at(1)), held);
        assert_eq!(decide(Some(&spec), "a", at(15)), held);
        assert_eq!(decide(Some(&spec), "a", at(16)), Decision::Acquire);
    }

    #[test]
    fn own_lease_is_renewed_even_when_expired() {
        let spec = held_by("a", 0, 15);
        assert_eq!(decide(Some(&spec), "a", at(1)), Decision::Renew);
        assert_eq!(decide(Some(&spec), "a", at(100)), Decision::Renew);
    }

    #[test]
    fn missing_times_or_duration_count_as_expired() {
        let mut spec = held_by("b", 0, 15);
        spec.renew_time = None;
        // acquireTime (at -100) stands in: long expired.
        assert_eq!(decide(Some(&spec), "a", at(0)), Decision::Acquire);
        spec.acquire_time = None;
        assert_eq!(decide(Some(&spec), "a", at(0)), Decision::Acquire);
        let mut spec = held_by("b", 0, 15);
        spec.lease_duration_seconds = None;
        assert_eq!(decide(Some(&spec), "a", at(1)), Decision::Acquire);
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
        assert_eq!(decide(Some(&spec), "b", at(1)), Decision::Acquire);
        // Taking a released lease counts as a transition.
        assert_eq!(
            claimed(Some(&spec), "b", 15, at(1)).lease_transitions,
            Some(4)
        );
    }
}
