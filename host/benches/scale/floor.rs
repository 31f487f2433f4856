//! The floor: the same pods created by a bare kube-rs client, as many requests in flight as
//! the host has reconciles, and the time until kwok has them all Running. What the API
//! server, the scheduler and kwok need for the work, with no operator in between.
//!
//! Running pods are counted by a watch started before the first create, as the host's
//! phases are (by the pod tracker's watch): polling lists of thousands of pods every few
//! hundred milliseconds would give the API server work of the benchmark's own inside the
//! floor.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use tokio::sync::watch;

const FLOOR_LABEL: &str = "bench=floor";

/// The floor's pods (not terminating) and how many of them run, once the watch has listed;
/// the watch stops when this is dropped.
struct Counts {
    counts: watch::Receiver<Option<(usize, usize)>>,
    watching: tokio::task::JoinHandle<()>,
}

impl Drop for Counts {
    fn drop(&mut self) {
        self.watching.abort();
    }
}

/// Counts the floor's pods and the Running ones, from one watch.
fn count_pods(client: &Client) -> Counts {
    let (tx, counts) = watch::channel(None);
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let watching = tokio::spawn(async move {
        let mut events = watcher(api, watcher::Config::default().labels(FLOOR_LABEL))
            .default_backoff()
            .boxed();
        let (mut live, mut running) = (HashSet::new(), HashSet::new());
        while let Some(e) = events.next().await {
            match e {
                Ok(watcher::Event::Apply(p)) | Ok(watcher::Event::InitApply(p)) => {
                    let name = p.metadata.name.clone().unwrap_or_default();
                    let runs =
                        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
                    if p.metadata.deletion_timestamp.is_some() {
                        live.remove(&name);
                        running.remove(&name);
                    } else {
                        live.insert(name.clone());
                        if runs {
                            running.insert(name);
                        } else {
                            running.remove(&name);
                        }
                    }
                }
                Ok(watcher::Event::Delete(p)) => {
                    let name = p.metadata.name.unwrap_or_default();
                    live.remove(&name);
                    running.remove(&name);
                }
                // Counted once the first list is complete, then at every change.
                Ok(watcher::Event::InitDone) => {}
                _ => continue,
            }
            if tx.send(Some((live.len(), running.len()))).is_err() {
                return;
            }
        }
    });
    Counts { counts, watching }
}

/// Waits (at most 15 minutes) until the count says `ok`.
async fn wait_for(counts: &mut Counts, what: &str, ok: impl Fn(usize, usize) -> bool) {
    tokio::time::timeout(
        Duration::from_secs(900),
        counts
            .counts
            .wait_for(|c| c.is_some_and(|(live, running)| ok(live, running))),
    )
    .await
    .unwrap_or_else(|_| panic!("floor pods never {what}"))
    .expect("the floor's pod watch ended");
}

/// Creates `pods` pods with `in_flight` requests at once; the seconds until all run
/// (they stay: [`remove`] deletes them).
pub async fn floor(client: &Client, pods: usize, in_flight: usize) -> f64 {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut counts = count_pods(client);
    // The watch has listed (nothing yet) before the clock starts.
    wait_for(&mut counts, "listed", |_, _| true).await;
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
    wait_for(
        &mut counts,
        &format!("reached {pods} Running"),
        |live, running| live == pods && running == pods,
    )
    .await;
    started.elapsed().as_secs_f64()
}

/// Deletes the floor's pods and waits until they are gone.
pub async fn remove(client: &Client) {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut counts = count_pods(client);
    api.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels(FLOOR_LABEL),
    )
    .await
    .unwrap();
    wait_for(&mut counts, "went away", |live, _| live == 0).await;
}
