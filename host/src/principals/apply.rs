//! Applying the RBAC of [`crate::principals::manifest`] with a client (server-side apply): what
//! `wasmop dev` does for the plugin it develops, acting as the developer, since on their own
//! control plane the developer is the admin who approves.

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::Value;

fn resource_of(kind: &str) -> Option<(ApiResource, bool)> {
    let (group, version, plural, namespaced) = match kind {
        "ServiceAccount" => ("", "v1", "serviceaccounts", true),
        "Role" => ("rbac.authorization.k8s.io", "v1", "roles", true),
        "RoleBinding" => ("rbac.authorization.k8s.io", "v1", "rolebindings", true),
        "ClusterRole" => ("rbac.authorization.k8s.io", "v1", "clusterroles", false),
        "ClusterRoleBinding" => (
            "rbac.authorization.k8s.io",
            "v1",
            "clusterrolebindings",
            false,
        ),
        _ => return None,
    };
    Some((
        ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: if group.is_empty() {
                version.into()
            } else {
                format!("{group}/{version}")
            },
            kind: kind.into(),
            plural: plural.into(),
        },
        namespaced,
    ))
}

/// Applies `docs` (ServiceAccounts, Roles, bindings) in order.
pub async fn apply(client: &Client, docs: &[Value]) -> anyhow::Result<()> {
    for doc in docs {
        let kind = doc["kind"].as_str().unwrap_or_default();
        let name = doc["metadata"]["name"].as_str().unwrap_or_default();
        let (ar, namespaced) =
            resource_of(kind).ok_or_else(|| anyhow::anyhow!("unexpected kind {kind}"))?;
        let api: Api<DynamicObject> = match (namespaced, doc["metadata"]["namespace"].as_str()) {
            (true, Some(ns)) => Api::namespaced_with(client.clone(), ns, &ar),
            _ => Api::all_with(client.clone(), &ar),
        };
        api.patch(
            name,
            &PatchParams::apply("wasmop-rbac").force(),
            &Patch::Apply(doc),
        )
        .await
        .map_err(|e| anyhow::anyhow!("applying {kind} {name}: {e}"))?;
    }
    Ok(())
}
