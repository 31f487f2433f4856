//! What the commands that change a WasmPlugin share (`wasmop push`, `promote`, `abort`): the
//! namespace and kubeconfig they reach the cluster with, and the wait for the host's verdict.

use std::path::PathBuf;
use std::time::Duration;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};

use crate::registry::wasmplugin::WasmPlugin;

/// Where a WasmPlugin command acts, and how long it waits for the host.
#[derive(Debug, Clone, clap::Args)]
pub struct Target {
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

/// Watches WasmPlugin `name` until `verdict` finds the host's answer in it, prints its line
/// and returns whether it was a yes; an error after `target.timeout`. A watch, not a poll:
/// the verdict is printed the moment the host writes it.
pub async fn wait_for_verdict(
    api: Api<WasmPlugin>,
    name: &str,
    target: &Target,
    verdict: impl Fn(&WasmPlugin) -> Option<(bool, String)>,
) -> anyhow::Result<bool> {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let verdicts = watcher(api, config)
        .default_backoff()
        .applied_objects()
        .filter_map(|wp| futures::future::ready(wp.ok().and_then(|wp| verdict(&wp))));
    let mut verdicts = std::pin::pin!(verdicts);
    match tokio::time::timeout(Duration::from_secs(target.timeout), verdicts.next()).await {
        Ok(Some((yes, line))) => {
            println!("{line}");
            Ok(yes)
        }
        _ => anyhow::bail!(
            "no verdict from the host within {} s (is `wasmop run` watching namespace `{}`?)",
            target.timeout,
            target.namespace
        ),
    }
}
