//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's semantics.
//!
//! Every replica runs [`run_elector`] on the same Lease. A replica takes the lease when it
//! is absent, has no holder, has expired or is already its own, renews it every
//! [`LeaseConfig::renew_every`], and announces on a watch channel whether it leads. Every
//! write carries the `resourceVersion` that was read, so of two replicas racing for the
//! lease exactly one write succeeds; the other gets 409 Conflict and does not lead.
//!
//! Expiry is judged by locally observed time, as client-go does: another holder's lease
//! has expired once this replica has seen its record unchanged for `leaseDurationSeconds`
//! by its own monotonic clock (a replica that starts watches a full duration first). The
//! holder's `renewTime` is never compared with the local clock, so replicas whose clocks
//! disagree cannot take a live lease. Assumed: the replicas' clocks *run at* about the same
//! rate. Guaranteed: a leader that cannot renew steps down (sends `false`) no later than
//! [`LeaseConfig::renew_deadline`] after the start of its last successful renewal, a
//! margin of `lease_duration - renew_deadline` before any other replica may take the lease;
//! on shutdown a leader steps down first, waits for its writes in flight to end (each ends
//! by the fence's deadline), then releases the lease so that a standby takes over at once.
//!
//! A returning member is a new member ([`Term`]): a replica that held the lease and has not
//! renewed it for a whole lease duration (paused, starved, cut off from the API server) never
//! writes under it again, even if the record still names it. (One that sees the lease taken
//! by another replica or written under it before that is a standby with live caches, and
//! its next lease is a new term.) Its elector steps down, releases
//! the lease if it is still its own, and ends with [`TermExpired`]; `wasmop run` then starts
//! the process afresh (new caches, listed again) and it competes as a new member. This is
//! client-go's rule (a leader that could not renew stops; controller-runtime exits) made
//! explicit, and it is what keeps a shard that comes back after its objects moved from
//! writing on a stale view.
//!
//! The rules themselves ([`decide`], [`claimed`], [`released`]) are pure functions in a
//! submodule; this file holds the configuration and the loop that talks to the API server.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::k8s::fence::Fence;

