//! Clients of the API server: from `--kubeconfig` or the usual inference, naming the host in
//! `User-Agent`, and the fenced client every write of the host goes through (the fence,
//! request counting, and the API server's requests to retry honoured above the fence).

use std::sync::Arc;

use crate::k8s::fence::{Fence, FenceLayer};
use crate::k8s::requests::{CountLayer, StatusLayer};
use crate::k8s::retry::SafeRetry;
use crate::telemetry::metrics::Metrics;

/// The client configuration from `--kubeconfig`, else the usual inference (in-cluster
/// inside a pod, `$KUBECONFIG` or `~/.kube/config` outside).
/// Every request says it comes from wasmop (`User-Agent: wasmop/VERSION`), as
/// controller-runtime's managers name themselves: the API server's audit log and metrics
/// tell the host's requests from any other client's of the same account.
pub(crate) async fn client_config(
    kubeconfig: Option<&std::path::Path>,
) -> anyhow::Result<kube::Config> {
    cli_config(kubeconfig, None).await
}

/// [`client_config`] with kubectl's `--context` (a context of the kubeconfig other than its
/// current one).
pub(crate) async fn cli_config(
    kubeconfig: Option<&std::path::Path>,
    context: Option<&str>,
) -> anyhow::Result<kube::Config> {
    let options = kube::config::KubeConfigOptions {
        context: context.map(str::to_owned),
        ..Default::default()
    };
    let mut config = match (kubeconfig, context) {
        (Some(path), _) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &options)
                .await
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
        }
        (None, Some(_)) => kube::Config::from_kubeconfig(&options).await?,
        (None, None) => kube::Config::infer().await?,
    };
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(USER_AGENT),
    ));
    Ok(config)
}

/// The host's `User-Agent`.
pub const USER_AGENT: &str = concat!("wasmop/", env!("CARGO_PKG_VERSION"));

/// A Kubernetes client from `--kubeconfig`, else the usual inference (in-cluster inside a
/// pod, `$KUBECONFIG` or `~/.kube/config` outside).
pub async fn client(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<kube::Client> {
    Ok(kube::Client::try_from(client_config(kubeconfig).await?)?)
}

/// A client whose writes pass `fence` (reads and watches always pass). Its requests are
/// counted by verb in `metrics` (refused writes included), and the status code of a write
/// sent from a `write` span is recorded on it ([`StatusLayer`]). What the API server asks to
/// have retried is retried above the fence, so every attempt passes it, and a create is
/// never repeated after a timeout ([`SafeRetry`]).
pub async fn fenced_client(
    kubeconfig: Option<&std::path::Path>,
    fence: Arc<Fence>,
    metrics: Arc<Metrics>,
) -> anyhow::Result<kube::Client> {
    fenced_client_from(client_config(kubeconfig).await?, fence, metrics)
}

/// [`fenced_client`] from a configuration (a plugin's, impersonating its ServiceAccount).
pub fn fenced_client_from(
    mut config: kube::Config,
    fence: Arc<Fence>,
    metrics: Arc<Metrics>,
) -> anyhow::Result<kube::Client> {
    config.default_retry = false;
    // The retry layer needs a service it can clone; kube's stack is boxed, hence the buffer.
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&tower::buffer::BufferLayer::new(1024))
        .with_layer(&FenceLayer(fence))
        .with_layer(&CountLayer(metrics))
        .with_layer(&StatusLayer)
        .with_layer(&tower::retry::RetryLayer::new(SafeRetry::new()))
        .build())
}
