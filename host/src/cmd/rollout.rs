//! Ending a rollout: `wasmop promote NAME` makes the candidate the active version (every
//! object is reconciled by it), `wasmop abort NAME` drops it. Both are changes of the
//! WasmPlugin's spec, made the same way by the command and by the host when a rollout's
//! policy decides ([`crate::registry::report`]).

use anyhow::Context;
use kube::api::Api;

use crate::cmd::target::{Target, wait_for_verdict};
use crate::registry::promotion::{abort_patch, patch_spec, promote_patch};
use crate::registry::wasmplugin::WasmPlugin;

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
    let crate::cmd::target::Connection {
        client, namespace, ..
    } = args.target.cluster.connect().await?;
    let api: Api<WasmPlugin> = Api::namespaced(client, &namespace);
    let wp = api
        .get_opt(&args.name)
        .await
        .context("reading the WasmPlugin")?
        .ok_or_else(|| {
            anyhow::anyhow!(
                "no WasmPlugin {}/{} (wasmop push creates it)",
                namespace,
                args.name
            )
        })?;
    let patch = if promote {
        promote_patch(&wp).map_err(anyhow::Error::msg)?
    } else if wp.spec.rollout.is_none() {
        anyhow::bail!(
            "WasmPlugin {}/{} has no candidate: nothing to abort",
            namespace,
            args.name
        );
    } else {
        abort_patch()
    };
    let candidate = wp.spec.rollout.as_ref().map(|r| {
        r.sha256
            .clone()
            .or_else(|| r.oci.as_ref().map(|o| o.reference.clone()))
            .unwrap_or_default()
    });
    let written = patch_spec(&api, &args.name, &patch)
        .await
        .context("changing the WasmPlugin")?;
    let what = if promote { "promoted" } else { "aborted" };
    println!(
        "{what}: WasmPlugin {}/{} {}",
        namespace,
        args.name,
        candidate.unwrap_or_default()
    );
    if args.target.no_wait {
        return Ok(true);
    }
    let generation = written.metadata.generation;
    let digest = written.spec.sha256.clone();
    wait_for_verdict(api, &args.name, &namespace, &args.target, |wp| {
        crate::cmd::push::verdict(wp, generation, digest.as_deref())
    })
    .await
}
