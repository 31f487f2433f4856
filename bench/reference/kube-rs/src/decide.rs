//! The PodReplica decision as plain functions (no I/O): which pods are ours and live, what
//! to create and delete, the pod to create, and the status to report.
//!
//! The rules are those of the wasm plugin (`guests/podreplica`), so the benchmark compares
//! the same decisions: a pod counts when its controller ownerReference is this PodReplica,
//! it is not being deleted and it has not finished (Succeeded or Failed: those are removed
//! and replaced); on scale-down, not-ready pods go first, then the newest.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use kube::{Resource, ResourceExt};

use crate::types::{PodReplica, PodReplicaStatus};

/// Label put on every pod, with the PodReplica's name as value (the plugin's label).
pub const NAME_LABEL: &str = "app.example.com/podreplica";
/// Name of the pods' only container.
pub const CONTAINER_NAME: &str = "busybox";
/// The largest `spec.size` accepted (the CRD's schema says the same).
pub const MAX_SIZE: i32 = 100;
/// Type of the one status condition.
pub const READY: &str = "Ready";

/// Whether `pod`'s controller ownerReference names the object with `owner_uid`.
pub fn is_controlled_by(pod: &Pod, owner_uid: &str) -> bool {
    pod.owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && o.uid == owner_uid)
}

/// The pod's phase; a pod without one is `Pending`.
pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

/// Whether the pod is Running and its `Ready` condition is `True`.
pub fn is_ready(pod: &Pod) -> bool {
    phase(pod) == "Running"
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == READY && c.status == "True"))
}

/// The pods of one PodReplica, sorted into what the decision needs.
#[derive(Debug, Default)]
pub struct OwnedPods {
    /// Pending or Running, not terminating: these count towards `size`. Sorted by name.
    pub live: Vec<Arc<Pod>>,
    /// Succeeded or Failed, not terminating: removed, and replaced by new ones.
    pub finished: Vec<Arc<Pod>>,
    /// Already being deleted: neither counted nor deleted again.
    pub terminating: usize,
}

/// Sorts `pods` into live, finished and terminating, keeping only those whose controller is
/// the PodReplica with `owner_uid` (a pod that merely carries the label is not ours).
pub fn classify(pods: impl IntoIterator<Item = Arc<Pod>>, owner_uid: &str) -> OwnedPods {
    let mut out = OwnedPods::default();
    for pod in pods {
        if !is_controlled_by(&pod, owner_uid) {
            continue;
        }
        if pod.metadata.deletion_timestamp.is_some() {
            out.terminating += 1;
        } else if matches!(phase(&pod), "Succeeded" | "Failed") {
            out.finished.push(pod);
        } else {
            out.live.push(pod);
        }
    }
    out.live
        .sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    out
}

/// Orders live pods so that the first ones are the ones to remove when scaling down:
/// not-ready before ready, then newest first (the name breaks ties, for determinism).
pub fn removal_order(live: &mut [Arc<Pod>]) {
    live.sort_by(|a, b| {
        is_ready(a)
            .cmp(&is_ready(b))
            .then_with(|| {
                b.metadata
                    .creation_timestamp
                    .cmp(&a.metadata.creation_timestamp)
            })
            .then_with(|| b.metadata.name.cmp(&a.metadata.name))
    });
}

/// What one reconcile does to the pods.
#[derive(Debug, Default)]
pub struct Changes {
    /// How many pods to create.
    pub create: usize,
    /// The pods to delete: finished ones, then the surplus of live ones.
    pub delete: Vec<Arc<Pod>>,
    /// The live pods that stay, sorted by name.
    pub keep: Vec<Arc<Pod>>,
}

