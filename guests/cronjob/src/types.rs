//! The CronJob custom resource (`batch.tutorial.kubebuilder.io`): v1, the storage version
//! the decision reads, and v2 (the multi-version tutorial's), whose schedule is structured.
//! The CRD serving both is generated from these types.

use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API group.
pub const GROUP: &str = "batch.tutorial.kubebuilder.io";

/// What to do when a run is due while an earlier one is still active.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ConcurrencyPolicy {
    /// Runs may overlap (the default).
    #[default]
    Allow,
    /// A run is skipped while an earlier one is active.
    Forbid,
    /// The active runs are deleted and the new one started.
    Replace,
}

/// A schema for an object kept as is: the Job template is a Job's, which the API server
/// validates when the Job is created.
fn preserved_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// One active Job, as `status.active` lists it.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobReference {
    /// `batch/v1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `Job`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The Job's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The Job's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The Job's UID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

/// The observed state of a CronJob (the same in v1 and v2).
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CronJobStatus {
    /// The Jobs still running.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub active: Vec<JobReference>,
    /// When a Job was last scheduled (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub last_schedule_time: Option<String>,
}

/// Run a Job on a cron schedule, like the kubebuilder book's CronJob.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "batch.tutorial.kubebuilder.io",
    version = "v1",
    kind = "CronJob",
    namespaced,
    status = "CronJobStatus",
    derive = "PartialEq",
    printcolumn = r#"{"name":"Schedule","type":"string","jsonPath":".spec.schedule"}"#,
    printcolumn = r#"{"name":"Suspend","type":"boolean","jsonPath":".spec.suspend"}"#,
    printcolumn = r#"{"name":"Last Schedule","type":"date","jsonPath":".status.lastScheduleTime"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    crates(kube_core = "::kube_core")
)]
#[serde(rename_all = "camelCase")]
pub struct CronJobSpec {
    /// The schedule in cron format (five fields, or `@hourly`, `@daily`, ...).
    #[schemars(length(min = 1))]
    pub schedule: String,
    /// Seconds after its scheduled time a missed run may still start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub starting_deadline_seconds: Option<i64>,
    /// What to do when a run is due while an earlier one is active (default `Allow`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency_policy: Option<ConcurrencyPolicy>,
    /// Whether runs are suspended (already started ones go on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// The Job to run: a `batch/v1` JobTemplateSpec (`metadata`, `spec`).
    #[schemars(schema_with = "preserved_object")]
    pub job_template: serde_json::Value,
    /// Successful Jobs kept (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub successful_jobs_history_limit: Option<i32>,
    /// Failed Jobs kept (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub failed_jobs_history_limit: Option<i32>,
}

/// The multi-version tutorial's v2: the schedule as five optional fields.
pub mod v2 {
    use super::{ConcurrencyPolicy, CronJobStatus, preserved_object};
    use kube_derive::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// A schedule by field; an absent field is `*`.
    #[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    pub struct CronSchedule {
        /// Minute (0-59).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub minute: Option<String>,
        /// Hour (0-23).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub hour: Option<String>,
        /// Day of the month (1-31).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub day_of_month: Option<String>,
        /// Month (1-12).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub month: Option<String>,
        /// Day of the week (0-6, Sunday is 0).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub day_of_week: Option<String>,
    }

    /// Run a Job on a cron schedule (v2: structured schedule).
    #[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
    #[kube(
        group = "batch.tutorial.kubebuilder.io",
        version = "v2",
        kind = "CronJob",
        namespaced,
        status = "CronJobStatus",
        derive = "PartialEq",
        printcolumn = r#"{"name":"Suspend","type":"boolean","jsonPath":".spec.suspend"}"#,
        printcolumn = r#"{"name":"Last Schedule","type":"date","jsonPath":".status.lastScheduleTime"}"#,
        printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
        crates(kube_core = "::kube_core")
    )]
    #[serde(rename_all = "camelCase")]
    pub struct CronJobSpec {
        /// The schedule, field by field.
        pub schedule: CronSchedule,
        /// Seconds after its scheduled time a missed run may still start.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(range(min = 0))]
        pub starting_deadline_seconds: Option<i64>,
        /// What to do when a run is due while an earlier one is active (default `Allow`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub concurrency_policy: Option<ConcurrencyPolicy>,
        /// Whether runs are suspended.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub suspend: Option<bool>,
        /// The Job to run: a `batch/v1` JobTemplateSpec.
        #[schemars(schema_with = "preserved_object")]
        pub job_template: serde_json::Value,
        /// Successful Jobs kept (default 3).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(range(min = 0))]
        pub successful_jobs_history_limit: Option<i32>,
        /// Failed Jobs kept (default 1).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(range(min = 0))]
        pub failed_jobs_history_limit: Option<i32>,
    }
}
