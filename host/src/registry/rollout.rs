//! Ending a rollout: `wasmop promote NAME` makes the candidate the active version (every
//! object is reconciled by it), `wasmop abort NAME` drops it. Both are changes of the
//! WasmPlugin's spec, made the same way by the command and by the host when a rollout's
//! policy decides ([`super::report`]).

use anyhow::Context;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use super::target::{Target, wait_for_verdict};
use super::wasmplugin::WasmPlugin;
use crate::operator::client;

/// The merge patch that makes the candidate of `wp` its active version; an error when it
/// has no candidate.
pub fn promote_patch(wp: &WasmPlugin) -> Result<Value, String> {
    let r = wp.spec.rollout.as_ref().ok_or_else(|| {
        format!(
            "WasmPlugin {} has no candidate (push one with `wasmop push --shadow` or `--canary`)",
            wp.metadata.name.as_deref().unwrap_or_default()
        )
    })?;
    Ok(json!({"spec": {"configMap": r.config_map, "sha256": r.sha256, "rollout": null}}))
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

/// Arguments of `wasmop promote` and `wasmop abort`.
#[derive(Debug, clap::Args)]
pub struct EndArgs {
    /// Name of the WasmPlugin.
    pub name: String,
    /// Where, and how long to wait.
    #[command(flatten)]
    pub target: Target,
}

/// Runs `wasmop promote` (or, with `promote` false, `wasmop abort`); returns whether the
/// host carried it out.
pub async fn run(args: &EndArgs, promote: bool) -> anyhow::Result<bool> {
    let client = client(args.target.kubeconfig.as_deref()).await?;
    let api: Api<WasmPlugin> = Api::namespaced(client, &args.target.namespace);
    let wp = api
        .get_opt(&args.name)
        .await
        .context("reading the WasmPlugin")?
        .ok_or_else(|| {
            anyhow::anyhow!(
                "no WasmPlugin {}/{} (wasmop push creates it)",
                args.target.namespace,
                args.name
            )
        })?;
    let patch = if promote {
        promote_patch(&wp).map_err(anyhow::Error::msg)?
    } else if wp.spec.rollout.is_none() {
        anyhow::bail!(
            "WasmPlugin {}/{} has no candidate: nothing to abort",
            args.target.namespace,
            args.name
        );
    } else {
        abort_patch()
    };
    let candidate = wp.spec.rollout.as_ref().map(|r| r.sha256.clone());
    let written = patch_spec(&api, &args.name, &patch)
        .await
        .context("changing the WasmPlugin")?;
    let what = if promote { "promoted" } else { "aborted" };
    println!(
        "{what}: WasmPlugin {}/{} {}",
        args.target.namespace,
        args.name,
        candidate.unwrap_or_default()
    );
    if args.target.no_wait {
        return Ok(true);
    }
    let generation = written.metadata.generation;
    let digest = written.spec.sha256.clone();
    wait_for_verdict(api, &args.name, &args.target, |wp| {
        super::push::verdict(wp, generation, &digest)
    })
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
                "sha256": cand, "rollout": null}})
        );
        let e = promote_patch(&wp(None)).unwrap_err();
        assert!(e.contains("has no candidate"), "{e}");
    }
}
