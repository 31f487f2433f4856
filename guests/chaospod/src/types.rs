//! The ChaosPod custom resource: spec, status and the CRD generated from them.

use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How many kills the status remembers.
pub const HISTORY_LIMIT: usize = 20;

fn default_interval() -> i64 {
    60
}

fn default_max_kills() -> i32 {
    1
}

/// Delete pods whose name starts with a prefix, a few at a time, every interval.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "app.example.com",
    version = "v1alpha1",
    kind = "ChaosPod",
    namespaced,
    status = "ChaosPodStatus",
    shortname = "chaos",
    derive = "PartialEq",
    printcolumn = r#"{"name":"Prefix","type":"string","jsonPath":".spec.prefix"}"#,
    printcolumn = r#"{"name":"Interval","type":"integer","jsonPath":".spec.intervalSeconds"}"#,
    printcolumn = r#"{"name":"DryRun","type":"boolean","jsonPath":".spec.dryRun"}"#,
    printcolumn = r#"{"name":"Kills","type":"integer","jsonPath":".status.totalKills"}"#,
    printcolumn = r#"{"name":"LastRun","type":"date","jsonPath":".status.lastRunTime"}"#,
    crates(kube_core = "::kube_core")
)]
#[serde(rename_all = "camelCase")]
pub struct ChaosPodSpec {
    /// Pods whose name starts with this prefix are candidates (required, non-empty).
    #[schemars(length(min = 1))]
    pub prefix: String,
    /// Seconds between two runs (default 60, at least 1).
    #[serde(default = "default_interval")]
    #[schemars(range(min = 1))]
    pub interval_seconds: i64,
    /// At most this many pods are deleted per run (default 1).
    #[serde(default = "default_max_kills")]
    #[schemars(range(min = 0, max = 100))]
    pub max_kills_per_run: i32,
    /// Only report the victims, delete nothing (default false).
    #[serde(default)]
    pub dry_run: bool,
}

/// One pod chosen by a run.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Kill {
    /// Pod name.
    pub name: String,
    /// Pod UID.
    pub uid: String,
    /// When it was chosen (RFC 3339).
    pub time: String,
    /// Whether it was only reported (dry run).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
}

/// What the chaos did so far.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChaosPodStatus {
    /// Pods actually deleted, over the object's life.
    #[serde(default)]
    pub total_kills: i64,
    /// Time of the last run (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run_time: Option<String>,
    /// The last 20 choices, oldest first.
    #[serde(default)]
    pub history: Vec<Kill>,
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
