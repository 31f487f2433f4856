//! `wasmop push NAME FILE.wasm`: uploads a plugin version into the cluster (a ConfigMap
//! with the compressed bytes and a `WasmPlugin` pointing at them), then waits for the
//! host's verdict.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

use super::bytes::pack;
use super::wasmplugin::{DEFAULT_KEY, WasmPlugin};
use crate::operator::client;
use crate::runtime::validate::is_dns_label;

/// Arguments of `wasmop push`.
#[derive(Debug, clap::Args)]
pub struct PushArgs {
    /// Name of the WasmPlugin (a DNS label; the ConfigMap is `wasmplugin-NAME`).
    pub name: String,
    /// The plugin component (`.wasm`).
    pub file: PathBuf,
    /// Namespace the host reads WasmPlugins from.
    #[arg(
        long,
        short = 'n',
        env = "WASMOP_PLUGIN_NAMESPACE",
        default_value = "default"
    )]
    pub namespace: String,
    /// Kubeconfig file (default: `$KUBECONFIG` or `~/.kube/config`).
    #[arg(long, env = "WASMOP_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Do not wait for the host's verdict.
    #[arg(long)]
    pub no_wait: bool,
    /// How long to wait for the verdict, in seconds.
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
}

/// Runs `wasmop push`; returns whether the host accepted the version (true with `--no-wait`).
pub async fn run(args: &PushArgs) -> anyhow::Result<bool> {
    if !is_dns_label(&args.name) {
        anyhow::bail!(
            "`{}` is not a valid name: lowercase letters, digits and '-', at most 63",
            args.name
        );
    }
    let component = std::fs::read(&args.file)
        .with_context(|| format!("{}: cannot read", args.file.display()))?;
    let (compressed, digest) =
        pack(&component).map_err(|e| anyhow::anyhow!("{}: {e}", args.file.display()))?;
    let client = client(args.kubeconfig.as_deref()).await?;
    let cm_name = format!("wasmplugin-{}", args.name);
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(cm_name.clone()),
            namespace: Some(args.namespace.clone()),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/managed-by".into(),
                "wasmop".into(),
            )])),
            ..ObjectMeta::default()
        },
        binary_data: Some(BTreeMap::from([(
            DEFAULT_KEY.to_string(),
            ByteString(compressed.clone()),
        )])),
        ..ConfigMap::default()
    };
    let pp = PatchParams::apply("wasmop-push").force();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &args.namespace);
    cms.patch(&cm_name, &pp, &Patch::Apply(&cm))
        .await
        .context("writing the ConfigMap")?;
    let wps: Api<WasmPlugin> = Api::namespaced(client.clone(), &args.namespace);
    let wp = json!({"apiVersion": "wasmop.dev/v1alpha1", "kind": "WasmPlugin",
        "metadata": {"name": args.name, "namespace": args.namespace},
        "spec": {"configMap": {"name": cm_name, "key": DEFAULT_KEY}, "sha256": digest}});
    let written = wps
        .patch(&args.name, &pp, &Patch::Apply(&wp))
        .await
        .context("writing the WasmPlugin")?;
    println!(
        "pushed {} ({} bytes, {} compressed) as WasmPlugin {}/{} with {digest}",
        args.file.display(),
        component.len(),
        compressed.len(),
        args.namespace,
        args.name
    );
    if args.no_wait {
        return Ok(true);
    }
    let generation = written.metadata.generation;
    // A watch, not a poll: the verdict is printed the moment the host writes it.
    let config = watcher::Config::default().fields(&format!("metadata.name={}", args.name));
    let verdicts = watcher(wps, config)
        .default_backoff()
        .applied_objects()
        .filter_map(|wp| {
            futures::future::ready(wp.ok().and_then(|wp| verdict(&wp, generation, &digest)))
        });
    let mut verdicts = std::pin::pin!(verdicts);
    match tokio::time::timeout(Duration::from_secs(args.timeout), verdicts.next()).await {
        Ok(Some((accepted, line))) => {
            println!("{line}");
            Ok(accepted)
        }
        _ => anyhow::bail!(
            "no verdict from the host within {} s (is `wasmop run` watching namespace `{}`?)",
            args.timeout,
            args.namespace
        ),
    }
}

/// The host's verdict on `generation` of the WasmPlugin, if it has written one: accepted
/// (with the pushed `digest` running) or refused, and the line to print.
fn verdict(wp: &WasmPlugin, generation: Option<i64>, digest: &str) -> Option<(bool, String)> {
    let status = wp
        .status
        .as_ref()
        .filter(|s| s.observed_generation == generation)?;
    let c = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready" && c.observed_generation == generation)?;
    if c.status == "True" && status.digest.as_deref() == Some(digest) {
        return Some((true, format!("accepted: {}", c.message)));
    }
    (c.status == "False").then(|| (false, format!("refused: {}: {}", c.reason, c.message)))
}
