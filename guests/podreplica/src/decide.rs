//! The PodReplica decision: compare owned live pods with `spec.size`, create or delete the
//! difference, replace finished pods, and report the live pods in the status (once no pod
//! is missing: a plan that creates pods leaves the status to the decision that sees them).

use wasmop_sdk::conditions::{condition, set_condition};
use wasmop_sdk::k8s::{Identity, delete_ref, rfc3339};
use wasmop_sdk::{KindRef, Matching, Observed, Plan, ReconcileError, Requirement};

use crate::pods::{Pod, classify, is_ready, new_pod, removal_order};
use crate::types::{MAX_SIZE, PodReplica, PodReplicaStatus};

/// The relation of the ConfigMap a PodReplica names (the `configured` build).
pub const CONFIG_RELATION: &str = "config";

/// What the `configured` build asks for by label: the namespace's shared ConfigMaps.
pub const SHARED: &str = "shared";

/// The ConfigMap kind.
pub fn config_map_kind() -> KindRef {
    KindRef {
        group: String::new(),
        version: "v1".into(),
        kind: "ConfigMap".into(),
        plural: "configmaps".into(),
        namespaced: true,
    }
}

/// The shared ConfigMaps (labelled `tier=shared`), asked for by every decision.
fn shared() -> Requirement {
    Requirement {
        name: SHARED.into(),
        kind: config_map_kind(),
        namespace: None,
        matching: Matching::Labels("tier=shared".into()),
    }
}

/// The `data.flavour` of the ConfigMap the PodReplica names (`none` without one), and how
/// many shared ConfigMaps the host read for this decision.
fn flavour(observed: &Observed) -> Result<String, ReconcileError> {
    let configs = observed.related_values(CONFIG_RELATION)?;
    let flavour = configs
        .first()
        .and_then(|c| c.pointer("/data/flavour"))
        .and_then(|f| f.as_str())
        .unwrap_or("none");
    let shared = observed.required(SHARED).map_or(0, <[_]>::len);
    Ok(format!("{flavour}, {shared} shared"))
}

/// Decides what to do about one PodReplica.
pub fn reconcile(observed: &Observed) -> Result<Plan, ReconcileError> {
    let pr: PodReplica = observed.primary_as()?;
    let owner = Identity::of(&observed.primary)?;
    let size = pr.spec.size;
    if !(0..=MAX_SIZE).contains(&size) {
        return Err(ReconcileError::InvalidSpec(format!(
            "spec.size is {size}, it must be between 0 and {MAX_SIZE}"
        )));
    }
    if pr.metadata.deletion_timestamp.is_some() {
        // The garbage collector removes the pods with their owner.
        return Ok(Plan::new());
    }
    let pods: Vec<Pod> = observed.related_as("pods")?;
    let mut owned = classify(pods, &owner.uid);
    let mut plan = Plan::new();
    if cfg!(feature = "configured") {
        plan = plan.require(shared());
    }

    for pod in &owned.finished {
        plan = plan.delete(delete_ref("v1", "Pod", &pod.metadata));
    }
    if !owned.finished.is_empty() {
        plan = plan.normal(
            "ReplacingFinishedPods",
            format!("removing {} finished pod(s)", owned.finished.len()),
        );
    }

    let live = owned.live.len() as i32;
    if live > size {
        removal_order(&mut owned.live);
        let surplus: Vec<Pod> = owned.live.drain(..(live - size) as usize).collect();
        for pod in &surplus {
            plan = plan.delete(delete_ref("v1", "Pod", &pod.metadata));
        }
        let names: Vec<&str> = surplus
            .iter()
            .filter_map(|p| p.metadata.name.as_deref())
            .collect();
        plan = plan.normal(
            "ScaledDown",
            format!("deleting {} pod(s): {}", surplus.len(), names.join(", ")),
        );
    } else if live < size {
        let missing = size - live;
        for _ in 0..missing {
            plan = plan.apply(&new_pod(&owner, &pr.spec));
        }
        plan = plan.normal("ScaledUp", format!("creating {missing} pod(s)"));
    }

    // A plan that creates pods leaves the status alone: it could only list the pods from
    // before the creates, and their creation brings the next decision, whose status lists
    // them. One status write fewer per scale-up: a third of those converging sent.
    if live < size {
        return Ok(plan);
    }
    let flavour = if cfg!(feature = "configured") {
        Some(flavour(observed)?)
    } else {
        None
    };
    let status = status_for(&pr, &owned.live, size, observed.now_unix_ms, flavour);
    if pr.status.as_ref() != Some(&status) {
        plan = plan.status(&status);
    }
    Ok(plan)
}

/// The status describing the live pods that remain after this plan's deletions.
/// `flavour`: the named ConfigMap's (the `configured` build), ending the message.
fn status_for(
    pr: &PodReplica,
    live: &[Pod],
    size: i32,
    now_ms: i64,
    flavour: Option<String>,
) -> PodReplicaStatus {
    let mut pods: Vec<String> = live
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    pods.sort();
    let ready = live.iter().filter(|p| is_ready(p)).count() as i32;
    let replicas = pods.len() as i32;
    let generation = pr.metadata.generation;
    let (ok, reason, message) = if replicas == size && ready == size {
        (true, "AllPodsReady", format!("{ready}/{size} pods ready"))
    } else if replicas != size {
        (
            false,
            "Scaling",
            format!("{replicas} live pods, {size} desired"),
        )
    } else {
        (false, "PodsNotReady", format!("{ready}/{size} pods ready"))
    };
    let message = if cfg!(feature = "v2") {
        format!("{message} (v2)")
    } else if cfg!(feature = "v3") {
        format!("{message} (v3)")
    } else if let Some(flavour) = flavour {
        format!("{message} (config {flavour})")
    } else {
        message
    };
    let previous = pr
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    let mut conditions = Vec::new();
    set_condition(
        &mut conditions,
        previous,
        condition("Ready", ok, reason, message, &rfc3339(now_ms), generation),
    );
    PodReplicaStatus {
        pods,
        replicas,
        ready_replicas: ready,
        observed_generation: generation,
        conditions,
    }
}

#[cfg(test)]
mod tests;
