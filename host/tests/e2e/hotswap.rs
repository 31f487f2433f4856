//! End to end: hot swap. PodReplica v1 is swapped for v2 while 150 PodReplicas scale (a
//! watch of every pod sees none get a pod while it had the size in force);
//! broken uploads are refused with their reason while v2 keeps working; a restarted host
//! runs the uploaded version, not the older file in its plugins directory.

use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::fleet::{Phase, Sampler};
use crate::support::uploads::*;
use crate::support::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject};
use serde_json::json;

const N: usize = 150;

fn pr(name: &str, size: i64) -> serde_json::Value {
    json!({"apiVersion": "app.example.com/v1alpha1", "kind": "PodReplica",
           "metadata": {"name": name, "namespace": "default"}, "spec": {"size": size}})
}

/// Waits until PodReplica `name` says `message` in its Ready condition (which tells which
/// plugin version wrote it).
async fn wait_message(api: &Api<DynamicObject>, name: &str, message: &str, what: &str) {
    eventually(Duration::from_secs(60), what, || async {
        let o = api.get(name).await.ok()?;
        (ready_message(&o) == message).then_some(())
    })
    .await;
}

fn ready_message(obj: &DynamicObject) -> String {
    obj.data["status"]["conditions"][0]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Counts live pods per owner uid; returns the map.
async fn pods_by_owner(pods: &Api<Pod>) -> HashMap<String, usize> {
    let mut m = HashMap::new();
    for p in pods
        .list(&Default::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
    {
        if p.metadata.deletion_timestamp.is_some() {
            continue;
        }
        for o in p.metadata.owner_references.unwrap_or_default() {
            if o.controller == Some(true) {
                *m.entry(o.uid).or_default() += 1;
            }
        }
    }
    m
}

#[tokio::test(flavor = "multi_thread")]
async fn swap_under_load_refuse_broken_and_survive_restart() {
    let cluster = Cluster::start_with_node_pods("hotswap", 600);
    // The plugins directory holds v1; uploads come on top.
    let mut host = Host::start(
        &cluster,
        &["podreplica.wasm"],
        &["--concurrency", "16"],
        &[],
    );
    let client = cluster.client().await;
    let ar = podreplica_resource();
    wait_for_crd(&client, &ar).await;
    wait_for_crd(&client, &wasmplugin_resource()).await;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");

    // Upload v1 (same bytes as the directory's file: nothing changes), then 150 PodReplicas.
    let phase = Phase::default();
    let sampler = Sampler::start(client.clone(), phase.clone(), 2);
    phase.set("150 PodReplicas x 2 under v1");
    let (ok, text) = push(&cluster, "podreplica", "podreplica.wasm");
    assert!(ok, "{text}");
    let mut uids = Vec::new();
    for i in 0..N {
        uids.push(
            apply(&client, &ar, "default", &pr(&format!("load-{i:02}"), 2))
                .await
                .unwrap()
                .metadata
                .uid
                .unwrap(),
        );
    }
    eventually(
        Duration::from_secs(180),
        "150 PodReplicas with 2 pods",
        || async {
            let m = pods_by_owner(&pods).await;
            uids.iter().all(|u| m.get(u) == Some(&2)).then_some(())
        },
    )
    .await;

    // Scale everything to 3 and swap to v2 in the middle of it.
    phase.set("scale to 3, v2 pushed in the middle");
    sampler.set_bound(3);
    for i in 0..N / 2 {
        apply(&client, &ar, "default", &pr(&format!("load-{i:02}"), 3))
            .await
            .unwrap();
    }
    let pushed = Instant::now();
    let (ok, text) = push(&cluster, "podreplica", "podreplica_v2.wasm");
    assert!(ok, "{text}");
    for i in N / 2..N {
        apply(&client, &ar, "default", &pr(&format!("load-{i:02}"), 3))
            .await
            .unwrap();
    }
    let first_v2 = eventually(
        Duration::from_secs(60),
        "a first reconcile by v2",
        || async {
            let list = api.list(&Default::default()).await.ok()?;
            list.items
                .iter()
                .any(|o| ready_message(o).ends_with("(v2)"))
                .then(|| pushed.elapsed())
        },
    )
    .await;
    println!("push of v2 to its first reconcile: {first_v2:?} (push command included)");
    eventually(
        Duration::from_secs(240),
        "every PodReplica converged under v2",
        || async {
            let list = api.list(&Default::default()).await.ok()?;
            let m = pods_by_owner(&pods).await;
            let done = list.items.iter().filter(|o| {
                let uid = o.metadata.uid.clone().unwrap_or_default();
                ready_message(o) == "3/3 pods ready (v2)" && m.get(&uid) == Some(&3)
            });
            (done.count() == N).then_some(())
        },
    )
    .await;
    println!("all {N} PodReplicas converged under v2");
    // Every pod made was watched: N more pods at least (each a few events).
    sampler.held(&uids, 3, N).await;
    let (_, metrics) = host.http_get("/metrics").unwrap();
    assert!(
        !metrics.contains("wasmop_reconcile_errors_total{plugin=\"podreplica\""),
        "reconcile errors:\n{metrics}"
    );
    let v2_pods = pods
        .list(&kube::api::ListParams::default().labels("app.example.com/plugin-version=v2"))
        .await
        .unwrap();
    assert!(!v2_pods.items.is_empty(), "v2 created no pods");

    // Broken uploads are refused with their reason; v2 keeps running.
    let other_world = wat::parse_str(
        r#"(component (core module $m (func (export "f"))) (core instance $i (instantiate $m))
            (func $f (canon lift (core func $i "f"))) (export "run" (func $f)))"#,
    )
    .unwrap();
    let trap_info = plugin_bytes("wasmop_hostile_trap_info.wasm");
    let cases: [(&str, Vec<u8>, &str); 4] = [
        (
            "garbage",
            b"these are not the bytes you are looking for".to_vec(),
            "NotAComponent",
        ),
        (
            "core-module",
            wat::parse_str("(module)").unwrap(),
            "NotAComponent",
        ),
        ("other-world", other_world, "WorldMismatch"),
        ("traps-in-info", trap_info.clone(), "InfoFailed"),
    ];
    for (name, bytes, reason) in &cases {
        upload_raw(&client, name, bytes).await;
        let got = eventually(
            Duration::from_secs(60),
            &format!("verdict on {name}"),
            || ready_reason(&client, name),
        )
        .await;
        assert_eq!(got, ("False".to_string(), reason.to_string()), "{name}");
    }
    // The same broken bytes pushed over the running plugin leave v2 in place.
    upload_raw(&client, "podreplica", &trap_info).await;
    let got = eventually(
        Duration::from_secs(60),
        "verdict on the broken podreplica",
        || ready_reason(&client, "podreplica"),
    )
    .await;
    assert_eq!(got.1, "InfoFailed");
    apply(&client, &ar, "default", &pr("after-refusals", 1))
        .await
        .unwrap();
    wait_message(
        &api,
        "after-refusals",
        "1/1 pods ready (v2)",
        "v2 still reconciles",
    )
    .await;
    // `wasmop push` itself refuses what is not a component, before touching the cluster.
    let garbage = Scratch::new("garbage");
    std::fs::write(garbage.0.join("x.wasm"), b"garbage").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .args(["push", "nope"])
        .arg(garbage.0.join("x.wasm"))
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a WebAssembly file"));

    // Two uploads in quick succession (v1 without waiting, then v2): the later one wins.
    let out = Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .args(["push", "podreplica"])
        .arg(plugin_dir().join("podreplica.wasm"))
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .arg("--no-wait")
        .output()
        .unwrap();
    assert!(out.status.success());
    let (ok, text) = push(&cluster, "podreplica", "podreplica_v2.wasm");
    assert!(ok, "{text}");
    apply(&client, &ar, "default", &pr("after-two-pushes", 1))
        .await
        .unwrap();
    wait_message(
        &api,
        "after-two-pushes",
        "1/1 pods ready (v2)",
        "v2 active after two quick pushes",
    )
    .await;

    // v3 watches differently (a label selector on its pods): its controller is restarted,
    // and every object is reconciled by v3; then back to v2 the same way.
    let (ok, text) = push(&cluster, "podreplica", "podreplica_v3.wasm");
    assert!(ok && text.contains("Restarted"), "{text}");
    wait_message(
        &api,
        "after-two-pushes",
        "1/1 pods ready (v3)",
        "v3 reconciles the existing objects",
    )
    .await;
    let (ok, text) = push(&cluster, "podreplica", "podreplica_v2.wasm");
    assert!(ok && text.contains("Restarted"), "{text}");
    wait_message(
        &api,
        "after-two-pushes",
        "1/1 pods ready (v2)",
        "v2 again after the second restart",
    )
    .await;

    // Restart the host: it runs v2 from the cluster, not v1 from its directory.
    assert!(host.terminate(Duration::from_secs(30)));
    let host = Host::start(&cluster, &["podreplica.wasm"], &[], &[]);
    apply(&client, &ar, "default", &pr("after-restart", 1))
        .await
        .unwrap();
    wait_message(
        &api,
        "after-restart",
        "1/1 pods ready (v2)",
        "the restarted host runs v2",
    )
    .await;
    eventually(
        Duration::from_secs(30),
        "the directory's older file yields to the upload",
        || async {
            host.log_text()
                .contains("runs from the upload cluster:default/podreplica")
                .then_some(())
        },
    )
    .await;
}

/// A version that watches differently replaces the running one only once its caches are
/// listed: while the list of v3's pods (a label selector of its own) is held by a proxy in
/// front of the API server, v1 keeps deciding (a new PodReplica gets its pod, in v1's
/// words), and when the list does not come within `--list-timeout-seconds` v3 is refused
/// with `CachesNotListed`, v1 still active. Released, the same upload restarts the
/// controller on v3. Every cache listed by a streaming list, none in pages.
#[tokio::test(flavor = "multi_thread")]
async fn a_version_that_watches_differently_waits_for_its_caches_and_the_old_one_decides() {
    let cluster = Cluster::start("list-wait");
    cluster.grant(&["podreplica.wasm"]);
    let storm = crate::support::storm::Storm::start(&cluster, 0).await;
    let limit_s = 10;
    let host = Host::start_with(
        &storm.kubeconfig,
        &["podreplica.wasm"],
        &["--list-timeout-seconds", &limit_s.to_string()],
        &[],
    );
    let client = cluster.client().await;
    let ar = podreplica_resource();
    wait_for_crd(&client, &ar).await;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    apply(&client, &ar, "default", &pr("before", 1))
        .await
        .unwrap();
    wait_message(&api, "before", "1/1 pods ready", "v1 decides").await;

    // v3's pods cache lists with its label selector: held.
    storm.hold_lists("labelSelector=app.example.com%2Fpodreplica");
    let pushing = {
        let cluster_kubeconfig = cluster.kubeconfig.clone();
        std::thread::spawn(move || {
            let file = plugin_dir().join("podreplica_v3.wasm");
            wasmop(&[
                "push",
                "podreplica",
                file.to_str().unwrap(),
                "--kubeconfig",
                cluster_kubeconfig.to_str().unwrap(),
                "--namespace",
                "default",
                "--timeout",
                "120",
            ])
        })
    };
    eventually(Duration::from_secs(60), "v3's list held", || async {
        (storm.lists_held() > 0).then_some(())
    })
    .await;
    let asked = Instant::now();
    apply(&client, &ar, "default", &pr("during", 1))
        .await
        .unwrap();
    wait_message(
        &api,
        "during",
        "1/1 pods ready",
        "v1 decides while v3's caches list",
    )
    .await;
    let (ok, text) = pushing.join().unwrap();
    let waited = asked.elapsed();
    println!("v1 decided a new PodReplica while v3 waited; v3 refused after {waited:.1?}: {text}");
    assert!(!ok && text.contains("CachesNotListed"), "{text}");
    assert!(text.contains("keeps deciding"), "{text}");
    assert!(storm.lists_held() > 0);
    // v1 is still the one deciding.
    apply(&client, &ar, "default", &pr("after", 1))
        .await
        .unwrap();
    wait_message(&api, "after", "1/1 pods ready", "v1 still decides").await;

    // The list comes: the same upload restarts the controller on v3.
    storm.release_lists();
    let (ok, text) = push(&cluster, "podreplica", "podreplica_v3.wasm");
    assert!(ok && text.contains("Restarted"), "{text}");
    wait_message(&api, "after", "1/1 pods ready (v3)", "v3 decides").await;
    // Every cache of both versions listed by a consistent streaming list (held above like
    // a list), none in pages.
    for kind in ["/pods", "/podreplicas"] {
        assert_eq!(
            storm.lists(kind),
            (0, 0),
            "{kind}: listed by streaming lists only"
        );
    }
    drop(host);
}
