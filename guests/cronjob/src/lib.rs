//! CronJob: the kubebuilder book's CronJob operator (its CronJob and multi-version
//! tutorials) as a wasmop plugin. A CronJob runs a Job on a cron schedule; the Jobs it
//! starts are its own (controller ownerReference) and go away with it. The decision lives
//! in [`decide`], the schedule in [`cron`], admission and conversion in [`admission`].

pub mod admission;
pub mod cron;
pub mod decide;
pub mod types;

use kube_core::CustomResourceExt;
use wasmop_sdk::{KindRef, Permission, Plugin, PluginInfo, Relation, Selection, Verb};

pub use types::{CronJob, CronJobSpec, CronJobStatus};

/// The plugin.
pub struct CronJobPlugin;

/// The primary kind (its storage version).
pub fn primary_kind() -> KindRef {
    KindRef {
        group: types::GROUP.into(),
        version: admission::V1.into(),
        kind: "CronJob".into(),
        plural: "cronjobs".into(),
        namespaced: true,
    }
}

/// The CRD serving v1 (stored) and v2.
pub fn crd() -> serde_json::Value {
    let merged = kube_core::crd::merge_crds(vec![CronJob::crd(), types::v2::CronJob::crd()], "v1")
        .expect("the two versions of the CRD merge");
    serde_json::to_value(merged).expect("CRD serialises")
}

/// Jobs are created (applied by name: created, or patched when the Job exists) and
/// deleted (history pruning, the `Replace` policy).
fn permissions() -> Vec<Permission> {
    vec![Permission {
        kind: decide::job_kind(),
        verbs: vec![Verb::Create, Verb::Patch, Verb::Delete],
    }]
}

/// The owned Jobs, their conditions and start time.
fn relations() -> Vec<Relation> {
    vec![Relation {
        name: decide::JOBS.into(),
        kind: decide::job_kind(),
        selection: Selection::Owned,
        label_selector: None,
        fields: Some(decide::READ_FIELDS.iter().map(|f| f.to_string()).collect()),
    }]
}

impl Plugin for CronJobPlugin {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "cronjob".into(),
            version: if cfg!(feature = "strict") {
                concat!(env!("CARGO_PKG_VERSION"), "-strict")
            } else {
                env!("CARGO_PKG_VERSION")
            }
            .into(),
            primary: primary_kind(),
            crd: Some(crd()),
            relations: relations(),
            permissions: permissions(),
            finalizer: None,
            webhooks: wasmop_sdk::Webhooks {
                validate: true,
                default: true,
                convert: true,
            },
            outbound_hosts: Vec::new(),
        }
    }

    fn validate(request: &wasmop_sdk::AdmissionRequest) -> wasmop_sdk::Verdict {
        admission::validate(request)
    }

    fn default(object: serde_json::Value) -> Result<serde_json::Value, String> {
        Ok(admission::default(object))
    }

    fn convert(object: serde_json::Value, to_version: &str) -> Result<serde_json::Value, String> {
        admission::convert(object, to_version)
    }

    fn reconcile(
        observed: &wasmop_sdk::Observed,
    ) -> Result<wasmop_sdk::Plan, wasmop_sdk::ReconcileError> {
        decide::reconcile(observed)
    }
}

wasmop_sdk::export_plugin!(CronJobPlugin);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crd_serves_v1_stored_and_v2_with_status_and_a_preserved_template() {
        let crd = crd();
        assert_eq!(crd["spec"]["scope"], "Namespaced");
        let versions = crd["spec"]["versions"].as_array().unwrap();
        let names: Vec<(&str, bool, bool)> = versions
            .iter()
            .map(|v| {
                (
                    v["name"].as_str().unwrap(),
                    v["served"].as_bool().unwrap(),
                    v["storage"].as_bool().unwrap(),
                )
            })
            .collect();
        assert_eq!(names, [("v1", true, true), ("v2", true, false)]);
        for v in versions {
            assert_eq!(v["subresources"]["status"], serde_json::json!({}));
            let spec = &v["schema"]["openAPIV3Schema"]["properties"]["spec"];
            assert_eq!(
                spec["properties"]["jobTemplate"]["x-kubernetes-preserve-unknown-fields"],
                true
            );
            assert_eq!(
                spec["properties"]["concurrencyPolicy"]["enum"],
                serde_json::json!(["Allow", "Forbid", "Replace"])
            );
        }
        let v1 = &versions[0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(v1["properties"]["schedule"]["type"], "string");
        let v2 = &versions[1]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(
            v2["properties"]["schedule"]["properties"]["dayOfWeek"]["type"],
            "string"
        );
    }

    #[test]
    fn info_declares_owned_jobs_and_the_three_webhooks() {
        let info = CronJobPlugin::info();
        assert_eq!(info.relations[0].selection, Selection::Owned);
        assert_eq!(info.relations[0].kind.api_version(), "batch/v1");
        assert_eq!(
            info.permissions[0].verbs,
            [Verb::Create, Verb::Patch, Verb::Delete]
        );
        assert!(info.webhooks.validate && info.webhooks.default && info.webhooks.convert);
    }
}
