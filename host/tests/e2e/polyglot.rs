//! End to end: PodReplica written in Python, TypeScript and Go, the same host. Their
//! components (18, 12 and 4 MB) come from a registry on loopback, as non-Rust plugins ship:
//! - the Python PodReplica pulled by tag runs the article's scenario (3 pods, 4, 1, a deleted
//!   pod replaced), a watch of every pod for the whole window seeing none made beyond the
//!   size in force;
//! - with 150 PodReplicas × 2 settled, Rust → Python → TypeScript → Go swapped on the running
//!   host:
//!   each of the 150 PodReplicas is decided by each new version (the host's own record of
//!   every decision: its `deciding` line in the `reconcile` span that names the version and
//!   the object), none in error, and no pod is created or deleted by a swap (a watch of
//!   every pod from before the first swap to a marker pod written once each swap's
//!   decisions had ended);
//! - the TypeScript version in shadow beside the Rust one agrees on every decision while
//!   objects are created, scaled up and down, and a pod is deleted.

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::fleet::{Phase, Sampler};
use crate::support::registry::Registry;
use crate::support::uploads::*;
use crate::support::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

const N: usize = 150;

fn pr(name: &str, size: i64) -> serde_json::Value {
    json!({"apiVersion": "app.example.com/v1alpha1", "kind": "PodReplica",
           "metadata": {"name": name, "namespace": "default"}, "spec": {"size": size}})
}

/// The metric lines of `host` starting with `prefix`, summed.
fn metric(host: &Host, prefix: &str) -> u64 {
    let (_, text) = host.http_get("/metrics").unwrap_or_default();
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// The value of the host's metric line `line` (all its labels, as exposed); `None` while
/// the host does not expose it.
fn gauge(host: &Host, line: &str) -> Option<f64> {
    let (_, text) = host.http_get("/metrics")?;
    text.lines()
        .find_map(|l| l.strip_prefix(line)?.strip_prefix(' ')?.parse().ok())
}

/// The objects (`default/NAME`) whose decision by `version` of PodReplica, as the active
/// version, the host's log records: the line `deciding` (logged when a reconcile passed the
/// gate and calls the plugin) inside the `reconcile` span naming plugin, version and object.
fn decided_by(host: &Host, version: &str) -> BTreeSet<String> {
    host.log_text()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["fields"]["message"] == "deciding")
        .filter_map(|e| {
            let span = e["spans"]
                .as_array()?
                .iter()
                .find(|s| s["name"] == "reconcile")?
                .clone();
            (span["plugin"] == "podreplica" && span["version"] == version && span["role"].is_null())
                .then(|| span["object"].as_str().map(str::to_owned))?
        })
        .collect()
}

/// Starts a host with the Rust PodReplica in its plugins directory, trusting `reg`, with a
/// pull secret `regcred` for it. Its log is JSON, with the reconciles' `deciding` lines
/// ([`decided_by`]).
async fn host_with_registry(cluster: &Cluster, reg: &Registry, cache: &Scratch) -> Host {
    cluster.grant(&["podreplica.wasm"]);
    reg.pull_secret(cluster, "regcred", &reg.user.1.clone());
    let ca = reg.ca.to_str().unwrap().to_string();
    let cache_dir = cache.0.to_str().unwrap().to_string();
    let host = Host::start_deployed(
        &cluster.kubeconfig,
        &["podreplica.wasm"],
        &[
            "--install-crds",
            "--registry-ca",
            &ca,
            "--cache-dir",
            &cache_dir,
            "--log-format",
            "json",
        ],
        &[("WASMOP_LOG", "info,wasmop::reconcile=debug")],
    );
    let client = cluster.client().await;
    wait_for_crd(&client, &wasmplugin_resource()).await;
    wait_for_crd(&client, &podreplica_resource()).await;
    host
}

/// `wasmop push podreplica oci://REF` (optionally `--shadow`), which must be accepted; then
/// waits until the WasmPlugin says `version` (active, or the candidate's with `--shadow`).
async fn push_oci(cluster: &Cluster, reg: &Registry, tag: &str, version: &str, shadow: bool) {
    let reference = format!("oci://{}:{tag}", reg.repo("plugins/podreplica"));
    let mut args = vec!["push", "podreplica", &reference, "--pull-secret", "regcred"];
    if shadow {
        args.push("--shadow");
    }
    let (ok, text) = wasmop_on(cluster, &args);
    assert!(ok, "push {reference}: {text}");
    let client = cluster.client().await;
    let field = if shadow {
        "/candidate/version"
    } else {
        "/pluginVersion"
    };
    eventually(
        Duration::from_secs(60),
        &format!("WasmPlugin podreplica at {version}"),
        || async {
            let (_, _, _, s) = ready_condition_in(&client, "default", "podreplica").await?;
            (s.pointer(field)?.as_str()? == version).then_some(())
        },
    )
    .await;
}

