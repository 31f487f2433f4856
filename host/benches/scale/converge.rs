//! Convergence: PodReplicas applied at once (or all rescaled), and the time until every one
//! has its pods Running and a status that lists them for its latest generation.

use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};
use serde_json::json;

use crate::support::{apply, podreplica_resource};
use crate::tracker::Tracker;

/// The names of `n` PodReplicas.
pub fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("pr-{i}")).collect()
}

/// The PodReplica `name` of namespace `default` at `size`, as the benchmark applies it.
pub fn podreplica(name: &str, size: usize) -> serde_json::Value {
    json!({"apiVersion": "app.example.com/v1alpha1", "kind": "PodReplica",
        "metadata": {"name": name, "namespace": "default"}, "spec": {"size": size}})
}

/// Applies every PodReplica of `names` with `size` (16 requests in flight); returns the
/// seconds until all have converged.
pub async fn apply_and_converge(
    client: &Client,
    tracker: &Tracker,
    names: &[String],
    size: usize,
) -> f64 {
    let started = Instant::now();
    let ar = podreplica_resource();
    let failed = futures::stream::iter(names.iter().cloned())
        .map(|name| {
            let (client, ar) = (client.clone(), ar.clone());
            async move {
                apply(&client, &ar, "default", &podreplica(&name, size))
                    .await
                    .is_err()
            }
        })
        .buffer_unordered(16)
        .filter(|f| futures::future::ready(*f))
        .count()
        .await;
    assert_eq!(failed, 0, "applying PodReplicas failed");
    wait_converged(client, tracker, names, size).await;
    started.elapsed().as_secs_f64()
}

/// Waits (at most 15 minutes) until every PodReplica has `size` live Running pods and says
/// so in its status, for its current generation.
pub async fn wait_converged(client: &Client, tracker: &Tracker, names: &[String], size: usize) {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &podreplica_resource());
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        if tracker.all_at(names, size)
            && let Ok(list) = api.list(&ListParams::default()).await
            && list.items.len() >= names.len()
            && list.items.iter().all(|pr| status_says(pr, size))
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "PodReplicas never converged to {size}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The status lists `size` pods and is Ready for the object's generation.
fn status_says(pr: &DynamicObject, size: usize) -> bool {
    let st = &pr.data["status"];
    let generation = pr.metadata.generation.unwrap_or(0);
    let pods = st["pods"].as_array().map_or(0, Vec::len);
    let ready = st["conditions"].as_array().is_some_and(|cs| {
        cs.iter().any(|c| {
            c["type"] == "Ready" && c["status"] == "True" && c["observedGeneration"] == generation
        })
    });
    pods == size && ready
}
