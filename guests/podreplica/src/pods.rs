//! How PodReplica sees pods: which ones it owns, which are live, which go first, and the
//! pod it creates.

use serde::Deserialize;
use serde_json::{Value, json};
use wasmop_sdk::k8s::{Identity, ObjectView, is_controlled_by, is_terminating};

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

/// What PodReplica reads of a pod's status: its phase and its conditions' type and status.
/// The rest of the pod is skipped while parsing (see [`ObjectView`]).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PodStatus {
    /// `Pending`, `Running`, `Succeeded`, `Failed` or `Unknown`.
    pub phase: Option<String>,
    /// The pod's conditions.
    #[serde(default)]
    pub conditions: Vec<PodCondition>,
}

/// One condition of a pod, as far as PodReplica reads it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PodCondition {
    /// The condition type (`Ready`, ...).
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
}

/// What PodReplica reads of a pod besides its metadata, declared in its relation: the host
/// sends only these (a pod's spec and the rest of its status are most of its size).
pub const READ_FIELDS: [&str; 2] = ["status.phase", "status.conditions"];

/// A pod as PodReplica reads it: metadata and [`PodStatus`].
pub type Pod = ObjectView<PodStatus>;

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
    pod.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    })
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
pub fn new_pod(owner: &Identity, spec: &PodReplicaSpec) -> Value {
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": format!("{}-pod-", owner.name),
            "labels": labels(owner),
            "ownerReferences": [owner.controller_reference()],
        },
        "spec": {
            "containers": [{
                "name": "busybox",
                "image": spec.image(),
                "command": spec.command(),
            }],
        },
    });
    if let Some(ns) = &owner.namespace {
        pod["metadata"]["namespace"] = json!(ns);
    }
    pod
}
