//! Installing the CRDs the plugins declare (`--install-crds`).

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::Value;

/// Creates or updates `crd` by server-side apply and waits until it is established.
pub async fn install_crd(client: &Client, crd: &Value) -> anyhow::Result<()> {
    let name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow::anyhow!("CRD without a name"))?;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    api.patch(
        name,
        &PatchParams::apply("wasmop").force(),
        &Patch::Apply(crd),
    )
    .await
    .map_err(|e| anyhow::anyhow!("installing CRD {name}: {e}"))?;
    for _ in 0..100 {
        let current = api.get(name).await?;
        let established = current
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        if established {
            tracing::info!(crd = name, "CRD installed and established");
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("CRD {name} was not established within 10 s")
}
