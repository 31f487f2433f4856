//! How PodReplica sees pods: which ones it owns, which are live, which go first, and the
//! pod it creates.

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use wasmop_sdk::k8s::{Identity, is_controlled_by, is_terminating};

use crate::types::PodReplicaSpec;

/// Label put on every pod, with the PodReplica's name as value.
pub const NAME_LABEL: &str = "app.example.com/podreplica";
/// Label the `v2` build adds to the pods it creates.
pub const VERSION_LABEL: &str = "app.example.com/plugin-version";

fn labels(owner: &Identity) -> std::collections::BTreeMap<String, String> {
    let mut labels =
        std::collections::BTreeMap::from([(NAME_LABEL.to_string(), owner.name.clone())]);
    if cfg!(feature = "v2") {
        labels.insert(VERSION_LABEL.to_string(), "v2".to_string());
    }
    labels
}

/// The owned pods of one PodReplica, sorted into what the decision needs.
#[derive(Debug, Default)]
pub struct OwnedPods {
    /// Pending or running, not terminating: these count towards `size`.
    pub live: Vec<Pod>,
    /// Succeeded or Failed, not terminating: replaced and removed.
    pub finished: Vec<Pod>,
    /// Already being deleted: neither counted nor deleted again.
    pub terminating: usize,
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

/// Whether the pod's `Ready` condition is `True`.
pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Sorts `pods` into live, finished and terminating, keeping only those whose controller
/// is the PodReplica with `owner_uid` (a pod that merely carries the label is not ours).
pub fn classify(pods: Vec<Pod>, owner_uid: &str) -> OwnedPods {
    let mut out = OwnedPods::default();
    for pod in pods {
        if !is_controlled_by(&pod.metadata, owner_uid) {
            continue;
        }
        if is_terminating(&pod.metadata) {
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
/// not-ready before ready, then newest first (name breaks ties, for determinism).
pub fn removal_order(live: &mut [Pod]) {
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

/// The pod a PodReplica creates: a generated name `<name>-pod-…`, the selecting label and a
/// controller ownerReference, so the pod goes away with its owner.
pub fn new_pod(owner: &Identity, spec: &PodReplicaSpec) -> Pod {
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}-pod-", owner.name)),
            namespace: owner.namespace.clone(),
            labels: Some(labels(owner)),
            owner_references: Some(vec![owner.controller_reference()]),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "busybox".into(),
                image: Some(spec.image().to_string()),
                command: Some(spec.command()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: None,
    }
}
