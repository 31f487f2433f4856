//! Convergence: PodReplicas applied at once (or all rescaled), and the time until every one
//! has its pods Running and a status that lists them for its latest generation.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
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
/// seconds from the first apply to the watch event that completed the convergence.
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
    let done = wait_converged(client, tracker, names, size).await;
    done.duration_since(started).as_secs_f64()
}

/// Waits (at most 15 minutes) until every PodReplica has `size` live Running pods and says
/// so in its status, for its current generation; returns the instant of the last watch
/// event that made it so (a PodReplica's status, or a pod's). Seen through watches: the
/// pod tracker's and one of the PodReplicas, no list while it waits (a poll would load the
/// control plane it measures, longest for the slowest contender).
pub async fn wait_converged(
    client: &Client,
    tracker: &Tracker,
    names: &[String],
    size: usize,
) -> Instant {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &podreplica_resource());
    let wanted: HashSet<&str> = names.iter().map(String::as_str).collect();
    // Each PodReplica whose status says it has converged, with when the watch showed that.
    let mut done: HashMap<String, Instant> = HashMap::new();
    let mut events = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        if done.len() == wanted.len() && tracker.all_at(names, size) {
            let statuses = done.values().copied().max();
            let pods = names.iter().filter_map(|n| tracker.changed_at(n)).max();
            return statuses
                .into_iter()
                .chain(pods)
                .max()
                .unwrap_or_else(Instant::now);
        }
        assert!(
            Instant::now() < deadline,
            "PodReplicas never converged to {size}"
        );
        tokio::select! {
            event = events.next() => match event {
                // A relist starts the view anew.
                Some(Ok(watcher::Event::Init)) => done.clear(),
                Some(Ok(watcher::Event::Apply(pr) | watcher::Event::InitApply(pr))) => {
                    let at = Instant::now();
                    let name = pr.metadata.name.clone().unwrap_or_default();
                    if !wanted.contains(name.as_str()) {
                        continue;
                    }
                    if status_says(&pr, size) {
                        done.entry(name).or_insert(at);
                    } else {
                        done.remove(&name);
                    }
                }
                Some(Ok(watcher::Event::Delete(pr))) => {
                    done.remove(pr.metadata.name.as_deref().unwrap_or_default());
                }
                Some(Ok(watcher::Event::InitDone)) | Some(Err(_)) => {}
                None => panic!("the PodReplica watch ended"),
            },
            // The pod tracker changes in memory: looked at again shortly (no request).
            () = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
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
