//! End to end at size: 3,000 unrelated pods and 300 PodReplicas of size 3 in one namespace,
//! so that the host's first pod list is slow enough to lose a race. A sampler watches every
//! change of the PodReplicas' pods for the whole test and records, per PodReplica, the most
//! live pods ever seen at once. Through a cold start, a SIGKILL
//! restart after which an upload starts PodReplica's pod cache beside ChaosPod's (ChaosPod
//! reads the metadata of every pod of the namespace, 3,900; PodReplica the phase and
//! conditions of the pods labelled with their controller, 900, listed while they exist),
//! an uploaded version that restarts the controller, an API server restart, a
//! failover to a warm standby and a storm of refused creates and deletes (each time a pod
//! cache starts empty, relists, or acts on failed writes while 900 owned pods exist), no
//! PodReplica ever has more live pods than its size, every one converges, no finalizer is
//! left, and the WasmPlugin's status names the version that runs.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::support::fleet::*;
use crate::support::storm::Storm;
use crate::support::uploads::{push, wasmplugin_resource};
use crate::support::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use serde_json::json;

const UNRELATED: usize = 3000;
/// The label the host puts on what it makes of an owned kind (its owned caches select on it).
const CONTROLLER: &str = "shard.wasmop.dev/controller";
const REPLICAS: usize = 300;
const SIZE: usize = 3;

async fn create_unrelated(client: &Client) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let started = Instant::now();
    let results: Vec<_> = futures::stream::iter(0..UNRELATED)
        .map(|i| {
            let pods = pods.clone();
            async move {
                let pod: Pod = serde_json::from_value(json!({
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": format!("unrelated-{i}"), "labels": {"e2e": "unrelated"}},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]}
                }))
                .unwrap();
                pods.create(&PostParams::default(), &pod).await
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let failed = results.iter().filter(|r| r.is_err()).count();
    assert_eq!(failed, 0, "{failed} unrelated pods were not created");
    println!(
        "{UNRELATED} unrelated pods created in {:?}",
        started.elapsed()
    );
}

/// Waits until every PodReplica has exactly `SIZE` live pods, all Running.
async fn all_converged(client: &Client, uids: &[String], what: &str) {
    all_converged_at(client, uids, SIZE, what).await;
}

/// Sets every PodReplica's size (never above `SIZE`; the sampler's bound is set to it first).
async fn scale_all(client: &Client, size: usize) {
    assert!(size <= SIZE);
    let ar = podreplica_resource();
    for i in 0..REPLICAS {
        let pr = json!({"apiVersion": "app.example.com/v1alpha1", "kind": "PodReplica",
            "metadata": {"name": format!("pr-{i}"), "namespace": "default"},
            "spec": {"size": size}});
        apply(client, &ar, "default", &pr).await.unwrap();
    }
}

/// Every PodReplica's Ready condition names the plugin version `tag` (say "(v3)").
async fn all_decided_by(client: &Client, tag: &str) -> Option<()> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &podreplica_resource());
    let list = api.list(&ListParams::default()).await.ok()?;
    list.items
        .iter()
        .all(|pr| {
            pr.data["status"]["conditions"]
                .as_array()
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["message"].as_str().is_some_and(|m| m.contains(tag)))
                })
        })
        .then_some(())
}

/// The WasmPlugin `podreplica` says Ready=True for `version`, with the digest of `file`.
async fn wasmplugin_says(client: &Client, version: &str, file: &str) -> Option<()> {
    use sha2::Digest;
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &wasmplugin_resource());
    let wp = api.get("podreplica").await.ok()?;
    let st = &wp.data["status"];
    let digest = format!(
        "sha256:{}",
        hex::encode(sha2::Sha256::digest(
            std::fs::read(plugin_dir().join(file)).ok()?
        ))
    );
    let ready = st["conditions"]
        .as_array()?
        .iter()
        .any(|c| c["type"] == "Ready" && c["status"] == "True");
    (ready && st["pluginVersion"] == version && st["digest"] == digest.as_str()).then_some(())
}

/// Every PodReplica's status counts `size` ready pods: it read its pods' conditions.
async fn all_ready_in_status(client: &Client, size: usize) -> Option<()> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &podreplica_resource());
    let list = api.list(&ListParams::default()).await.ok()?;
    list.items
        .iter()
        .all(|pr| pr.data["status"]["readyReplicas"] == size)
        .then_some(())
}

