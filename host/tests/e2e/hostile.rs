//! End to end: a hostile plugin (endless loop, memory bomb) next to PodReplica does not
//! keep PodReplica from converging.

use std::time::Duration;

use crate::support::*;
use serde_json::json;

/// Whether an Event with `reason` is recorded within 30 s (the host sends Events in the
/// background, so one can land after the change it describes).
async fn has_event(events: &kube::Api<k8s_openapi::api::events::v1::Event>, reason: &str) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let listed = events
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .any(|e| e.reason.as_deref() == Some(reason));
        if listed || std::time::Instant::now() > deadline {
            return listed;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_plugin_does_not_stop_podreplica() {
    let cluster = Cluster::start("hostile");
    let host = Host::start(
        &cluster,
        &["podreplica.wasm", "wasmop_hostile.wasm"],
        &["--call-timeout-ms", "300", "--call-memory-mib", "32"],
        &[],
    );
    let client = cluster.client().await;
    let hostile = hostile_resource();
    wait_for_crd(&client, &hostile).await;
    wait_for_crd(&client, &podreplica_resource()).await;
    for (name, mode) in [
        ("spin-1", "spin"),
        ("spin-2", "spin"),
        ("bomb-1", "bomb"),
        ("bomb-2", "bomb"),
        ("panic-1", "panic"),
    ] {
        apply(
            &client,
            &hostile,
            "default",
            &json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Hostile",
            "metadata": {"name": name, "namespace": "default"}, "spec": {"mode": mode}}),
        )
        .await
        .unwrap();
    }
    let pr = apply(&client, &podreplica_resource(), "default", &json!({"apiVersion": "app.example.com/v1alpha1",
        "kind": "PodReplica", "metadata": {"name": "steady", "namespace": "default"}, "spec": {"size": 3}}))
    .await
    .unwrap();
    let uid = pr.metadata.uid.unwrap();
    eventually(
        Duration::from_secs(60),
        "PodReplica converges next to the hostile plugin",
        || async {
            let pods = live_owned_pods(&client, "default", &uid).await;
            (pods.len() == 3 && pods.iter().all(|(_, p)| p == "Running")).then_some(())
        },
    )
    .await;
    // The hostile calls were stopped, reported and counted, and the host is still alive.
    eventually(Duration::from_secs(30), "faults counted", || async {
        let (_, m) = host.http_get("/metrics")?;
        (m.contains("wasmop_sandbox_timeouts_total{plugin=\"hostile\"")
            && m.contains("kind=\"out_of_memory\""))
        .then_some(())
    })
    .await;
    assert_eq!(host.http_get("/healthz").unwrap().0, 200);
    let events: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(client.clone(), "default");
    assert!(
        has_event(&events, "PluginFault").await,
        "no PluginFault Event"
    );
    assert!(live_owned_pods(&client, "default", &uid).await.len() == 3);

    // Finalizers: the host added the plugin's finalizer, and on deletion it runs `cleanup`
    // and then lets the object go.
    apply(
        &client,
        &hostile,
        "default",
        &json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Hostile",
        "metadata": {"name": "calm", "namespace": "default"}, "spec": {"mode": "ok"}}),
    )
    .await
    .unwrap();
    let api: kube::Api<kube::api::DynamicObject> =
        kube::Api::namespaced_with(client.clone(), "default", &hostile);
    eventually(Duration::from_secs(30), "finalizer added", || async {
        let o = api.get("calm").await.ok()?;
        o.metadata
            .finalizers
            .unwrap_or_default()
            .contains(&"test.wasmop.dev/cleanup".to_string())
            .then_some(())
    })
    .await;
    api.delete("calm", &Default::default()).await.unwrap();
    eventually(
        Duration::from_secs(30),
        "object gone after cleanup",
        || async { api.get_opt("calm").await.ok()?.is_none().then_some(()) },
    )
    .await;
    assert!(has_event(&events, "CleanedUp").await, "cleanup did not run");

    // Another controller's finalizer is kept, and a cleanup that can never succeed has a
    // way out: the skip-cleanup annotation.
    apply(
        &client,
        &hostile,
        "default",
        &json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Hostile",
        "metadata": {"name": "stuck", "namespace": "default",
                     "finalizers": ["example.com/keep"]},
        "spec": {"mode": "stuck-cleanup"}}),
    )
    .await
    .unwrap();
    let finalizers =
        |o: &kube::api::DynamicObject| o.metadata.finalizers.clone().unwrap_or_default();
    eventually(Duration::from_secs(30), "both finalizers", || async {
        let o = api.get("stuck").await.ok()?;
        (finalizers(&o) == ["example.com/keep", "test.wasmop.dev/cleanup"]).then_some(())
    })
    .await;
    api.delete("stuck", &Default::default()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let o = api.get("stuck").await.unwrap();
    assert_eq!(
        finalizers(&o),
        ["example.com/keep", "test.wasmop.dev/cleanup"],
        "a failing cleanup must keep the object"
    );
    assert_eq!(
        o.data["status"]["conditions"][0]["reason"], "InvalidSpec",
        "{:?}",
        o.data["status"]
    );
    apply(
        &client,
        &hostile,
        "default",
        &json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Hostile",
        "metadata": {"name": "stuck", "namespace": "default",
                     "finalizers": ["example.com/keep"],
                     "annotations": {"wasmop.dev/skip-cleanup": "true"}},
        "spec": {"mode": "stuck-cleanup"}}),
    )
    .await
    .unwrap();
    eventually(
        Duration::from_secs(30),
        "only the other finalizer left",
        || async {
            let o = api.get("stuck").await.ok()?;
            (finalizers(&o) == ["example.com/keep"]).then_some(())
        },
    )
    .await;
    assert!(
        has_event(&events, "CleanupSkipped").await,
        "no CleanupSkipped event"
    );
    api.patch(
        "stuck",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually(Duration::from_secs(30), "stuck object gone", || async {
        api.get_opt("stuck").await.ok()?.is_none().then_some(())
    })
    .await;

    // The plugin is removed: the host releases its finalizer from every object (others'
    // finalizers stay), so nothing waits for a cleanup that no plugin will run.
    apply(
        &client,
        &hostile,
        "default",
        &json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Hostile",
        "metadata": {"name": "orphan", "namespace": "default",
                     "finalizers": ["example.com/keep"]},
        "spec": {"mode": "ok"}}),
    )
    .await
    .unwrap();
    eventually(
        Duration::from_secs(30),
        "orphan has both finalizers",
        || async {
            let o = api.get("orphan").await.ok()?;
            (finalizers(&o) == ["example.com/keep", "test.wasmop.dev/cleanup"]).then_some(())
        },
    )
    .await;
    std::fs::remove_file(host.plugins_dir().join("wasmop_hostile.wasm")).unwrap();
    eventually(
        Duration::from_secs(60),
        "the removed plugin's finalizer released",
        || async {
            let o = api.get("orphan").await.ok()?;
            (finalizers(&o) == ["example.com/keep"]).then_some(())
        },
    )
    .await;
    // The host logs the release once every object of the plugin is done; the orphan may be
    // the first of them.
    eventually(Duration::from_secs(30), "the release logged", || async {
        host.log_text()
            .contains("released from the plugin's objects")
            .then_some(())
    })
    .await;
}