/// Compares the live pods with `size`: create the missing ones, delete the surplus (in
/// [`removal_order`]) and every finished pod.
pub fn changes(owned: OwnedPods, size: usize) -> Changes {
    let OwnedPods {
        mut live, finished, ..
    } = owned;
    let mut delete = finished;
    let create = size.saturating_sub(live.len());
    if live.len() > size {
        removal_order(&mut live);
        delete.extend(live.drain(..live.len() - size));
        live.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    }
    Changes {
        create,
        delete,
        keep: live,
    }
}

/// `spec.size` as a count, or why it is invalid.
pub fn desired_size(pr: &PodReplica) -> Result<usize, String> {
    let size = pr.spec.size;
    if (0..=MAX_SIZE).contains(&size) {
        Ok(size as usize)
    } else {
        Err(format!(
            "spec.size is {size}, it must be between 0 and {MAX_SIZE}"
        ))
    }
}

/// The pod a PodReplica creates: a generated name `<name>-pod-…` in its namespace, the
/// [`NAME_LABEL`] label and a controller ownerReference, so that the pod triggers its owner
/// and goes away with it. `None` when the PodReplica has no uid yet (never from the API).
pub fn new_pod(pr: &PodReplica) -> Option<Pod> {
    let owner = pr.controller_owner_ref(&())?;
    let name = pr.name_any();
    Some(Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}-pod-")),
            namespace: pr.namespace(),
            labels: Some(BTreeMap::from([(NAME_LABEL.to_string(), name)])),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: CONTAINER_NAME.to_string(),
                image: Some(pr.spec.image().to_string()),
                command: Some(pr.spec.command()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        ..Pod::default()
    })
}