/// The host's pod caches from its metrics: per cache (its label selector), the pods it holds
/// and the plugins reading it.
fn pod_caches(host: &Host) -> HashMap<String, (usize, usize)> {
    let (_, text) = host.http_get("/metrics").unwrap_or_default();
    let mut caches: HashMap<String, (usize, usize)> = HashMap::new();
    for line in text.lines() {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Some(labels) = series
            .strip_prefix("wasmop_cached_objects{")
            .map(|l| (l, true))
            .or_else(|| {
                series
                    .strip_prefix("wasmop_cache_subscribers{")
                    .map(|l| (l, false))
            })
        else {
            continue;
        };
        if !labels.0.contains("resource=\"pods.\"") {
            continue;
        }
        let selector = labels.0.split("selector=\"").nth(1).unwrap_or("");
        let selector = selector.split('"').next().unwrap_or("").to_string();
        let n = value.parse().unwrap_or(0);
        let entry = caches.entry(selector).or_default();
        if labels.1 {
            entry.0 = n;
        } else {
            entry.1 = n;
        }
    }
    caches
}

/// Objects of the test carrying any finalizer (none may be left behind).
async fn finalizers_left(client: &Client) -> usize {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let prs: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &podreplica_resource());
    let pods = pods
        .list(&ListParams::default().labels(LABEL))
        .await
        .unwrap()
        .items;
    let prs = prs.list(&ListParams::default()).await.unwrap().items;
    pods.iter()
        .map(|p| &p.metadata)
        .chain(prs.iter().map(|p| &p.metadata))
        .filter(|m| m.finalizers.as_ref().is_some_and(|f| !f.is_empty()))
        .count()
}

