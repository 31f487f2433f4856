//! Ending a rollout is a change of the WasmPlugin's spec, made the same way by `wasmop
//! promote`/`wasmop abort` and by the host when a rollout's policy decides
//! ([`crate::registry::report`]).

use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use crate::registry::wasmplugin::WasmPlugin;

/// The merge patch that makes the candidate of `wp` its active version; an error when it
/// has no candidate.
pub fn promote_patch(wp: &WasmPlugin) -> Result<Value, String> {
    let r = wp.spec.rollout.as_ref().ok_or_else(|| {
        format!(
            "WasmPlugin {} has no candidate (push one with `wasmop push --shadow` or `--canary`)",
            wp.metadata.name.as_deref().unwrap_or_default()
        )
    })?;
    // Every source field of the candidate, `null` for the absent ones: a merge patch
    // removes what the active version had (a ConfigMap when the candidate is OCI, say).
    Ok(
        json!({"spec": {"configMap": r.config_map, "sha256": r.sha256, "oci": r.oci,
        "rollout": null}}),
    )
}

/// The merge patch that drops the candidate.
pub fn abort_patch() -> Value {
    json!({"spec": {"rollout": null}})
}

/// Applies `patch` to the WasmPlugin `name`; returns the stored object.
pub async fn patch_spec(
    api: &Api<WasmPlugin>,
    name: &str,
    patch: &Value,
) -> Result<WasmPlugin, kube::Error> {
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wp(rollout: Option<Value>) -> WasmPlugin {
        let mut spec = json!({"configMap": {"name": "wasmplugin-p"}, "sha256": format!("sha256:{}", "a".repeat(64))});
        if let Some(r) = rollout {
            spec["rollout"] = r;
        }
        serde_json::from_value(
            json!({"apiVersion": "wasmop.dev/v1alpha1", "kind": "WasmPlugin",
            "metadata": {"name": "p", "namespace": "d"}, "spec": spec}),
        )
        .unwrap()
    }

    #[test]
    fn promotion_points_the_spec_at_the_candidate_and_ends_the_rollout() {
        let cand = format!("sha256:{}", "b".repeat(64));
        let w = wp(Some(
            json!({"configMap": {"name": "wasmplugin-p-alt", "key": "plugin.wasm.gz"},
            "sha256": cand, "strategy": "Shadow"}),
        ));
        let patch = promote_patch(&w).unwrap();
        assert_eq!(
            patch,
            json!({"spec": {"configMap": {"name": "wasmplugin-p-alt", "key": "plugin.wasm.gz"},
                "sha256": cand, "oci": null, "rollout": null}})
        );
        // An OCI candidate replaces the ConfigMap source.
        let oci = wp(Some(
            json!({"oci": {"reference": "r.io/p:2", "pullSecret": "s"},
            "strategy": "Shadow"}),
        ));
        assert_eq!(
            promote_patch(&oci).unwrap(),
            json!({"spec": {"configMap": null, "sha256": null,
                "oci": {"reference": "r.io/p:2", "pullSecret": "s"}, "rollout": null}})
        );
        let e = promote_patch(&wp(None)).unwrap_err();
        assert!(e.contains("has no candidate"), "{e}");
    }
}
