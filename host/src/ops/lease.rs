//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's semantics.
//!
//! Every replica runs [`run_elector`] on the same Lease. A replica takes the lease when it
//! is absent, has no holder, has expired (`renewTime + leaseDurationSeconds < now`) or is
//! already its own, renews it every [`LeaseConfig::renew_every`], and announces on a watch
//! channel whether it leads. Every write carries the `resourceVersion` that was read, so
//! of two replicas racing for the lease exactly one write succeeds; the other gets 409
//! Conflict and does not lead.
//!
//! Assumed: the clocks of the replicas agree to well within the lease duration (expiry is
//! judged on the `renewTime` written by the holder, like `kubectl` and most dashboards
//! show it). Guaranteed: a leader that cannot renew steps down (sends `false`) no later
//! than `lease_duration` after the start of its last successful renewal, which is before
//! any other replica may take the lease; on shutdown a leader steps down first, then
//! releases the lease so that a standby takes over at once.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;

/// Where the lease lives, who we are, and the timing of the election.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseConfig {
    /// Namespace of the Lease object.
    pub namespace: String,
    /// Name of the Lease object.
    pub name: String,
    /// This replica's identity, written as `holderIdentity`; unique among the replicas
    /// (the pod name is the usual choice).
    pub identity: String,
    /// How long a lease stays valid after its last renewal (default 15 s). Written as
    /// `leaseDurationSeconds`, rounded up to whole seconds.
    pub lease_duration: Duration,
    /// How often the leader renews (default 5 s); must be shorter than `lease_duration`.
    pub renew_every: Duration,
    /// How often a standby, or a leader whose renewal failed, tries again (default 2 s).
    pub retry_every: Duration,
}

impl LeaseConfig {
    /// A configuration with the default timings.
    pub fn new(
        namespace: impl Into<String>,
        name: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        LeaseConfig {
            namespace: namespace.into(),
            name: name.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_every: Duration::from_secs(5),
            retry_every: Duration::from_secs(2),
        }
    }

    /// Checks that names are set and the timings make sense.
    pub fn validate(&self) -> Result<(), LeaseConfigError> {
        for (field, value) in [
            ("namespace", &self.namespace),
            ("name", &self.name),
            ("identity", &self.identity),
        ] {
            if value.is_empty() {
                return Err(LeaseConfigError::Empty(field));
            }
        }
        if self.retry_every.is_zero() || self.renew_every.is_zero() {
            return Err(LeaseConfigError::Timing(
                "renew_every and retry_every must be positive",
            ));
        }
        if self.renew_every >= self.lease_duration {
            return Err(LeaseConfigError::Timing(
                "renew_every must be shorter than lease_duration",
            ));
        }
        Ok(())
    }

    /// `leaseDurationSeconds`: the duration rounded up to whole seconds, at least 1.
    pub fn lease_duration_seconds(&self) -> i32 {
        let secs = self.lease_duration.as_secs_f64().ceil();
        secs.clamp(1.0, f64::from(i32::MAX)) as i32
    }
}

/// A [`LeaseConfig`] that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaseConfigError {
    /// A name field is empty.
    #[error("lease {0} must not be empty")]
    Empty(&'static str),
    /// The timings contradict each other.
    #[error("lease timing: {0}")]
    Timing(&'static str),
}

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

/// Outcome of one round trip to the API server.
enum Attempt {
    /// We hold the lease, freshly renewed.
    Holding,
    /// Someone else holds a valid lease.
    Held(String),
    /// Our write lost a race (409): someone else wrote the lease first.
    Conflict,
}

fn is_conflict(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == 409)
}

async fn try_acquire_or_renew(api: &Api<Lease>, cfg: &LeaseConfig) -> kube::Result<Attempt> {
    let existing = api.get_opt(&cfg.name).await?;
    let now = Timestamp::now();
    let spec = existing.as_ref().and_then(|l| l.spec.as_ref());
    if let Decision::Held { holder, .. } = decide(spec, &cfg.identity, now) {
        return Ok(Attempt::Held(holder));
    }
    let new_spec = claimed(spec, &cfg.identity, cfg.lease_duration_seconds(), now);
    let result = match existing {
        None => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(cfg.name.clone()),
                    namespace: Some(cfg.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(new_spec),
            };
            api.create(&PostParams::default(), &lease).await
        }
        // `replace` sends the resourceVersion we read: a concurrent write makes it fail.
        Some(lease) => {
            let lease = Lease {
                spec: Some(new_spec),
                ..lease
            };
            api.replace(&cfg.name, &PostParams::default(), &lease).await
        }
    };
    match result {
        Ok(_) => Ok(Attempt::Holding),
        Err(e) if is_conflict(&e) => Ok(Attempt::Conflict),
        Err(e) => Err(e),
    }
}

async fn release(api: &Api<Lease>, cfg: &LeaseConfig) -> kube::Result<bool> {
    let Some(lease) = api.get_opt(&cfg.name).await? else {
        return Ok(false);
    };
    let Some(spec) = lease.spec.as_ref() else {
        return Ok(false);
    };
    if spec.holder_identity.as_deref() != Some(cfg.identity.as_str()) {
        return Ok(false);
    }
    let spec = released(spec, Timestamp::now());
    let lease = Lease {
        spec: Some(spec),
        ..lease
    };
    api.replace(&cfg.name, &PostParams::default(), &lease)
        .await
        .map(|_| true)
}

