//! What a test prints when the cluster did not get where it waited for: the pods by phase
//! and node, and each node's readiness and taints (a stalled scheduler or a NotReady fake
//! node looks like a stuck operator otherwise).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Client;
use kube::api::{Api, ListParams};

/// A few lines on the pods labelled `label` in `ns` and on every node.
pub async fn pods_and_nodes(client: &Client, ns: &str, label: &str) -> String {
    let mut out = String::new();
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    match pods.list(&ListParams::default().labels(label)).await {
        Ok(list) => {
            let mut by_phase: BTreeMap<String, usize> = BTreeMap::new();
            let (mut unscheduled, mut terminating) = (0, 0);
            for p in &list.items {
                let phase = p.status.as_ref().and_then(|s| s.phase.clone());
                *by_phase
                    .entry(phase.unwrap_or_else(|| "-".into()))
                    .or_default() += 1;
                unscheduled +=
                    usize::from(p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_none());
                terminating += usize::from(p.metadata.deletion_timestamp.is_some());
            }
            out += &format!(
                "pods labelled {label}: {} ({by_phase:?}; {unscheduled} without a node, {terminating} terminating)\n",
                list.items.len()
            );
        }
        Err(e) => out += &format!("pods labelled {label}: list failed: {e}\n"),
    }
    let nodes: Api<Node> = Api::all(client.clone());
    match nodes.list(&ListParams::default()).await {
        Ok(list) => {
            for n in list.items {
                let status = n.status.unwrap_or_default();
                let ready = status
                    .conditions
                    .unwrap_or_default()
                    .into_iter()
                    .find(|c| c.type_ == "Ready")
                    .map(|c| format!("Ready={} ({})", c.status, c.reason.unwrap_or_default()))
                    .unwrap_or_else(|| "no Ready condition".into());
                let taints: Vec<String> = n
                    .spec
                    .and_then(|s| s.taints)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|t| format!("{}:{}", t.key, t.effect))
                    .collect();
                out += &format!(
                    "node {}: {ready}, taints {taints:?}\n",
                    n.metadata.name.unwrap_or_default()
                );
            }
        }
        Err(e) => out += &format!("nodes: list failed: {e}\n"),
    }
    out
}