/// Pod names gathered by a watch task.
type Names = Arc<Mutex<Vec<String>>>;

/// A watch of every pod of `default`: the names of pods created and deleted since it
/// started (a pod counts as deleted once it has a deletion timestamp).
struct Churn {
    created: Names,
    deleted: Names,
    task: tokio::task::JoinHandle<()>,
}

impl Churn {
    async fn start(client: &kube::Client) -> Churn {
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        let known: HashSet<String> = pods
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect();
        let (created, deleted): (Names, Names) = (Arc::default(), Arc::default());
        let (c, d) = (Arc::clone(&created), Arc::clone(&deleted));
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let mut ready = Some(ready_tx);
            let mut known = known;
            let mut gone: HashSet<String> = HashSet::new();
            let mut events = watcher(pods, watcher::Config::default())
                .default_backoff()
                .boxed();
            while let Some(event) = events.next().await {
                let (pod, removed) = match event {
                    Ok(watcher::Event::InitDone) => {
                        if let Some(tx) = ready.take() {
                            let _ = tx.send(());
                        }
                        continue;
                    }
                    Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => (p, false),
                    Ok(watcher::Event::Delete(p)) => (p, true),
                    _ => continue,
                };
                let name = pod.metadata.name.clone().unwrap_or_default();
                if known.insert(name.clone()) {
                    c.lock().unwrap().push(name.clone());
                }
                if (removed || pod.metadata.deletion_timestamp.is_some())
                    && gone.insert(name.clone())
                {
                    d.lock().unwrap().push(name);
                }
            }
        });
        // A watch that never synced would see no churn at all: the check would pass blind.
        tokio::time::timeout(Duration::from_secs(30), ready_rx)
            .await
            .expect("the pod watch synced within 30 s")
            .expect("the pod watch ended before it synced");
        Churn {
            created,
            deleted,
            task,
        }
    }

    /// Creates pod `marker` (controlled by nothing) and waits until the watch saw it: the
    /// watch has then seen every pod change the API server made before it.
    async fn caught_up(&self, client: &kube::Client, marker: &str) {
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        let pod = serde_json::from_value(json!({"metadata": {"name": marker},
            "spec": {"containers": [{"name": "marker", "image": "busybox"}]}}))
        .unwrap();
        pods.create(&Default::default(), &pod).await.unwrap();
        let created = &self.created;
        eventually(
            Duration::from_secs(30),
            &format!("the pod watch sees {marker}"),
            || {
                std::future::ready(
                    created
                        .lock()
                        .unwrap()
                        .iter()
                        .any(|n| n == marker)
                        .then_some(()),
                )
            },
        )
        .await;
    }

    /// Pods created and deleted so far, leaving out the markers.
    fn so_far(&self) -> (Vec<String>, Vec<String>) {
        let not_marker = |n: &&String| !n.starts_with("marker-");
        let created = self.created.lock().unwrap();
        let deleted = self.deleted.lock().unwrap();
        (
            created.iter().filter(not_marker).cloned().collect(),
            deleted.iter().filter(not_marker).cloned().collect(),
        )
    }
}

impl Drop for Churn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn running(client: &kube::Client, uid: &str, n: usize) -> Option<Vec<String>> {
    let pods = live_owned_pods(client, "default", uid).await;
    (pods.len() == n && pods.iter().all(|(_, phase)| phase == "Running"))
        .then(|| pods.into_iter().map(|(name, _)| name).collect())
}