mod decide;
pub use decide::{Decision, Observer, Term, claimed, decide, released};

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
    /// How often the leader renews (default 5 s); shorter than `renew_deadline`.
    pub renew_every: Duration,
    /// How long after the start of its last successful renewal a leader that could not
    /// renew since steps down (default 10 s); shorter than `lease_duration` (client-go's
    /// rule), so it stops before anyone else may take the lease.
    pub renew_deadline: Duration,
    /// How often a standby, or a leader whose renewal failed, tries again (default 2 s).
    pub retry_every: Duration,
    /// Labels the Lease carries (a shard Lease names its ring); set when the Lease is
    /// created and kept on every renewal.
    pub labels: std::collections::BTreeMap<String, String>,
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
            renew_deadline: Duration::from_secs(10),
            retry_every: Duration::from_secs(2),
            labels: Default::default(),
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
        if self.renew_every >= self.renew_deadline {
            return Err(LeaseConfigError::Timing(
                "renew_every must be shorter than renew_deadline",
            ));
        }
        if self.renew_deadline >= self.lease_duration {
            return Err(LeaseConfigError::Timing(
                "renew_deadline must be shorter than lease_duration",
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

/// Annotations a replica announces on its Lease, written with every renewal.
pub type Announced = std::collections::BTreeMap<String, String>;

async fn try_acquire_or_renew(
    api: &Api<Lease>,
    cfg: &LeaseConfig,
    announced: &Announced,
    observer: &mut Observer,
) -> kube::Result<Attempt> {
    let existing = api.get_opt(&cfg.name).await?;
    let now = Timestamp::now();
    let spec = existing.as_ref().and_then(|l| l.spec.as_ref());
    let unchanged_for = observer.see(spec, std::time::Instant::now());
    if let Decision::Held { holder, .. } = decide(spec, &cfg.identity, unchanged_for) {
        return Ok(Attempt::Held(holder));
    }
    let new_spec = claimed(spec, &cfg.identity, cfg.lease_duration_seconds(), now);
    let result = match existing {
        None => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(cfg.name.clone()),
                    namespace: Some(cfg.namespace.clone()),
                    labels: (!cfg.labels.is_empty()).then(|| cfg.labels.clone()),
                    annotations: (!announced.is_empty()).then(|| announced.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(new_spec),
            };
            api.create(&PostParams::default(), &lease).await
        }
        // `replace` sends the resourceVersion we read: a concurrent write makes it fail.
        Some(mut lease) => {
            if !cfg.labels.is_empty() {
                lease
                    .metadata
                    .labels
                    .get_or_insert_with(Default::default)
                    .extend(cfg.labels.clone());
            }
            if !announced.is_empty() {
                lease
                    .metadata
                    .annotations
                    .get_or_insert_with(Default::default)
                    .extend(announced.clone());
            }
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

/// The lease this process held went a whole lease duration without a renewal: its term is
/// over ([`Term`]). The process must start afresh as a new member before it writes again.
#[derive(Debug, thiserror::Error)]
#[error(
    "lease {lease} was not renewed for {unrenewed:?} (its duration is {duration:?}): this replica's term under it is over"
)]
pub struct TermExpired {
    /// `namespace/name` of the Lease.
    pub lease: String,
    /// How long it went without a renewal, by this process's clock.
    pub unrenewed: Duration,
    /// The lease duration.
    pub duration: Duration,
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
/// on `leading` whether this replica leads (only changes are sent; it starts at `false`)
/// and keeping `fence` open exactly while this replica may write: until the renew deadline
/// of each successful renewal, closed on stepping down.
///
/// API errors never end the loop: they are logged and retried every `retry_every`. A
/// standby's round trip is bounded by `renew_every`, a leader's by the time left until its
/// renew deadline. On shutdown a leader sends `false`, then releases the lease if the
/// server still names it the holder (best effort: if that fails, the lease simply
/// expires). Returns an error for an invalid configuration, and [`TermExpired`] when this
/// process's term under the lease ended (it steps down, lets its writes in flight end and
/// releases the lease first).
pub async fn run_elector(
    client: kube::Client,
    cfg: LeaseConfig,
    leading: watch::Sender<bool>,
    fence: Arc<Fence>,
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let (_keep, announced) = watch::channel(Announced::new());
    run_elector_announcing(client, cfg, leading, fence, shutdown, announced).await
}

/// [`run_elector`], also writing the annotations `announced` holds at each moment on the
/// Lease with every renewal (a shard says which plugins it runs; the elector is the one
/// writer of its Lease, so no other write races its renewals).
pub async fn run_elector_announcing(
    client: kube::Client,
    cfg: LeaseConfig,
    leading: watch::Sender<bool>,
    fence: Arc<Fence>,
    mut shutdown: watch::Receiver<bool>,
    mut announced: watch::Receiver<Announced>,
) -> anyhow::Result<()> {
    cfg.validate()?;
    let api: Api<Lease> = Api::namespaced(client, &cfg.namespace);
    let lease = format!("{}/{}", cfg.namespace, cfg.name);
    // Stepping down closes the fence first: no write leaves once `false` is announced.
    let set = |value: bool| {
        if !value {
            fence.close();
        }
        leading.send_if_modified(|v| std::mem::replace(v, value) != value)
    };
    set(false);
    let mut is_leader = false;
    let mut last_renewed = Instant::now();
    let mut conflicts_in_a_row = 0u32;
    // A write cut short by the timeout may still have reached the server.
    let mut may_hold = false;
    let mut observer = Observer::default();
    let mut term = Term::default();
    let mut expired = None;

    while !shutting_down(&shutdown) {
        let started = Instant::now();
        if term.ended(started.into_std(), cfg.lease_duration) {
            expired = term.last_renewed();
            break;
        }
        let deadline = last_renewed + cfg.renew_deadline;
        // A leader never waits on a request past the moment it must step down.
        // A leader's renewal may take all the time left before its renew deadline (as
        // client-go's does): a slow API server under load is not a lost lease.
        let budget = if is_leader {
            deadline.saturating_duration_since(started)
        } else {
            cfg.renew_every
        };
        let now_announced = announced.borrow().clone();
        let attempt = tokio::time::timeout(
            budget,
            try_acquire_or_renew(&api, &cfg, &now_announced, &mut observer),
        )
        .await
        .unwrap_or_else(|_| Err(kube::Error::Service("lease request timed out".into())));
        may_hold = matches!(attempt, Ok(Attempt::Holding) | Err(_));
        let done = std::time::Instant::now();
        if matches!(attempt, Ok(Attempt::Holding))
            && !term.renewed(started.into_std(), done, cfg.lease_duration)
            || term.ended(done, cfg.lease_duration)
        {
            expired = term.last_renewed();
            break;
        }
        let wait = match attempt {
            Ok(Attempt::Holding) => {
                conflicts_in_a_row = 0;
                last_renewed = started;
                // Writes may leave until the renew deadline of this renewal, and no longer.
                fence.open_until(started.into_std() + cfg.renew_deadline);
                if !is_leader {
                    tracing::info!(%lease, identity = %cfg.identity, "acquired lease: leading");
                    is_leader = true;
                    set(true);
                }
                cfg.renew_every
            }
            Ok(Attempt::Held(holder)) => {
                conflicts_in_a_row = 0;
                // Seen taken within the term: a standby from now on, its caches live; a
                // later lease is a new term.
                term = Term::default();
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
                term = Term::default();
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
            // A new announcement is written at once by a holder (a renewal), not a period
            // later.
            let waited_or_news = tokio::select! {
                () = pause(wait, &mut shutdown) => true,
                changed = announced.changed(), if is_leader => changed.is_ok(),
            };
            // The announcing side is gone: wait as usual.
            if !waited_or_news {
                pause(wait, &mut shutdown).await;
            }
        }
    }

    if let Some(last) = expired {
        tracing::error!(%lease, identity = %cfg.identity, unrenewed = ?last.elapsed(),
            "lease not renewed for its whole duration: this replica's term is over, it starts again as a new member");
    }
    if is_leader || may_hold || expired.is_some() {
        set(false);
        // Every write in flight ends by the fence's deadline: none may land after the
        // lease is free for another replica.
        if tokio::time::timeout(cfg.renew_deadline, fence.writes_ended())
            .await
            .is_err()
        {
            tracing::warn!(%lease, in_flight = fence.writes_in_flight(), "writes still in flight after the renew deadline");
        }
        // Cut off, or still in flight after the deadline: either may yet be committed.
        let unknown = fence.outcomes_unknown() + fence.writes_in_flight() as u64;
        if unknown > 0 {
            // The API server may still commit a write that was cut off: the Lease is left to
            // run out for its whole duration, so no successor acts before it could land.
            tracing::warn!(%lease, unknown, duration = ?cfg.lease_duration,
                "writes of this term were cut off without an answer: the lease is not released, it runs out");
        } else {
            match tokio::time::timeout(cfg.renew_every, release(&api, &cfg)).await {
                Ok(Ok(true)) => tracing::info!(%lease, "released lease on shutdown"),
                Ok(Ok(false)) => tracing::info!(%lease, "lease no longer ours on shutdown"),
                Ok(Err(error)) => tracing::warn!(%lease, %error, "could not release lease"),
                Err(_) => tracing::warn!(%lease, "releasing lease timed out"),
            }
        }
    }
    set(false);
    match expired {
        Some(last) => Err(TermExpired {
            lease,
            unrenewed: last.elapsed(),
            duration: cfg.lease_duration,
        }
        .into()),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_defaults_and_validation() {
        let cfg = LeaseConfig::new("default", "wasmop", "pod-a");
        assert_eq!(cfg.lease_duration, Duration::from_secs(15));
        assert_eq!(cfg.renew_every, Duration::from_secs(5));
        assert_eq!(cfg.renew_deadline, Duration::from_secs(10));
        assert_eq!(cfg.retry_every, Duration::from_secs(2));
        assert_eq!(cfg.validate(), Ok(()));
        assert_eq!(cfg.lease_duration_seconds(), 15);

        let short = LeaseConfig {
            lease_duration: Duration::from_millis(2500),
            renew_every: Duration::from_secs(1),
            renew_deadline: Duration::from_secs(2),
            ..cfg.clone()
        };
        assert_eq!(short.validate(), Ok(()));
        let no_margin = LeaseConfig {
            renew_deadline: Duration::from_secs(15),
            ..cfg.clone()
        };
        assert!(matches!(
            no_margin.validate(),
            Err(LeaseConfigError::Timing(_))
        ));
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
