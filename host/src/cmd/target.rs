//! What the commands that reach a cluster share (`wasmop push`, `promote`, `abort`,
//! `status`): kubectl's flags for the cluster and namespace ([`Cluster`], so that
//! `kubectl wasmop ...` takes the flags kubectl users type), and the wait for the host's
//! verdict.

use std::path::PathBuf;
use std::time::Duration;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};

use crate::registry::wasmplugin::WasmPlugin;

/// The cluster and namespace a command talks to, with kubectl's flags and defaults.
#[derive(Debug, Clone, clap::Args)]
pub struct Cluster {
    /// Namespace of the WasmPlugins (the one the host reads them from); default: the
    /// kubeconfig context's namespace, else `default`.
    #[arg(long, short = 'n', env = "WASMOP_PLUGIN_NAMESPACE")]
    pub namespace: Option<String>,
    /// Kubeconfig file (default: `$KUBECONFIG` or `~/.kube/config`).
    #[arg(long, env = "WASMOP_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long)]
    pub context: Option<String>,
}

/// A client of the chosen context, where it points and the namespace to act in.
pub struct Connection {
    /// The client.
    pub client: kube::Client,
    /// The namespace to act in.
    pub namespace: String,
    /// The API server's URL, for messages.
    pub server: String,
}

impl Cluster {
    /// A client of the chosen context, and the namespace to act in.
    pub async fn connect(&self) -> anyhow::Result<Connection> {
        let config =
            crate::k8s::client::cli_config(self.kubeconfig.as_deref(), self.context.as_deref())
                .await?;
        let namespace = self
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        let server = config.cluster_url.to_string();
        Ok(Connection {
            client: kube::Client::try_from(config)?,
            namespace,
            server,
        })
    }
}

/// Where a WasmPlugin command acts, and how long it waits for the host.
#[derive(Debug, Clone, clap::Args)]
pub struct Target {
    /// The cluster and namespace.
    #[command(flatten)]
    pub cluster: Cluster,
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
    namespace: &str,
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
            namespace
        ),
    }
}
