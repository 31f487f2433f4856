//! The PodReplica custom resource (`app.example.com/v1alpha1`), as the CRD in
//! `deploy/crds/podreplica.yaml` defines it.
//!
//! The CRD is installed from that file, so the derive generates no schema
//! (`schema = "disabled"`): the status uses k8s-openapi's `metav1.Condition`, which has no
//! `JsonSchema` without k8s-openapi's `schemars` feature, and turning that feature on would
//! change how the rest of the workspace builds.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// Image of the pods when `spec.image` is not set.
pub const DEFAULT_IMAGE: &str = "busybox";

/// Keep `size` pods of one image running, like the article's PodReplica operator.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq)]
#[kube(
    group = "app.example.com",
    version = "v1alpha1",
    kind = "PodReplica",
    plural = "podreplicas",
    namespaced,
    status = "PodReplicaStatus",
    derive = "PartialEq",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct PodReplicaSpec {
    /// Number of pods to keep running, from 0 to 100 (the CRD's schema enforces the range).
    pub size: i32,
    /// Container image of the pods (default `busybox`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Command of the pods' container (default `sleep 3600`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
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

/// What the operator saw and did.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodReplicaStatus {
    /// Names of the live pods, sorted.
    #[serde(default)]
    pub pods: Vec<String>,
    /// Number of live pods.
    #[serde(default)]
    pub replicas: i32,
    /// Number of live pods that are Running and Ready.
    #[serde(default)]
    pub ready_replicas: i32,
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`: all desired pods are live and ready.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}