/// The status describing the live pods `names` (after this reconcile's creates and
/// deletes), `ready` of them Running and Ready. The `Ready` condition keeps its
/// `lastTransitionTime` from the current status unless its status flips, so an unchanged
/// world gives a status equal to the current one (and nothing is written).
pub fn desired_status(
    pr: &PodReplica,
    mut names: Vec<String>,
    ready: usize,
    now: Time,
) -> PodReplicaStatus {
    names.sort();
    let size = pr.spec.size;
    let replicas = names.len() as i32;
    let ready = ready as i32;
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
    let status = if ok { "True" } else { "False" }.to_string();
    let previous = pr
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == READY));
    let last_transition_time = match previous {
        Some(c) if c.status == status => c.last_transition_time.clone(),
        _ => now,
    };
    let generation = pr.metadata.generation;
    PodReplicaStatus {
        pods: names,
        replicas,
        ready_replicas: ready,
        observed_generation: generation,
        conditions: vec![Condition {
            type_: READY.to_string(),
            status,
            reason: reason.to_string(),
            message,
            last_transition_time,
            observed_generation: generation,
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::PodReplicaSpec;
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use k8s_openapi::jiff::Timestamp;

    const UID: &str = "uid-pr";

    fn pr(size: i32) -> PodReplica {
        let mut pr = PodReplica::new(
            "web",
            PodReplicaSpec {
                size,
                image: None,
                command: None,
            },
        );
        pr.metadata.namespace = Some("default".into());
        pr.metadata.uid = Some(UID.into());
        pr.metadata.generation = Some(2);
        pr
    }

    fn time(s: i64) -> Time {
        Time(Timestamp::from_second(s).unwrap())
    }

    fn pod(name: &str, owner: Option<&str>, phase: &str, ready: bool, created: i64) -> Arc<Pod> {
        Arc::new(Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                creation_timestamp: Some(time(created)),
                owner_references: owner.map(|uid| {
                    vec![OwnerReference {
                        api_version: "app.example.com/v1alpha1".into(),
                        kind: "PodReplica".into(),
                        name: "web".into(),
                        uid: uid.into(),
                        controller: Some(true),
                        block_owner_deletion: None,
                    }]
                }),
                ..ObjectMeta::default()
            },
            spec: None,
            status: Some(PodStatus {
                phase: Some(phase.into()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    ..PodCondition::default()
                }]),
                ..PodStatus::default()
            }),
        })
    }

    fn names(pods: &[Arc<Pod>]) -> Vec<String> {
        pods.iter().map(|p| p.name_any()).collect()
    }

    #[test]
    fn only_pods_controlled_by_this_owner_count() {
        let mut terminating = (*pod("d", Some(UID), "Running", true, 4)).clone();
        terminating.metadata.deletion_timestamp = Some(time(9));
        let mut not_controller = (*pod("e", Some(UID), "Running", true, 5)).clone();
        not_controller.metadata.owner_references.as_mut().unwrap()[0].controller = None;
        let owned = classify(
            [
                pod("c", Some(UID), "Pending", false, 3),
                pod("a", Some(UID), "Running", true, 1),
                pod("other", Some("someone-else"), "Running", true, 1),
                pod("orphan", None, "Running", true, 1),
                pod("done", Some(UID), "Succeeded", false, 1),
                pod("failed", Some(UID), "Failed", false, 1),
                Arc::new(terminating),
                Arc::new(not_controller),
            ],
            UID,
        );
        assert_eq!(names(&owned.live), ["a", "c"]);
        assert_eq!(names(&owned.finished), ["done", "failed"]);
        assert_eq!(owned.terminating, 1);
    }

    #[test]
    fn readiness_needs_running_and_the_ready_condition() {
        assert!(is_ready(&pod("a", Some(UID), "Running", true, 1)));
        assert!(!is_ready(&pod("a", Some(UID), "Running", false, 1)));
        assert!(!is_ready(&pod("a", Some(UID), "Pending", true, 1)));
        assert!(!is_ready(&Pod::default()));
    }

    #[test]
    fn creates_the_missing_pods_and_replaces_finished_ones() {
        let owned = classify(
            [
                pod("a", Some(UID), "Running", true, 1),
                pod("done", Some(UID), "Succeeded", false, 1),
            ],
            UID,
        );
        let c = changes(owned, 3);
        assert_eq!(c.create, 2);
        assert_eq!(names(&c.delete), ["done"]);
        assert_eq!(names(&c.keep), ["a"]);
    }

    #[test]
    fn scale_down_removes_not_ready_then_newest() {
        let owned = classify(
            [
                pod("old", Some(UID), "Running", true, 1),
                pod("new", Some(UID), "Running", true, 5),
                pod("mid", Some(UID), "Running", true, 3),
                pod("pending", Some(UID), "Pending", false, 0),
            ],
            UID,
        );
        let c = changes(owned, 2);
        assert_eq!(c.create, 0);
        assert_eq!(names(&c.delete), ["pending", "new"]);
        assert_eq!(names(&c.keep), ["mid", "old"]);
    }

    #[test]
    fn at_size_nothing_changes() {
        let owned = classify([pod("a", Some(UID), "Pending", false, 1)], UID);
        let c = changes(owned, 1);
        assert_eq!(
            (c.create, c.delete.len(), names(&c.keep)),
            (0, 0, vec!["a".into()])
        );
        let c = changes(OwnedPods::default(), 0);
        assert_eq!((c.create, c.delete.len(), c.keep.len()), (0, 0, 0));
    }

    #[test]
    fn size_out_of_range_is_an_error() {
        assert_eq!(desired_size(&pr(0)), Ok(0));
        assert_eq!(desired_size(&pr(100)), Ok(100));
        assert!(desired_size(&pr(-1)).is_err());
        assert!(desired_size(&pr(101)).is_err());
    }

    #[test]
    fn new_pod_has_generated_name_label_owner_and_defaults() {
        let pod = new_pod(&pr(1)).unwrap();
        let json = serde_json::to_value(&pod).unwrap();
        assert_eq!(json["metadata"]["generateName"], "web-pod-");
        assert_eq!(json["metadata"]["namespace"], "default");
        assert_eq!(json["metadata"]["labels"][NAME_LABEL], "web");
        let owner = &json["metadata"]["ownerReferences"][0];
        assert_eq!(owner["apiVersion"], "app.example.com/v1alpha1");
        assert_eq!(owner["kind"], "PodReplica");
        assert_eq!(owner["name"], "web");
        assert_eq!(owner["uid"], UID);
        assert_eq!(owner["controller"], true);
        let container = &json["spec"]["containers"][0];
        assert_eq!(container["name"], CONTAINER_NAME);
        assert_eq!(container["image"], "busybox");
        assert_eq!(container["command"], serde_json::json!(["sleep", "3600"]));
        assert!(json["metadata"].get("name").is_none());

        let mut custom = pr(1);
        custom.spec.image = Some("nginx".into());
        custom.spec.command = Some(vec!["true".into()]);
        let json = serde_json::to_value(new_pod(&custom).unwrap()).unwrap();
        assert_eq!(json["spec"]["containers"][0]["image"], "nginx");
        assert_eq!(
            json["spec"]["containers"][0]["command"],
            serde_json::json!(["true"])
        );

        let mut no_uid = pr(1);
        no_uid.metadata.uid = None;
        assert!(new_pod(&no_uid).is_none());
    }

    #[test]
    fn status_lists_sorted_pods_and_the_ready_condition() {
        let s = desired_status(&pr(2), vec!["b".into(), "a".into()], 2, time(10));
        assert_eq!(s.pods, ["a", "b"]);
        assert_eq!((s.replicas, s.ready_replicas), (2, 2));
        assert_eq!(s.observed_generation, Some(2));
        let c = &s.conditions[0];
        assert_eq!((c.type_.as_str(), c.status.as_str()), ("Ready", "True"));
        assert_eq!(c.reason, "AllPodsReady");
        assert_eq!(c.message, "2/2 pods ready");
        assert_eq!(c.observed_generation, Some(2));
        assert_eq!(c.last_transition_time, time(10));

        let s = desired_status(&pr(3), vec!["a".into()], 1, time(10));
        assert_eq!(
            (
                s.conditions[0].status.as_str(),
                s.conditions[0].reason.as_str()
            ),
            ("False", "Scaling")
        );
        let s = desired_status(&pr(2), vec!["a".into(), "b".into()], 1, time(10));
        assert_eq!(s.conditions[0].reason, "PodsNotReady");
        assert_eq!(s.conditions[0].message, "1/2 pods ready");
    }

    #[test]
    fn transition_time_moves_only_when_the_condition_flips() {
        let mut current = pr(2);
        current.status = Some(desired_status(&current, vec!["a".into()], 0, time(10)));
        // Still False (another reason): the time stays.
        let s = desired_status(&current, vec!["a".into(), "b".into()], 1, time(20));
        assert_eq!(s.conditions[0].last_transition_time, time(10));
        // False -> True: the time moves.
        let s = desired_status(&current, vec!["a".into(), "b".into()], 2, time(30));
        assert_eq!(s.conditions[0].last_transition_time, time(30));
    }

    #[test]
    fn an_unchanged_world_gives_the_current_status() {
        let mut current = pr(2);
        let first = desired_status(&current, vec!["a".into(), "b".into()], 2, time(10));
        current.status = Some(first.clone());
        let again = desired_status(&current, vec!["b".into(), "a".into()], 2, time(99));
        assert_eq!(Some(&again), current.status.as_ref());
    }

    #[test]
    fn status_round_trips_through_the_crd_shape() {
        let s = desired_status(&pr(1), vec!["a".into()], 1, time(10));
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["readyReplicas"], 1);
        assert_eq!(json["observedGeneration"], 2);
        assert_eq!(
            json["conditions"][0]["lastTransitionTime"],
            "1970-01-01T00:00:10Z"
        );
        let back: PodReplicaStatus = serde_json::from_value(json).unwrap();
        assert_eq!(back, s);
    }
}
