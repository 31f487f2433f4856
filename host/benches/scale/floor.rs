//! The floor: the same pods created by a bare kube-rs client, as many requests in flight as
//! the host has reconciles, and the time until kwok has them all Running. What the API
//! server, the scheduler and kwok need for the work, with no operator in between.

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

const FLOOR_LABEL: &str = "bench=floor";

/// Creates `pods` pods with `in_flight` requests at once; the seconds until all run
/// (they stay: [`remove`] deletes them).
pub async fn floor(client: &Client, pods: usize, in_flight: usize) -> f64 {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let started = Instant::now();
    let failed = futures::stream::iter(0..pods)
        .map(|i| {
            let api = api.clone();
            async move {
                let pod: Pod = serde_json::from_value(json!({
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": format!("floor-{i}"), "labels": {"bench": "floor"}},
                    "spec": {"containers": [{"name": "busybox", "image": "busybox",
                                             "command": ["sleep", "3600"]}]}
                }))
                .unwrap();
                api.create(&PostParams::default(), &pod).await.is_err()
            }
        })
        .buffer_unordered(in_flight.max(1))
        .filter(|failed| futures::future::ready(*failed))
        .count()
        .await;
    assert_eq!(failed, 0, "the floor's creates failed");
    wait_running(&api, pods).await;
    started.elapsed().as_secs_f64()
}

/// Deletes the floor's pods and waits until they are gone.
pub async fn remove(client: &Client) {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    api.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels(FLOOR_LABEL),
    )
    .await
    .unwrap();
    wait_running(&api, 0).await;
}

/// Polls until exactly `n` floor pods exist, all Running.
async fn wait_running(api: &Api<Pod>, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        let list = api
            .list_metadata(&ListParams::default().labels(FLOOR_LABEL))
            .await
            .map(|l| l.items.len());
        if let Ok(count) = list {
            let running = if count == n && n > 0 {
                api.list(
                    &ListParams::default()
                        .labels(FLOOR_LABEL)
                        .fields("status.phase=Running"),
                )
                .await
                .map_or(0, |l| l.items.len())
            } else {
                0
            };
            if count == n && (n == 0 || running == n) {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "floor pods never reached {n} Running"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
