//! PodReplica: keep `spec.size` pods running per custom resource, list them in the status,
//! and let the garbage collector remove them with the resource (they carry a controller
//! ownerReference). The decision lives in [`decide`]; this file declares the plugin.

pub mod admission;
pub mod decide;
pub mod pods;
pub mod types;

use kube_core::CustomResourceExt;
use wasmop_sdk::k8s::pod_kind;
use wasmop_sdk::{KindRef, Permission, Plugin, PluginInfo, Relation, Selection, Verb};

pub use types::{PodReplica, PodReplicaSpec, PodReplicaStatus};

/// The plugin.
pub struct PodReplicaPlugin;

/// The primary kind.
pub fn primary_kind() -> KindRef {
    KindRef {
        group: "app.example.com".into(),
        version: "v1alpha1".into(),
        kind: "PodReplica".into(),
        plural: "podreplicas".into(),
        namespaced: true,
    }
}

/// The CRD of the PodReplica type; the `admitted` build serves v1beta1 too.
fn crd() -> serde_json::Value {
    let crd = serde_json::to_value(PodReplica::crd()).expect("CRD serialises");
    if cfg!(feature = "admitted") {
        admission::with_beta(crd)
    } else {
        crd
    }
}

/// Create and delete pods; in the `configured` build, read ConfigMaps too (the shared ones
/// it asks for by label).
fn permissions() -> Vec<Permission> {
    let mut p = vec![Permission {
        kind: pod_kind(),
        verbs: vec![Verb::Create, Verb::Delete],
    }];
    if cfg!(feature = "configured") {
        p.push(Permission {
            kind: decide::config_map_kind(),
            verbs: vec![Verb::Get, Verb::List],
        });
    }
    p
}

/// The owned pods; in the `configured` build, the ConfigMap the PodReplica names too.
fn relations() -> Vec<Relation> {
    let pods = Relation {
        name: "pods".into(),
        kind: pod_kind(),
        selection: Selection::Owned,
        label_selector: cfg!(feature = "v3").then(|| pods::NAME_LABEL.to_string()),
        fields: Some(pods::READ_FIELDS.iter().map(|f| f.to_string()).collect()),
    };
    if !cfg!(feature = "configured") {
        return vec![pods];
    }
    let configs = Relation {
        name: decide::CONFIG_RELATION.into(),
        kind: decide::config_map_kind(),
        selection: Selection::Referenced(wasmop_sdk::Reference {
            name_path: "spec.configRef.name".into(),
            namespace_path: None,
        }),
        label_selector: None,
        fields: Some(vec!["data".into()]),
    };
    vec![pods, configs]
}

impl Plugin for PodReplicaPlugin {
    fn info() -> PluginInfo {
        PluginInfo {
            // The `renamed` test build claims the same primary kind under another name.
            name: if cfg!(feature = "renamed") {
                "podreplica-renamed".into()
            } else {
                "podreplica".into()
            },
            version: if cfg!(feature = "v2") {
                concat!(env!("CARGO_PKG_VERSION"), "-v2").into()
            } else if cfg!(feature = "v3") {
                concat!(env!("CARGO_PKG_VERSION"), "-v3").into()
            } else if cfg!(feature = "admitted") {
                concat!(env!("CARGO_PKG_VERSION"), "-admitted").into()
            } else if cfg!(feature = "configured") {
                concat!(env!("CARGO_PKG_VERSION"), "-configured").into()
            } else if cfg!(feature = "broken") {
                concat!(env!("CARGO_PKG_VERSION"), "-broken").into()
            } else {
                env!("CARGO_PKG_VERSION").into()
            },
            primary: primary_kind(),
            crd: Some(crd()),
            relations: relations(),
            permissions: permissions(),
            finalizer: None,
            webhooks: wasmop_sdk::Webhooks {
                validate: cfg!(feature = "admitted"),
                default: cfg!(feature = "admitted"),
                convert: cfg!(feature = "admitted"),
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
        if cfg!(feature = "broken") {
            panic!("the `broken` test build traps in every reconcile");
        }
        decide::reconcile(observed)
    }
}

wasmop_sdk::export_plugin!(PodReplicaPlugin);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crd_validates_size_and_has_columns_and_short_name() {
        let crd = serde_json::to_value(PodReplica::crd()).unwrap();
        let v = &crd["spec"]["versions"][0];
        let size = &v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["size"];
        assert_eq!(size["minimum"], 0.0);
        assert_eq!(size["maximum"], f64::from(types::MAX_SIZE));
        assert_eq!(crd["spec"]["names"]["shortNames"][0], "pr");
        assert_eq!(v["subresources"]["status"], serde_json::json!({}));
        let columns: Vec<&str> = v["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(columns, ["Desired", "Live", "Ready", "Age"]);
    }

    #[test]
    fn info_declares_owned_pods_and_only_create_delete() {
        let info = PodReplicaPlugin::info();
        assert_eq!(info.relations[0].selection, Selection::Owned);
        assert_eq!(info.permissions[0].verbs, [Verb::Create, Verb::Delete]);
    }
}