#[tokio::test(flavor = "multi_thread")]
async fn python_from_the_registry_runs_the_article() {
    let cluster = Cluster::start("polyglot-py");
    let reg = Registry::start("polyglot-py");
    let digest = reg.publish(
        &plugin_dir().join("podreplica_py.wasm"),
        "plugins/podreplica:py",
        None,
    );
    let cache = Scratch::new("cache");
    let host = host_with_registry(&cluster, &reg, &cache).await;
    push_oci(&cluster, &reg, "py", "0.1.0-py", false).await;
    let client = cluster.client().await;
    let (_, _, _, status) = ready_condition_in(&client, "default", "podreplica")
        .await
        .unwrap();
    assert_eq!(status["artifact"]["digest"], digest, "{status}");

    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &podreplica_resource());
    let phase = Phase::default();
    let sampler = Sampler::start(client.clone(), phase.clone(), 3);
    phase.set("size 3");
    let uid = apply(
        &client,
        &podreplica_resource(),
        "default",
        &pr("example-podreplica", 3),
    )
    .await
    .unwrap()
    .metadata
    .uid
    .unwrap();
    let mut names = eventually(Duration::from_secs(60), "3 pods Running", || {
        running(&client, &uid, 3)
    })
    .await;
    names.sort();
    eventually(
        Duration::from_secs(30),
        "the status lists the 3 pods, ready",
        || async {
            let s = api.get("example-podreplica").await.ok()?.data["status"].clone();
            (s["pods"] == json!(names)
                && s["readyReplicas"] == 3
                && s["conditions"][0]["message"] == "3/3 pods ready")
                .then_some(())
        },
    )
    .await;
    for size in [4, 1] {
        phase.set(&format!("size {size}"));
        sampler.set_bound(size);
        apply(
            &client,
            &podreplica_resource(),
            "default",
            &pr("example-podreplica", size as i64),
        )
        .await
        .unwrap();
        eventually(
            Duration::from_secs(60),
            &format!("{size} pods Running"),
            || running(&client, &uid, size),
        )
        .await;
    }
    phase.set("a pod deleted");
    let survivor = running(&client, &uid, 1).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.delete(&survivor[0], &DeleteParams::default())
        .await
        .unwrap();
    eventually(Duration::from_secs(60), "a replacement pod", || async {
        running(&client, &uid, 1)
            .await
            .filter(|n| n[0] != survivor[0])
    })
    .await;
    let (events, worst, over) = sampler.finish(std::slice::from_ref(&uid)).await;
    assert!(
        events >= 6 && worst == 4,
        "{events} pod events, at most {worst} live"
    );
    assert!(
        over.is_empty(),
        "a pod made beyond the size in force: {over:?}"
    );
    let notes = event_notes(&client, "ScaledUp").await;
    assert!(
        notes.iter().any(|n| n == "creating 3 pod(s)"),
        "the Python plugin's Events: {notes:?}"
    );
    assert!(
        metric(
            &host,
            "wasmop_reconciles_total{plugin=\"podreplica\",version=\"0.1.0-py\"}"
        ) >= 4
    );
    assert_eq!(
        metric(&host, "wasmop_reconcile_errors_total{plugin=\"podreplica\""),
        0
    );
    println!("host RSS with the Python plugin: {} KiB", host.rss_kib());
}

