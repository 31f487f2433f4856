//! The operator floor: the least any operator must send for the end state of convergence at
//! size 3, sent by a bare client that decides nothing. The PodReplicas applied as the
//! benchmark applies them (they are the user's requests, part of every phase), each one's
//! pods created as soon as it exists (generated names, the label, a controller owner
//! reference: the pods PodReplica creates, as many requests in flight as the host has
//! reconciles), and one status write per PodReplica once all its pods run (the status the
//! convergence check reads). No Event, no intermediate status, no CPU of an operator on the
//! cores: what the floor's pods cost plus the price of the PodReplicas themselves. The host's
//! phase at size 3 against this one is what the host adds.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::sync::{Semaphore, mpsc};

use crate::converge::{podreplica, wait_converged};
use crate::support::{apply, podreplica_resource};
use crate::tracker::{LABEL, Tracker};

/// Installs PodReplica's CRD (`deploy/crds/podreplica.yaml`, the one the host installs) so
/// that PodReplicas exist before any host runs.
pub async fn install_crd(client: &Client) {
    let path = crate::support::repo().join("deploy/crds/podreplica.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let crd: Value = serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    wasmop::k8s::crds::install_crd(client, &crd).await.unwrap();
}

/// One of PodReplica's pods for the PodReplica `pr` (as stored, with its UID).
fn pod_for(pr: &DynamicObject) -> Pod {
    let name = pr.metadata.name.clone().unwrap_or_default();
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "generateName": format!("{name}-pod-"), "namespace": "default",
            "labels": {LABEL: name},
            "ownerReferences": [{"apiVersion": "app.example.com/v1alpha1", "kind": "PodReplica",
                "name": name, "uid": pr.metadata.uid, "controller": true,
                "blockOwnerDeletion": true}],
        },
        "spec": {"containers": [{"name": "busybox", "image": "busybox",
                                 "command": ["sleep", "3600"]}]}
    }))
    .unwrap()
}

/// The one status a PodReplica gets: its running pods, Ready for its generation.
fn status_for(mut pods: Vec<String>, generation: i64) -> Value {
    pods.sort();
    let n = pods.len();
    json!({"status": {
        "pods": pods, "replicas": n, "readyReplicas": n, "observedGeneration": generation,
        "conditions": [{"type": "Ready", "status": "True", "reason": "AllPodsReady",
            "message": format!("{n}/{n} pods ready"), "observedGeneration": generation,
            "lastTransitionTime": jiff::Timestamp::now().round(jiff::Unit::Second).unwrap().to_string()}]
    }})
}

