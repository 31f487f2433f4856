//! What the host waits for before it starts its plugins: an API server that answers, and
//! (with `--install-crds`) the CRDs of the WasmPlugin and of the plugins' primary kinds.

use std::time::Duration;

use tokio::sync::watch;

use crate::app::RunArgs;
use crate::runtime::{Limits, Sandbox};

/// Waits until the API server answers `/version`, asking again with a pause that grows
/// from 0.5 s to 10 s; `false` if shutdown came first.
pub(crate) async fn reachable(client: &kube::Client, mut shutdown: watch::Receiver<bool>) -> bool {
    let mut pause = Duration::from_millis(500);
    let mut asked = 0u32;
    loop {
        let answer = tokio::time::timeout(Duration::from_secs(5), client.apiserver_version());
        let error = match answer.await {
            Ok(Ok(_)) => return true,
            Ok(Err(e)) => e.to_string(),
            Err(_) => "no answer within 5 s".to_string(),
        };
        asked += 1;
        if asked == 1 || asked.is_power_of_two() {
            tracing::warn!(error = %error, asked, "the API server does not answer yet: waiting for it");
        }
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            _ = shutdown.wait_for(|s| *s) => return false,
        }
        pause = (pause * 2).min(Duration::from_secs(10));
    }
}

/// Installs the WasmPlugin CRD and the CRD each plugin file of the plugins directory
/// declares (a file that does not load is logged and skipped).
pub(crate) async fn install_crds(
    args: &RunArgs,
    client: &kube::Client,
    sandbox: &Sandbox,
    limits: Limits,
) -> anyhow::Result<()> {
    use kube::CustomResourceExt;
    let crd = serde_json::to_value(crate::registry::WasmPlugin::crd())?;
    crate::k8s::crds::install_crd(client, &crd).await?;
    for path in crate::registry::files::plugin_files(&args.plugins)? {
        let bytes = tokio::fs::read(&path).await?;
        match sandbox.load_async(bytes, limits).await {
            Ok(p) => {
                if let Some(crd) = &p.info.crd {
                    crate::k8s::crds::install_crd(client, crd).await?;
                }
            }
            Err(e) => tracing::error!(file = %path.display(), error = %e, "plugin refused"),
        }
    }
    Ok(())
}