#[tokio::test(flavor = "multi_thread")]
async fn swap_languages_keeps_the_pods_and_typescript_shadow_agrees() {
    let cluster = Cluster::start_with_node_pods("polyglot-swap", 150);
    let reg = Registry::start("polyglot-swap");
    for (file, tag) in [
        ("podreplica_py.wasm", "py"),
        ("podreplica_ts.wasm", "ts"),
        ("podreplica_go.wasm", "go"),
    ] {
        reg.publish(
            &plugin_dir().join(file),
            &format!("plugins/podreplica:{tag}"),
            None,
        );
    }
    let cache = Scratch::new("cache");
    let host = host_with_registry(&cluster, &reg, &cache).await;
    let client = cluster.client().await;
    let ar = podreplica_resource();

    // 150 PodReplicas × 2 under the Rust version (the plugins directory's).
    let mut uids = Vec::new();
    for i in 0..N {
        uids.push(
            apply(&client, &ar, "default", &pr(&format!("swap-{i:03}"), 2))
                .await
                .unwrap()
                .metadata
                .uid
                .unwrap(),
        );
    }
    eventually(
        Duration::from_secs(240),
        "150 PodReplicas with 2 Running pods",
        || async {
            for uid in &uids {
                converged(&client, uid, 2).await?;
            }
            Some(())
        },
    )
    .await;

    // Rust -> Python -> TypeScript -> Go: every object decided again by each, no pod touched.
    let churn = Churn::start(&client).await;
    let objects: BTreeSet<String> = (0..N).map(|i| format!("default/swap-{i:03}")).collect();
    for (tag, version) in [("py", "0.1.0-py"), ("ts", "0.1.0-ts"), ("go", "0.1.0-go")] {
        push_oci(&cluster, &reg, tag, version, false).await;
        let decided = eventually(
            Duration::from_secs(180),
            &format!("each of the {N} PodReplicas decided by {version}"),
            || {
                let decided = decided_by(&host, version);
                std::future::ready(objects.is_subset(&decided).then_some(decided))
            },
        )
        .await;
        let reconciles = metric(
            &host,
            &format!("wasmop_reconciles_total{{plugin=\"podreplica\",version=\"{version}\"}}"),
        );
        let errors = metric(
            &host,
            &format!("wasmop_reconcile_errors_total{{plugin=\"podreplica\",version=\"{version}\""),
        );
        // Each decision has ended once no reconcile is in flight (the gauge counts each one
        // from its start to its end): a marker pod written then closes the swap's window.
        eventually(
            Duration::from_secs(60),
            "no PodReplica reconcile in flight",
            || {
                std::future::ready(
                    (gauge(&host, "wasmop_queue_depth{plugin=\"podreplica\"}") == Some(0.0))
                        .then_some(()),
                )
            },
        )
        .await;
        churn.caught_up(&client, &format!("marker-{tag}")).await;
        let (created, deleted) = churn.so_far();
        println!(
            "swapped to {version}: {} of {N} PodReplicas decided by it, {reconciles} reconciles, {errors} errors, pods created {}, deleted {}",
            decided.intersection(&objects).count(),
            created.len(),
            deleted.len()
        );
        // Positive first: every PodReplica decided by this version (above), counted by the
        // metric too; then none of those decisions failed, and none touched a pod.
        assert!(reconciles >= N as u64, "{version}: {reconciles} reconciles");
        assert_eq!(errors, 0, "{version}: reconciles in error");
        assert!(
            created.is_empty() && deleted.is_empty(),
            "the swap to {version} touched pods: created {created:?}, deleted {deleted:?}"
        );
    }
    drop(churn);
    assert_eq!(
        metric(&host, "wasmop_reconcile_errors_total{plugin=\"podreplica\""),
        0
    );

    // The Rust version active again, TypeScript in shadow beside it through the scenario.
    let (ok, text) = push(&cluster, "podreplica", "podreplica.wasm");
    assert!(ok, "{text}");
    push_oci(&cluster, &reg, "ts", "0.1.0-ts", true).await;
    let rollout = || async {
        let (_, _, _, s) = ready_condition_in(&client, "default", "podreplica").await?;
        Some(s["rollout"].clone())
    };
    // The decisions of the swap back settle first; the scenario's come on top of them.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let before = eventually(Duration::from_secs(30), "rollout status", rollout).await;
    let before = before["decisions"].as_u64().unwrap_or_default();
    for (i, size) in [(0, 3), (1, 1), (2, 0)] {
        apply(&client, &ar, "default", &pr(&format!("swap-{i:03}"), size))
            .await
            .unwrap();
    }
    let fresh = apply(&client, &ar, "default", &pr("shadowed", 2))
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let victim = eventually(Duration::from_secs(60), "swap-003's pods", || async {
        running(&client, &uids[3], 2).await
    })
    .await;
    pods.delete(&victim[0], &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        Duration::from_secs(120),
        "the scenario converged under shadow",
        || async {
            converged(&client, &uids[0], 3).await?;
            converged(&client, &uids[1], 1).await?;
            converged(&client, &uids[2], 0).await?;
            converged(&client, &fresh, 2).await?;
            running(&client, &uids[3], 2)
                .await
                .filter(|n| !n.contains(&victim[0]))
                .map(|_| ())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rollout = eventually(Duration::from_secs(30), "rollout status", rollout).await;
    println!(
        "TypeScript in shadow: {}",
        serde_json::to_string_pretty(&rollout).unwrap()
    );
    // At least: swap-000 creates then reports, swap-001 and swap-002 delete and report,
    // `shadowed` creates then reports, swap-003 replaces its pod then reports.
    let decisions = rollout["decisions"].as_u64().unwrap_or_default();
    assert!(
        decisions >= before + 10,
        "the scenario's decisions were compared ({before} before it): {rollout}"
    );
    assert_eq!(rollout["divergences"], 0, "{rollout}");
    assert_eq!(rollout["faults"], 0, "{rollout}");
    assert_eq!(rollout["agreement"], "100%", "{rollout}");
}
