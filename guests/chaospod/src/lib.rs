//! ChaosPod: every `intervalSeconds`, delete up to `maxKillsPerRun` pods of the namespace
//! whose name starts with `prefix`, chosen at random from the host's seed. The decision
//! lives in [`decide`]; this file declares the plugin.

pub mod decide;
pub mod pick;
pub mod types;

use kube_core::CustomResourceExt;
use wasmop_sdk::k8s::pod_kind;
use wasmop_sdk::{KindRef, Permission, Plugin, PluginInfo, Relation, Selection, Verb};

pub use types::{ChaosPod, ChaosPodSpec, ChaosPodStatus};

/// The plugin.
pub struct ChaosPodPlugin;

/// The primary kind.
pub fn primary_kind() -> KindRef {
    KindRef {
        group: "app.example.com".into(),
        version: "v1alpha1".into(),
        kind: "ChaosPod".into(),
        plural: "chaospods".into(),
        namespaced: true,
    }
}

impl Plugin for ChaosPodPlugin {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "chaospod".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            primary: primary_kind(),
            crd: Some(serde_json::to_value(ChaosPod::crd()).expect("CRD serialises")),
            relations: vec![Relation {
                name: "pods".into(),
                kind: pod_kind(),
                selection: Selection::Namespace,
                label_selector: None,
                // ChaosPod reads a pod's metadata only (name, UID, deletion).
                fields: Some(vec![]),
            }],
            permissions: vec![Permission {
                kind: pod_kind(),
                verbs: vec![Verb::Delete],
            }],
            finalizer: None,
            webhooks: Default::default(),
            outbound_hosts: Vec::new(),
        }
    }

    fn reconcile(
        observed: &wasmop_sdk::Observed,
    ) -> Result<wasmop_sdk::Plan, wasmop_sdk::ReconcileError> {
        decide::reconcile(observed)
    }
}

wasmop_sdk::export_plugin!(ChaosPodPlugin);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crd_requires_a_prefix_and_bounds_the_interval() {
        let crd = serde_json::to_value(ChaosPod::crd()).unwrap();
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(spec["required"], serde_json::json!(["prefix"]));
        assert_eq!(spec["properties"]["prefix"]["minLength"], 1);
        assert_eq!(spec["properties"]["intervalSeconds"]["minimum"], 1.0);
        assert_eq!(spec["properties"]["intervalSeconds"]["default"], 60);
    }

    #[test]
    fn info_declares_namespace_pods_and_only_delete() {
        let info = ChaosPodPlugin::info();
        assert_eq!(info.relations[0].selection, Selection::Namespace);
        assert_eq!(info.permissions[0].verbs, [Verb::Delete]);
    }
}