#[tokio::test(flavor = "multi_thread")]
async fn no_podreplica_ever_has_more_pods_than_its_size_at_size() {
    let cluster = Cluster::start_with_node_pods("size", 2000);
    let client = cluster.client().await;
    let phase = Phase::default();
    phase.set("cold start");
    let sampler = Sampler::start(client.clone(), phase.clone(), SIZE);

    // Cold start: the host starts with the namespace already full. ChaosPod relates to the
    // pods too: the two plugins share one pod cache.
    let mut host = Host::start(&cluster, &["podreplica.wasm", "chaospod.wasm"], &[], &[]);
    wait_for_crd(&client, &podreplica_resource()).await;
    create_unrelated(&client).await;
    let uids = apply_replicas(&client, REPLICAS, SIZE).await;
    all_converged(&client, &uids, "300 PodReplicas x 3 converged").await;

    // SIGKILL and restart: 900 owned pods exist, the new host's pod caches start empty. It
    // starts with ChaosPod alone (every pod of the namespace, metadata only); PodReplica,
    // uploaded next, lists its own pods (by their controller label) while they exist.
    phase.set("SIGKILL restart");
    host.kill();
    let host = Host::start(&cluster, &["chaospod.wasm"], &[], &[]);
    eventually(
        Duration::from_secs(120),
        "host ready after SIGKILL",
        || async { (host.http_get("/readyz")?.0 == 200).then_some(()) },
    )
    .await;
    phase.set("upload widening the pod cache");
    let (ok, out) = push(&cluster, "podreplica", "podreplica.wasm");
    assert!(ok, "{out}");
    eventually(
        Duration::from_secs(120),
        "PodReplica's caches listed",
        || async {
            host.log_text()
                .contains("caches synced plugin=podreplica")
                .then_some(())
        },
    )
    .await;
    // Let every PodReplica be decided at least once by the new host.
    tokio::time::sleep(Duration::from_secs(5)).await;
    all_converged(&client, &uids, "converged again after a SIGKILL restart").await;
    // ChaosPod's pod cache holds each of the 3,900 pods; PodReplica's only its 900.
    let pods: Api<Pod> = Api::all(client.clone());
    let listed = pods.list(&ListParams::default()).await.unwrap().items.len();
    assert!(
        listed >= UNRELATED + REPLICAS * SIZE,
        "{listed} pods listed"
    );
    let owned = (CONTROLLER.to_string(), (REPLICAS * SIZE, 1));
    let caches = eventually(
        Duration::from_secs(30),
        "the pod caches hold every pod, and the owned ones",
        || async {
            let caches = pod_caches(&host);
            (caches.get("").is_some_and(|c| c.0 == listed)
                && caches.get(&owned.0) == Some(&owned.1))
            .then_some(caches)
        },
    )
    .await;
    assert_eq!(
        caches,
        HashMap::from([(String::new(), (listed, 1)), owned]),
        "not a pod cache of ChaosPod's and one of PodReplica's"
    );
    eventually(
        Duration::from_secs(120),
        "every PodReplica's status counts its ready pods",
        || all_ready_in_status(&client, SIZE),
    )
    .await;

    // An upload of a version that watches differently restarts the controller with empty
    // caches; the WasmPlugin's status says what runs.
    phase.set("restarting swap to v3");
    let (ok, out) = push(&cluster, "podreplica", "podreplica_v3.wasm");
    assert!(ok, "{out}");
    assert!(out.contains("Restarted"), "{out}");
    eventually(
        Duration::from_secs(120),
        "every PodReplica decided by v3",
        || all_decided_by(&client, "(v3)"),
    )
    .await;
    all_converged(&client, &uids, "converged again after a restarting swap").await;

    // The API server restarts: every watch relists.
    phase.set("API server restart, scale to 2");
    cluster.restart("apiserver");
    let client = cluster.client().await;
    sampler.set_bound(2);
    scale_all(&client, 2).await;
    all_converged_at(
        &client,
        &uids,
        2,
        "scaled to 2 across an API server restart",
    )
    .await;
    drop(host);

    // Two replicas, both with warm caches; the leader is killed and the standby takes over.
    let mut a = Host::start_replica(&cluster, &["podreplica.wasm"], "a", 10);
    eventually(Duration::from_secs(60), "replica a leads", || async {
        a.leads().then_some(())
    })
    .await;
    let b = Host::start_replica(&cluster, &["podreplica.wasm"], "b", 10);
    eventually(
        Duration::from_secs(120),
        "standby b ready (caches warm)",
        || async { (b.http_get("/readyz")?.0 == 200).then_some(()) },
    )
    .await;
    phase.set("failover, scale to 3");
    a.kill();
    sampler.set_bound(3);
    scale_all(&client, 3).await;
    all_converged(
        &client,
        &uids,
        "scaled to 3 by the standby after a failover",
    )
    .await;
    assert!(b.leads(), "the standby does not lead");
    // The upload still wins over the plugins directory's file, and the status says so.
    eventually(
        Duration::from_secs(60),
        "WasmPlugin status: v3 Ready",
        || wasmplugin_says(&client, "0.1.0-v3", "podreplica_v3.wasm"),
    )
    .await;
    drop(b);

    // A storm: 30% of the host's creates and deletes are refused with 429 or 500.
    phase.set("storm host start");
    let storm = Storm::start(&cluster, 30).await;
    let host = Host::start_with(&storm.kubeconfig, &["podreplica.wasm"], &[], &[]);
    eventually(
        Duration::from_secs(120),
        "host ready through the storm",
        || async { (host.http_get("/readyz")?.0 == 200).then_some(()) },
    )
    .await;
    phase.set("storm, scale to 1");
    sampler.set_bound(1);
    scale_all(&client, 1).await;
    all_converged_at(
        &client,
        &uids,
        1,
        "scaled to 1 through a storm of refused writes",
    )
    .await;
    phase.set("storm, scale to 3");
    sampler.set_bound(3);
    scale_all(&client, 3).await;
    all_converged(
        &client,
        &uids,
        "scaled to 3 through a storm of refused writes",
    )
    .await;
    let (writes, refused) = storm.counts();
    println!("storm: {refused} of {writes} creates and deletes refused");
    assert!(
        refused >= 100,
        "the storm refused only {refused} of {writes} writes"
    );

    let (events, worst, over) = sampler.finish(&uids).await;
    println!(
        "sampler: {events} pod events watched; the most live pods any PodReplica had at once: {worst} (size {SIZE})"
    );
    assert_eq!(finalizers_left(&client).await, 0, "finalizers left behind");
    assert!(
        events >= REPLICAS * SIZE && worst == SIZE,
        "the sampler watched only {events} pod events (most live pods {worst})"
    );
    assert!(
        over.is_empty(),
        "{} PodReplicas got a pod while they had their size in force (worst {worst}); first seen:\n{}",
        over.len(),
        over.join("\n")
    );
}
