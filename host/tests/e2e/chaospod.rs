//! End to end: ChaosPod deletes only prefix-matching pods, at its interval, within the
//! host's delete budget, never the host's own pod; a dry run deletes nothing.
//!
//! The host's own pod has a name of its own (`wasmop-host`) with a ChaosPod aimed at it
//! alone: every plan of that one is refused by the `own-pod` rule. Were it one of the
//! `victim-*` pods, a run would pick it at random, the refusal would back off (0.5 s,
//! doubling), and a streak of such picks could push the budget's refusal past the test's
//! minute and its window: CI saw that once.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::support::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::json;

async fn make_pod(pods: &Api<Pod>, name: &str) {
    let pod: Pod = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"]}]}}))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
}

async fn live_names(pods: &Api<Pod>) -> BTreeSet<String> {
    pods.list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.metadata.name)
        .collect()
}

/// Applies ChaosPod `name` in `default` with `spec`.
async fn apply_chaos(client: &kube::Client, name: &str, spec: serde_json::Value) {
    let chaos = json!({"apiVersion": "app.example.com/v1alpha1", "kind": "ChaosPod",
        "metadata": {"name": name, "namespace": "default"}, "spec": spec});
    apply(client, &chaospod_resource(), "default", &chaos)
        .await
        .unwrap();
}

/// Waits (at most a minute) until the host's metrics count a plan refused by guard `rule`.
async fn refused_by(host: &Host, rule: &str) {
    let label = format!("rule=\"{rule}\"");
    eventually(
        Duration::from_secs(60),
        &format!("a plan refused by {rule}"),
        || async { host.http_get("/metrics")?.1.contains(&label).then_some(()) },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn chaos_kills_only_matches_within_budget_and_spares_the_host() {
    let cluster = Cluster::start("chaospod");
    // The host believes it runs as pod `wasmop-host` in `default`: the guard must spare it.
    let host = Host::start(
        &cluster,
        &["chaospod.wasm"],
        &["--delete-budget", "3"],
        &[("POD_NAME", "wasmop-host"), ("POD_NAMESPACE", "default")],
    );
    let client = cluster.client().await;
    let ar = chaospod_resource();
    wait_for_crd(&client, &ar).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for name in [
        "wasmop-host",
        "victim-a",
        "victim-b",
        "victim-c",
        "victim-d",
        "victim-e",
        "bystander-a",
        "bystander-b",
    ] {
        make_pod(&pods, name).await;
    }
    // A dry run first: it reports but deletes nothing.
    apply_chaos(
        &client,
        "dry",
        json!({"prefix": "bystander-", "intervalSeconds": 1, "maxKillsPerRun": 2, "dryRun": true}),
    )
    .await;
    let chaos_api: Api<kube::api::DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &ar);
    eventually(Duration::from_secs(60), "dry run reports victims", || {
        let api = chaos_api.clone();
        async move {
            let s = api.get("dry").await.ok()?.data["status"].clone();
            (s["history"].as_array().map_or(0, Vec::len) >= 2).then_some(())
        }
    })
    .await;
    assert!(
        live_names(&pods).await.contains("bystander-a")
            && live_names(&pods).await.contains("bystander-b")
    );

    // Aimed at the host's own pod: every plan refused, the pod alive, nothing of the budget spent.
    apply_chaos(
        &client,
        "at-the-host",
        json!({"prefix": "wasmop-host", "intervalSeconds": 1, "maxKillsPerRun": 1}),
    )
    .await;
    refused_by(&host, "own-pod").await;
    assert!(
        live_names(&pods).await.contains("wasmop-host"),
        "the host's own pod was deleted"
    );

    // The real thing: every second, two victims among `victim-*`; the budget allows 3 a minute,
    // so the first run deletes two and the next is refused.
    apply_chaos(
        &client,
        "chaos",
        json!({"prefix": "victim-", "intervalSeconds": 1, "maxKillsPerRun": 2}),
    )
    .await;
    refused_by(&host, "delete-budget").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let left = live_names(&pods).await;
    let killed: Vec<&str> = ["victim-a", "victim-b", "victim-c", "victim-d", "victim-e"]
        .into_iter()
        .filter(|n| !left.contains(*n))
        .collect();
    println!("killed {killed:?}; left {left:?}");
    assert!(
        left.contains("wasmop-host"),
        "the host's own pod was deleted"
    );
    assert!(
        left.contains("bystander-a") && left.contains("bystander-b"),
        "a non-matching pod was deleted"
    );
    assert_eq!(
        killed.len(),
        2,
        "one run of two deletions, then the budget (3 a minute) refuses the next run of two: {killed:?}"
    );
    let status = chaos_api.get("chaos").await.unwrap().data["status"].clone();
    assert_eq!(status["totalKills"].as_i64(), Some(2), "{status}");
    let (_, metrics) = host.http_get("/metrics").unwrap();
    assert!(metrics.contains("rule=\"delete-budget\""), "{metrics}");
}