/// Runs the operator floor for `names` at `size`; the seconds until every PodReplica has
/// converged (as the host's phases are judged). Leaves nothing behind: [`remove`] runs after.
pub async fn operator_floor(
    client: &Client,
    tracker: &Tracker,
    names: &[String],
    size: usize,
    in_flight: usize,
) -> f64 {
    let prs: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &podreplica_resource());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let started = Instant::now();
    let (applied_tx, mut applied_rx) = mpsc::unbounded_channel::<DynamicObject>();
    let (created_tx, mut created_rx) = mpsc::unbounded_channel::<(String, i64)>();
    // The user's applies, 16 in flight as in the host's phases.
    let applying = {
        let client = client.clone();
        let names = names.to_vec();
        tokio::spawn(async move {
            futures::stream::iter(names)
                .map(|name| {
                    let (client, tx) = (client.clone(), applied_tx.clone());
                    async move {
                        let pr = podreplica(&name, size);
                        let stored = apply(&client, &podreplica_resource(), "default", &pr)
                            .await
                            .expect("applying a PodReplica");
                        let _ = tx.send(stored);
                    }
                })
                .buffer_unordered(16)
                .collect::<()>()
                .await;
        })
    };
    // Each PodReplica's pods, one after the other as a reconcile sends them.
    let creating = {
        let pods = pods.clone();
        tokio::spawn(
            futures::stream::poll_fn(move |cx| applied_rx.poll_recv(cx)).for_each_concurrent(
                in_flight.max(1),
                move |pr| {
                    let (pods, tx) = (pods.clone(), created_tx.clone());
                    async move {
                        for _ in 0..size {
                            pods.create(&PostParams::default(), &pod_for(&pr))
                                .await
                                .expect("creating a pod");
                        }
                        let name = pr.metadata.name.clone().unwrap_or_default();
                        let _ = tx.send((name, pr.metadata.generation.unwrap_or(1)));
                    }
                },
            ),
        )
    };
    // One status per PodReplica once all its pods run, looked for every 20 ms.
    let writes = Arc::new(Semaphore::new(in_flight.max(1)));
    let mut waiting: Vec<(String, i64)> = Vec::new();
    let mut writing = Vec::new();
    let mut done = 0;
    let deadline = Instant::now() + Duration::from_secs(900);
    while done < names.len() {
        while let Ok(c) = created_rx.try_recv() {
            waiting.push(c);
        }
        let (ready, still): (Vec<_>, Vec<_>) = waiting
            .into_iter()
            .partition(|(n, _)| tracker.all_at(std::slice::from_ref(n), size));
        waiting = still;
        for (name, generation) in ready {
            done += 1;
            let (prs, writes) = (prs.clone(), writes.clone());
            let running: BTreeSet<String> = tracker.live(&name).into_iter().collect();
            writing.push(tokio::spawn(async move {
                let _permit = writes.acquire().await.unwrap();
                let body = status_for(running.into_iter().collect(), generation);
                prs.patch_status(&name, &PatchParams::default(), &Patch::Merge(&body))
                    .await
                    .expect("writing a status");
            }));
        }
        assert!(
            Instant::now() < deadline,
            "the operator floor never converged"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    applying.await.unwrap();
    creating.await.unwrap();
    for w in writing {
        w.await.unwrap();
    }
    let done = wait_converged(client, tracker, names, size).await;
    done.duration_since(started).as_secs_f64()
}

/// Rewrites the status of every PodReplica of `names` once (the message of its condition),
/// as many writes in flight as the host has reconciles, with no operator running: the least a
/// hot swap to a version that changes every status must wait for. Seconds.
pub async fn rewrite_statuses(client: &Client, names: &[String], in_flight: usize) -> f64 {
    let prs: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &podreplica_resource());
    // Every PodReplica was created by the operator floor: generation 1.
    let body = json!({"status": {"conditions": [{"type": "Ready", "status": "True",
        "reason": "AllPodsReady", "message": "rewritten by the benchmark", "observedGeneration": 1,
        "lastTransitionTime": jiff::Timestamp::now().round(jiff::Unit::Second).unwrap().to_string()}]}});
    let started = Instant::now();
    futures::stream::iter(names.iter().cloned())
        .map(|name| {
            let (prs, body) = (prs.clone(), &body);
            async move {
                prs.patch_status(&name, &PatchParams::default(), &Patch::Merge(body))
                    .await
                    .expect("rewriting a status");
            }
        })
        .buffer_unordered(in_flight.max(1))
        .collect::<()>()
        .await;
    started.elapsed().as_secs_f64()
}

/// Deletes every object `lp` selects. One deletecollection of ten thousand pods outlasts
/// the API server's request timeout (the connection closes mid-way, the deletion goes on
/// server-side): sent again until one returns, at most ten times.
pub async fn delete_all<K>(api: &Api<K>, lp: &ListParams)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    for attempt in 1..=10 {
        match api.delete_collection(&DeleteParams::default(), lp).await {
            Ok(_) => return,
            Err(e) => println!("deletecollection {attempt} cut short ({e}); again"),
        }
    }
    panic!("deletecollection never returned in ten attempts");
}

/// Deletes the operator floor's PodReplicas and pods and waits until the tracker saw every
/// pod go and no PodReplica is left.
pub async fn remove(client: &Client, tracker: &Tracker, names: &[String]) {
    let prs: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &podreplica_resource());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    delete_all(&pods, &ListParams::default().labels(LABEL)).await;
    delete_all(&prs, &ListParams::default()).await;
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let left = prs
            .list_metadata(&ListParams::default())
            .await
            .map_or(usize::MAX, |l| l.items.len());
        if left == 0 && names.iter().all(|n| tracker.live(n).is_empty()) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the operator floor's objects never went away"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