/// True once shutdown is asked for; a dropped sender also counts as shutdown.
fn shutting_down(shutdown: &watch::Receiver<bool>) -> bool {
    *shutdown.borrow() || shutdown.has_changed().is_err()
}

/// Sleeps for `wait`, or less if shutdown is asked for meanwhile.
async fn pause(wait: Duration, shutdown: &mut watch::Receiver<bool>) {
    tokio::select! {
        () = tokio::time::sleep(wait) => {}
        _ = shutdown.wait_for(|stop| *stop) => {}
    }
}

/// Runs the election until `shutdown` turns true (or its sender is dropped), publishing
/// on `leading` whether this replica leads (only changes are sent; it starts at `false`).
///
/// API errors never end the loop: they are logged and retried every `retry_every`. Each
/// round trip is bounded by `renew_every`. On shutdown a leader sends `false`, then
/// releases the lease (best effort: if that fails, the lease simply expires). Returns an
/// error only for an invalid configuration.
pub async fn run_elector(
    client: kube::Client,
    cfg: LeaseConfig,
    leading: watch::Sender<bool>,
    mut shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    cfg.validate()?;
    let api: Api<Lease> = Api::namespaced(client, &cfg.namespace);
    let lease = format!("{}/{}", cfg.namespace, cfg.name);
    let set = |value: bool| leading.send_if_modified(|v| std::mem::replace(v, value) != value);
    set(false);
    let mut is_leader = false;
    let mut last_renewed = Instant::now();
    let mut conflicts_in_a_row = 0u32;

    while !shutting_down(&shutdown) {
        let started = Instant::now();
        let attempt = tokio::time::timeout(cfg.renew_every, try_acquire_or_renew(&api, &cfg))
            .await
            .unwrap_or_else(|_| Err(kube::Error::Service("lease request timed out".into())));
        let wait = match attempt {
            Ok(Attempt::Holding) => {
                conflicts_in_a_row = 0;
                last_renewed = started;
                if !is_leader {
                    tracing::info!(%lease, identity = %cfg.identity, "acquired lease: leading");
                    is_leader = true;
                    set(true);
                }
                cfg.renew_every
            }
            Ok(Attempt::Held(holder)) => {
                conflicts_in_a_row = 0;
                if is_leader {
                    tracing::warn!(%lease, %holder, "lease taken over: stepping down");
                    is_leader = false;
                    set(false);
                } else {
                    tracing::debug!(%lease, %holder, "lease held by another replica");
                }
                cfg.retry_every
            }
            Ok(Attempt::Conflict) => {
                conflicts_in_a_row += 1;
                if is_leader {
                    tracing::warn!(%lease, "lease written by someone else: stepping down");
                    is_leader = false;
                    set(false);
                }
                // Look again at once, to learn who won (or retake a lease that is still ours).
                if conflicts_in_a_row == 1 {
                    Duration::ZERO
                } else {
                    cfg.retry_every
                }
            }
            Err(error) => {
                conflicts_in_a_row = 0;
                let deadline = last_renewed + cfg.lease_duration;
                if is_leader && Instant::now() >= deadline {
                    tracing::warn!(%lease, %error, "could not renew lease in time: stepping down");
                    is_leader = false;
                    set(false);
                } else {
                    tracing::warn!(%lease, %error, "lease request failed");
                }
                if is_leader {
                    cfg.retry_every
                        .min(deadline.saturating_duration_since(Instant::now()))
                } else {
                    cfg.retry_every
                }
            }
        };
        if !wait.is_zero() {
            pause(wait, &mut shutdown).await;
        }
    }

    if is_leader {
        set(false);
        match tokio::time::timeout(cfg.renew_every, release(&api, &cfg)).await {
            Ok(Ok(true)) => tracing::info!(%lease, "released lease on shutdown"),
            Ok(Ok(false)) => tracing::info!(%lease, "lease no longer ours on shutdown"),
            Ok(Err(error)) => tracing::warn!(%lease, %error, "could not release lease"),
            Err(_) => tracing::warn!(%lease, "releasing lease timed out"),
        }
    }
    set(false);
    Ok(())
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

    #[test]
    fn config_defaults_and_validation() {
        let cfg = LeaseConfig::new("default", "wasmop", "pod-a");
        assert_eq!(cfg.lease_duration, Duration::from_secs(15));
        assert_eq!(cfg.renew_every, Duration::from_secs(5));
        assert_eq!(cfg.retry_every, Duration::from_secs(2));
        assert_eq!(cfg.validate(), Ok(()));
        assert_eq!(cfg.lease_duration_seconds(), 15);

        let short = LeaseConfig {
            lease_duration: Duration::from_millis(2500),
            renew_every: Duration::from_secs(1),
            ..cfg.clone()
        };
        assert_eq!(short.lease_duration_seconds(), 3);
        let slow = LeaseConfig {
            renew_every: Duration::from_secs(15),
            ..cfg.clone()
        };
        assert!(matches!(slow.validate(), Err(LeaseConfigError::Timing(_))));
        let anonymous = LeaseConfig {
            identity: String::new(),
            ..cfg
        };
        assert_eq!(
            anonymous.validate(),
            Err(LeaseConfigError::Empty("identity"))
        );
    }
}