/// Objects of a plugin that declares a finalizer: the first reconcile adds it and ends; the
/// echo of that write must bring the first decision. 600 applied at once, every one
/// decided (its status written by the plugin), whichever came first on the host: the
/// echo on the watch or the reconcile noting that it waits for it.
#[tokio::test(flavor = "multi_thread")]
async fn every_object_of_a_finalizer_plugin_gets_its_first_decision() {
    use futures::StreamExt;
    const OBJECTS: usize = 600;
    let cluster = Cluster::start("first-decision");
    let _host = Host::start(&cluster, &["wasmop_hostile.wasm"], &[], &[]);
    let client = cluster.client().await;
    let hostile = hostile_resource();
    wait_for_crd(&client, &hostile).await;
    let started = std::time::Instant::now();
    futures::stream::iter(0..OBJECTS)
        .map(|i| {
            let (client, hostile) = (client.clone(), hostile.clone());
            async move {
                apply(
                    &client,
                    &hostile,
                    "default",
                    &json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Hostile",
                    "metadata": {"name": format!("first-{i}"), "namespace": "default"},
                    "spec": {"mode": "ok"}}),
                )
                .await
                .unwrap();
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
    let api: kube::Api<kube::api::DynamicObject> =
        kube::Api::namespaced_with(client.clone(), "default", &hostile);
    let undecided = || async {
        let list = api.list(&Default::default()).await.unwrap();
        let finalized = list
            .items
            .iter()
            .filter(|o| {
                o.metadata
                    .finalizers
                    .as_ref()
                    .is_some_and(|f| !f.is_empty())
            })
            .count();
        let names: Vec<String> = list
            .items
            .iter()
            .filter(|o| o.data["status"]["mode"] != "ok")
            .filter_map(|o| o.metadata.name.clone())
            .collect();
        (finalized, names)
    };
    // No decision is owed to a timer here: one that is lost is never made. The bound is
    // far above what 600 decisions take, and only there to end the test.
    let deadline = started + Duration::from_secs(180);
    let (finalized, left) = loop {
        let (finalized, left) = undecided().await;
        if left.is_empty() || std::time::Instant::now() > deadline {
            break (finalized, left);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    println!(
        "{OBJECTS} objects with a finalizer: {finalized} finalized, all but {} decided after {:?}",
        left.len(),
        started.elapsed()
    );
    assert_eq!(finalized, OBJECTS, "every object got the finalizer");
    assert!(left.is_empty(), "never decided: {left:?}");
}
