//! End to end, against the local control plane: the article's PodReplica scenario.

use std::time::{Duration, Instant};

use crate::support::fleet::{Phase, Sampler};
use crate::support::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, DynamicObject};
use serde_json::json;

fn podreplica(name: &str, size: i64) -> serde_json::Value {
    json!({"apiVersion": "app.example.com/v1alpha1", "kind": "PodReplica",
           "metadata": {"name": name, "namespace": "default"}, "spec": {"size": size}})
}

async fn running(client: &kube::Client, uid: &str, n: usize) -> Option<Vec<String>> {
    let pods = live_owned_pods(client, "default", uid).await;
    (pods.len() == n && pods.iter().all(|(_, phase)| phase == "Running"))
        .then(|| pods.into_iter().map(|(name, _)| name).collect())
}

#[tokio::test(flavor = "multi_thread")]
async fn article_scenario() {
    let cluster = Cluster::start("podreplica");
    let host = Host::start(&cluster, &["podreplica.wasm", "chaospod.wasm"], &[], &[]);
    let client = cluster.client().await;
    let ar = podreplica_resource();
    wait_for_crd(&client, &ar).await;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    eventually(Duration::from_secs(60), "host ready", || async {
        (host.http_get("/readyz")?.0 == 200).then_some(())
    })
    .await;

    // A watch of every pod change for the whole scenario: no pod is made for the
    // PodReplica while it already has its size in force in live pods.
    let phase = Phase::default();
    let sampler = Sampler::start(client.clone(), phase.clone(), 3);

    // Size 3: three Running pods, their names in the status.
    phase.set("size 3");
    let started = Instant::now();
    let pr = apply(
        &client,
        &ar,
        "default",
        &podreplica("example-podreplica", 3),
    )
    .await
    .unwrap();
    let uid = pr.metadata.uid.clone().unwrap();
    let mut names = eventually(Duration::from_secs(60), "3 pods Running", || {
        running(&client, &uid, 3)
    })
    .await;
    let converged = started.elapsed();
    names.sort();
    eventually(Duration::from_secs(30), "status lists the 3 pods", || {
        let (api, names) = (api.clone(), names.clone());
        async move {
            let s = api.get("example-podreplica").await.ok()?.data["status"].clone();
            (s["pods"] == json!(names)
                && s["readyReplicas"] == 3
                && s["conditions"][0]["status"] == "True")
                .then_some(())
        }
    })
    .await;
    println!(
        "PodReplica size 3: 3 pods Running {converged:?} after apply; host RSS {} KiB",
        host.rss_kib()
    );

    // Scale to 4, then to 1.
    phase.set("size 4");
    sampler.set_bound(4);
    apply(
        &client,
        &ar,
        "default",
        &podreplica("example-podreplica", 4),
    )
    .await
    .unwrap();
    eventually(Duration::from_secs(60), "4 pods Running", || {
        running(&client, &uid, 4)
    })
    .await;
    phase.set("size 1");
    sampler.set_bound(1);
    apply(
        &client,
        &ar,
        "default",
        &podreplica("example-podreplica", 1),
    )
    .await
    .unwrap();
    let survivor = eventually(Duration::from_secs(60), "1 pod Running", || {
        running(&client, &uid, 1)
    })
    .await;

    // Delete the pod: it is replaced.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.delete(&survivor[0], &DeleteParams::default())
        .await
        .unwrap();
    let replaced = eventually(Duration::from_secs(60), "a replacement pod", || async {
        running(&client, &uid, 1)
            .await
            .filter(|n| n[0] != survivor[0])
    })
    .await;
    println!("pod {} replaced by {}", survivor[0], replaced[0]);

    // Its Events say what happened each time: "creating 3 pod(s)" once, then "creating 1
    // pod(s)" for the scale to 4 and again for the replacement (one Event and its series),
    // never the first note repeated for a later, different step.
    let scaled_up = eventually(Duration::from_secs(30), "three ScaledUp Events", || {
        let client = client.clone();
        async move {
            let events: Api<k8s_openapi::api::events::v1::Event> =
                Api::namespaced(client, "default");
            let mut notes = std::collections::BTreeMap::new();
            for e in events.list(&Default::default()).await.ok()?.items {
                let about = e.regarding.as_ref().and_then(|r| r.name.as_deref());
                if about == Some("example-podreplica") && e.reason.as_deref() == Some("ScaledUp") {
                    let times = e.series.as_ref().map_or(1, |s| s.count);
                    *notes.entry(e.note.unwrap_or_default()).or_insert(0) += times;
                }
            }
            (notes.values().sum::<i32>() >= 3).then_some(notes)
        }
    })
    .await;
    assert_eq!(
        scaled_up,
        [
            ("creating 1 pod(s)".to_string(), 2),
            ("creating 3 pod(s)".to_string(), 1)
        ]
        .into_iter()
        .collect(),
        "each ScaledUp Event's note and how often it happened"
    );

    let (events, worst, over) = sampler.finish(std::slice::from_ref(&uid)).await;
    println!("sampler: {events} pod events; the most live pods at once: {worst}");
    assert!(
        events >= 6 && worst == 4,
        "the sampler saw {events} pod events, at most {worst} live pods (the size reached 4)"
    );
    assert!(
        over.is_empty(),
        "a pod made beyond the size in force: {over:?}"
    );

    // Delete the PodReplica: the garbage collector removes its pods.
    api.delete("example-podreplica", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        Duration::from_secs(60),
        "pods garbage-collected",
        || async {
            let left = pods.list(&Default::default()).await.ok()?.items;
            left.iter()
                .all(|p| {
                    !p.metadata
                        .owner_references
                        .as_deref()
                        .unwrap_or_default()
                        .iter()
                        .any(|o| o.uid == uid)
                })
                .then_some(())
        },
    )
    .await;

    // An invalid spec is refused by the API server with a clear message.
    let err = apply(&client, &ar, "default", &podreplica("too-big", 500))
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("spec.size") && msg.contains("100"), "{msg}");
    let mut unknown = podreplica("unknown-field", 1);
    unknown["spec"]["colour"] = json!("red");
    let api_strict: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let err = api_strict
        .patch(
            "unknown-field",
            &kube::api::PatchParams::apply("e2e-test").validation_strict(),
            &kube::api::Patch::Apply(&unknown),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("colour"), "{err}");

    // The metrics saw the reconciles.
    let (code, metrics) = host.http_get("/metrics").unwrap();
    assert_eq!(code, 200);
    assert!(
        metrics.contains("wasmop_reconciles_total{plugin=\"podreplica\""),
        "{metrics}"
    );
}
