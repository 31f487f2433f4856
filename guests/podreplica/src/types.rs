//! The PodReplica custom resource: spec, status and the CRD generated from them.

use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use wasmop_sdk::conditions::Condition;

/// The largest `spec.size` accepted. The API server enforces it through the CRD schema and
/// the plugin checks it again.
pub const MAX_SIZE: i32 = 100;
/// Image of the pods when `spec.image` is not set.
pub const DEFAULT_IMAGE: &str = "busybox";

/// Keep `size` pods of one image running, like the article's PodReplica operator.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "app.example.com",
    version = "v1alpha1",
    kind = "PodReplica",
    namespaced,
    status = "PodReplicaStatus",
    shortname = "pr",
    derive = "PartialEq",
    printcolumn = r#"{"name":"Desired","type":"integer","jsonPath":".spec.size","description":"Desired number of pods"}"#,
    printcolumn = r#"{"name":"Live","type":"integer","jsonPath":".status.replicas","description":"Live pods"}"#,
    printcolumn = r#"{"name":"Ready","type":"integer","jsonPath":".status.readyReplicas","description":"Ready pods"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    crates(kube_core = "::kube_core")
)]
#[serde(rename_all = "camelCase")]
pub struct PodReplicaSpec {
    /// Number of pods to keep running, from 0 to 100.
    #[schemars(range(min = 0, max = 100))]
    pub size: i32,
    /// Container image of the pods (default `busybox`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub image: Option<String>,
    /// Command of the pods' container (default `sleep 3600`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// The ConfigMap whose `data.flavour` the status reports (the `configured` build).
    #[cfg(feature = "configured")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_ref: Option<ConfigRef>,
}

/// A ConfigMap in the PodReplica's namespace, by name.
#[cfg(feature = "configured")]
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct ConfigRef {
    /// Its name.
    pub name: String,
}

/// What the operator saw and did.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodReplicaStatus {
    /// Names of the live pods, sorted.
    #[serde(default)]
    pub pods: Vec<String>,
    /// Number of live pods.
    #[serde(default)]
    pub replicas: i32,
    /// Number of live pods that are Ready.
    #[serde(default)]
    pub ready_replicas: i32,
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`: all desired pods are live and ready.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

impl PodReplicaSpec {
    /// The image to run.
    pub fn image(&self) -> &str {
        self.image.as_deref().unwrap_or(DEFAULT_IMAGE)
    }

    /// The command to run.
    pub fn command(&self) -> Vec<String> {
        self.command
            .clone()
            .unwrap_or_else(|| vec!["sleep".into(), "3600".into()])
    }
}
