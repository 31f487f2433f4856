//! The ChaosPod decision: when a run is due, pick victims among the prefix-matching pods
//! that are not already terminating, delete them (or only report them in a dry run),
//! record the run in the status and come back after the interval.

use wasmop_sdk::k8s::{ObjectView, delete_ref, is_terminating, parse_rfc3339, rfc3339};
use wasmop_sdk::{Observed, Plan, ReconcileError};

use crate::pick::pick_indices;
use crate::types::{ChaosPod, ChaosPodSpec, HISTORY_LIMIT, Kill};

/// A pod as ChaosPod reads it: its metadata only (the rest is skipped while parsing).
pub type Pod = ObjectView<serde::de::IgnoredAny>;

fn check(spec: &ChaosPodSpec) -> Result<(), ReconcileError> {
    if spec.prefix.is_empty() {
        return Err(ReconcileError::InvalidSpec(
            "spec.prefix must not be empty".into(),
        ));
    }
    if spec.interval_seconds < 1 {
        return Err(ReconcileError::InvalidSpec(format!(
            "spec.intervalSeconds is {}, it must be at least 1",
            spec.interval_seconds
        )));
    }
    if spec.max_kills_per_run < 0 {
        return Err(ReconcileError::InvalidSpec(format!(
            "spec.maxKillsPerRun is {}, it must not be negative",
            spec.max_kills_per_run
        )));
    }
    Ok(())
}

/// The pods a run may choose from: name starts with the prefix, not terminating; sorted by
/// name so the choice depends only on the set and the seed.
pub fn candidates(pods: Vec<Pod>, prefix: &str) -> Vec<Pod> {
    let mut out: Vec<Pod> = pods
        .into_iter()
        .filter(|p| {
            p.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with(prefix))
                && !is_terminating(&p.metadata)
        })
        .collect();
    out.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    out
}

/// Decides what to do about one ChaosPod.
pub fn reconcile(observed: &Observed) -> Result<Plan, ReconcileError> {
    let chaos: ChaosPod = observed.primary_as()?;
    check(&chaos.spec)?;
    if chaos.metadata.deletion_timestamp.is_some() {
        return Ok(Plan::new());
    }
    let now = observed.now_unix_ms;
    let interval_ms = chaos.spec.interval_seconds.saturating_mul(1000);
    let mut status = chaos.status.clone().unwrap_or_default();
    if let Some(last) = status.last_run_time.as_deref().and_then(parse_rfc3339) {
        let due = last.saturating_add(interval_ms);
        if now < due {
            return Ok(Plan::new().requeue_after_ms((due - now) as u64));
        }
    }

    let pool = candidates(observed.related_as("pods")?, &chaos.spec.prefix);
    let picks = pick_indices(
        pool.len(),
        chaos.spec.max_kills_per_run as usize,
        observed.seed,
    );
    let dry_run = chaos.spec.dry_run;
    let mut plan = Plan::new();
    for &i in &picks {
        let pod = &pool[i];
        let name = pod.metadata.name.clone().unwrap_or_default();
        if dry_run {
            plan = plan.normal("DryRun", format!("would delete pod {name}"));
        } else {
            plan = plan
                .delete(delete_ref("v1", "Pod", &pod.metadata))
                .normal("PodKilled", format!("deleting pod {name}"));
        }
        status.history.push(Kill {
            name,
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            time: rfc3339(now),
            dry_run,
        });
    }
    let overflow = status.history.len().saturating_sub(HISTORY_LIMIT);
    status.history.drain(..overflow);
    if !dry_run {
        status.total_kills += picks.len() as i64;
    }
    status.last_run_time = Some(rfc3339(now));
    status.observed_generation = chaos.metadata.generation;
    Ok(plan.status(&status).requeue_after_ms(interval_ms as u64))
}

#[cfg(test)]
mod tests;
