//! The floor: the same pods created by a bare kube-rs client, as many requests in flight as
//! the host has reconciles, and the time until kwok has them all Running. What the API
//! server, the scheduler and kwok need for the work, with no operator in between.
//!
//! Running pods are counted by a pod tracker's watch, as the host's phases are: polling lists
//! of thousands of pods every few hundred milliseconds would give the API server work of the
//! benchmark's own inside the floor.

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

use crate::tracker::Tracker;

/// The floor's pods carry `bench=floor`: the tracker counts them under the owner `floor`.
const KEY: &str = "bench";
const OWNER: &str = "floor";

/// Waits (at most 15 minutes, looking every 50 ms at the tracker's state) until `done`.
async fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(900);
    while !done() {
        assert!(Instant::now() < deadline, "floor pods never {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Creates `pods` pods with `in_flight` requests at once; the seconds until all run. They
/// stay, with the tracker that counted them: [`remove`] deletes them.
pub async fn floor(client: &Client, pods: usize, in_flight: usize) -> (f64, Tracker) {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let tracker = Tracker::start_by(client.clone(), KEY);
    let started = Instant::now();
    let failed = futures::stream::iter(0..pods)
        .map(|i| {
            let api = api.clone();
            async move {
                let pod: Pod = serde_json::from_value(json!({
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": format!("floor-{i}"), "labels": {KEY: OWNER}},
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
    wait_until(&format!("reached {pods} Running"), || {
        tracker.all_at(&[OWNER.to_string()], pods)
    })
    .await;
    (started.elapsed().as_secs_f64(), tracker)
}

/// Deletes the floor's pods, waits until `tracker` saw them all go, and stops its watch.
pub async fn remove(client: &Client, tracker: Tracker) {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    crate::operator_floor::delete_all(
        &api,
        &ListParams::default().labels(&format!("{KEY}={OWNER}")),
    )
    .await;
    wait_until("went away", || tracker.live(OWNER).is_empty()).await;
    tracker.stop();
}
