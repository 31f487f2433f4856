//! The shadow call: the candidate decides on a copy of the observed value the active version
//! saw, on its own task and in the sandbox's share for candidates
//! ([`Sandbox::decide_candidate`]), so neither its time, its faults nor its calls' slots
//! touch the reconcile or other plugins; the two outcomes are compared (on the blocking
//! pool, within a time budget) and counted.

use std::sync::Arc;

use tokio::sync::Semaphore;

use crate::rollout::compare::{Comparison, compare};
use crate::rollout::{Candidate, Divergence};
use crate::runtime::{Entry, Observed, Outcome, Sandbox};
use crate::telemetry::metrics::{Metrics, RolloutLabels};

/// Shadow calls of one candidate waiting or running at once; beyond that a shadow decision
/// is skipped (counted as `skipped`), so a slow candidate cannot pile up work.
pub const MAX_IN_FLIGHT: usize = 64;

/// Bounds the shadow calls of one candidate.
#[derive(Debug)]
pub struct InFlight(Arc<Semaphore>);

impl Default for InFlight {
    fn default() -> Self {
        InFlight(Arc::new(Semaphore::new(MAX_IN_FLIGHT)))
    }
}

/// One shadow decision to make.
pub struct ShadowCall {
    /// The candidate.
    pub candidate: Arc<Candidate>,
    /// The entry point the active version was called at.
    pub entry: Entry,
    /// A copy of what the active version observed.
    pub observed: Observed,
    /// The active version's outcome.
    pub active: Outcome,
    /// `namespace/name` of the primary.
    pub object: String,
}

/// Starts `call` on its own task (or counts it as skipped when too many run).
pub fn spawn(sandbox: &Sandbox, metrics: &Arc<Metrics>, call: ShadowCall) {
    let (plugin, version) = (
        call.candidate.plugin.info.name.clone(),
        call.candidate.plugin.info.version.clone(),
    );
    let labels = move |result: &'static str| RolloutLabels {
        plugin: plugin.clone(),
        candidate: version.clone(),
        result,
    };
    let Ok(permit) = call.candidate.in_flight.0.clone().try_acquire_owned() else {
        metrics
            .rollout_decisions
            .get_or_create(&labels("skipped"))
            .inc();
        return;
    };
    let (sandbox, metrics) = (sandbox.clone(), metrics.clone());
    tokio::spawn(async move {
        let _permit = permit;
        let c = &call.candidate;
        let result = sandbox
            .decide_candidate(
                c.plugin.clone(),
                call.entry,
                call.observed,
                call.object.clone(),
            )
            .await;
        let outcome = Outcome::from(result);
        let divergence = |diff: String| Divergence {
            object: call.object.clone(),
            time: now(),
            diff,
        };
        let active = call.active;
        let compared = tokio::task::spawn_blocking(move || compare(&active, &outcome)).await;
        let Ok(compared) = compared else {
            return;
        };
        let result = match compared {
            Comparison::Agree => {
                c.stats.agreed();
                "agree"
            }
            Comparison::Diverge(diff) => {
                tracing::debug!(object = %call.object, "shadow divergence:\n{diff}");
                c.stats.diverged(divergence(diff));
                "diverge"
            }
            Comparison::Fault(why) => {
                tracing::warn!(object = %call.object, "{why}");
                c.stats.faulted(divergence(why));
                "fault"
            }
        };
        metrics
            .rollout_decisions
            .get_or_create(&labels(result))
            .inc();
    });
}

/// The current time, RFC 3339, to the second.
pub fn now() -> String {
    let t = jiff::Timestamp::now();
    t.round(jiff::Unit::Second).unwrap_or(t).to_string()
}
