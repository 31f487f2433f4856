//! End to end: ChaosPod deletes only prefix-matching pods, at its interval, within the
//! host's delete budget, never the host's own pod; a dry run deletes nothing.
//!
//! The host's own pod has a name of its own (`wasmop-host`) with a ChaosPod aimed at it
//! alone: every plan of that one is refused by the `own-pod` rule. Were it one of the
//! `victim-*` pods, a run would pick it at random, the refusal would back off (0.5 s,
//! doubling), and a streak of such picks could push the budget's refusal past the test's
//! minute and its window: CI saw that once.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::support::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
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

/// How many ChaosPods, each with its own prefix and three victims, share one namespace.
const FLEET: usize = 200;

/// Watches the victims (label `chaos-fleet`) for the whole test: how many of each prefix
/// were deleted (a deletion timestamp or a delete event, counted once per pod), and every
/// time a prefix had more than `bound` deleted (the runs in force: one kill per run, one
/// run per interval of an hour).
struct Kills {
    stop: tokio::sync::watch::Sender<bool>,
    /// Whether the watch has shown the marker pod (everything made before it is seen).
    marker: std::sync::Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<(BTreeMap<String, usize>, Vec<String>)>,
}

impl Kills {
    fn start(client: kube::Client, bound: usize) -> Kills {
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let marker = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen_marker = marker.clone();
        let task = tokio::spawn(async move {
            let pods: Api<kube::core::PartialObjectMeta<Pod>> = Api::namespaced(client, "default");
            let mut events = watcher(pods, watcher::Config::default().labels("chaos-fleet"))
                .default_backoff()
                .boxed();
            let started = std::time::Instant::now();
            let (mut gone, mut by_prefix) = (BTreeSet::new(), BTreeMap::<String, usize>::new());
            let mut over = Vec::new();
            loop {
                let event = tokio::select! {
                    _ = stopped.changed() => break,
                    event = events.next() => match event {
                        Some(Ok(event)) => event,
                        Some(Err(_)) => continue,
                        None => break,
                    },
                };
                let (meta, deleted) = match &event {
                    watcher::Event::Apply(m) | watcher::Event::InitApply(m) => {
                        (&m.metadata, m.metadata.deletion_timestamp.is_some())
                    }
                    watcher::Event::Delete(m) => (&m.metadata, true),
                    _ => continue,
                };
                let name = meta.name.clone().unwrap_or_default();
                if name == "fleet-marker" {
                    seen_marker.store(true, std::sync::atomic::Ordering::SeqCst);
                    continue;
                }
                if !deleted || !gone.insert(name.clone()) {
                    continue;
                }
                let prefix = name
                    .rsplit_once('-')
                    .map_or(name.clone(), |(p, _)| p.into());
                let n = by_prefix.entry(prefix.clone()).or_default();
                *n += 1;
                if *n > bound {
                    over.push(format!(
                        "{prefix}: {n} victims deleted at {:.1?} (the last {name})",
                        started.elapsed()
                    ));
                }
            }
            (by_prefix, over)
        });
        Kills { stop, marker, task }
    }

    fn saw_marker(&self) -> bool {
        self.marker.load(std::sync::atomic::Ordering::SeqCst)
    }

    async fn finish(self) -> (BTreeMap<String, usize>, Vec<String>) {
        let _ = self.stop.send(true);
        self.task.await.unwrap()
    }
}

/// Every ChaosPod's decision reads its own last run: a run whose kill asks the ChaosPods of
/// the namespace to be decided again (the victim's deletion is news to every one of them)
/// must not be followed by a second run before the status of the first is seen. At size, in
/// one namespace, where each of the 600 victims' deletions asks all 200 ChaosPods for a
/// decision while their status writes are on the way: one kill per ChaosPod, never two.
/// On a sharded replica that leads, as the chart deploys it: each ChaosPod enters the
/// replica's cache when the sharder labels it, and its first decision takes it over. (The
/// race it guards against is microseconds wide: `reconcile::tests` has its deterministic
/// reproduction.)
#[tokio::test(flavor = "multi_thread")]
async fn every_chaospod_runs_once_per_interval_on_a_sharded_replica() {
    crowded_namespace(
        "chaos-fleet-sharded",
        &[
            "--leader-election",
            "--sharding",
            "--lease-namespace",
            "default",
            "--identity",
            "only",
        ],
    )
    .await;
}

async fn crowded_namespace(tag: &str, args: &[&str]) {
    let cluster = Cluster::start(tag);
    let mut host_args = vec!["--delete-budget", "100000"];
    host_args.extend_from_slice(args);
    let host = Host::start(&cluster, &["chaospod.wasm"], &host_args, &[]);
    let client = cluster.client().await;
    let ar = chaospod_resource();
    wait_for_crd(&client, &ar).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let names: Vec<String> = (0..FLEET)
        .flat_map(|i| ["a", "b", "c"].map(|s| format!("v{i}-{s}")))
        .collect();
    futures::stream::iter(names.iter())
        .for_each_concurrent(16, |name| {
            let pods = pods.clone();
            async move {
                let pod: Pod = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "labels": {"chaos-fleet": "victim"}},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]}}))
                .unwrap();
                pods.create(&PostParams::default(), &pod).await.unwrap();
            }
        })
        .await;
    let kills = Kills::start(client.clone(), 1);
    let started = std::time::Instant::now();
    futures::stream::iter(0..FLEET)
        .for_each_concurrent(16, |i| {
            let client = client.clone();
            async move {
                apply_chaos(
                    &client,
                    &format!("c{i}"),
                    json!({"prefix": format!("v{i}-"), "intervalSeconds": 3600, "maxKillsPerRun": 1}),
                )
                .await;
            }
        })
        .await;
    let chaos_api: Api<kube::api::DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &ar);
    eventually(
        Duration::from_secs(300),
        "every ChaosPod's first run in its status",
        || {
            let api = chaos_api.clone();
            async move {
                let list = api.list(&Default::default()).await.ok()?;
                let ran = list
                    .items
                    .iter()
                    .filter(|c| c.data["status"]["lastRunTime"].is_string())
                    .count();
                (ran == FLEET).then_some(())
            }
        },
    )
    .await;
    println!("{FLEET} ChaosPods ran once in {:.1?}", started.elapsed());
    // The window ends when no reconcile runs any more, and the watch has seen everything
    // before a marker made after that.
    eventually(Duration::from_secs(120), "no reconcile running", || async {
        let (_, metrics) = host.http_get("/metrics")?;
        metrics
            .lines()
            .any(|l| l.starts_with("wasmop_queue_depth{") && l.ends_with(" 0"))
            .then_some(())
    })
    .await;
    let marker: Pod = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "fleet-marker", "labels": {"chaos-fleet": "marker"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}))
    .unwrap();
    pods.create(&PostParams::default(), &marker).await.unwrap();
    eventually(
        Duration::from_secs(60),
        "the sampler sees the marker",
        || {
            let seen = kills.saw_marker();
            async move { seen.then_some(()) }
        },
    )
    .await;
    let (by_prefix, over) = kills.finish().await;
    let statuses = chaos_api.list(&Default::default()).await.unwrap();
    let total: i64 = statuses
        .items
        .iter()
        .map(|c| c.data["status"]["totalKills"].as_i64().unwrap_or(0))
        .sum();
    println!(
        "victims deleted: {} of {} prefixes, status totals {total}",
        by_prefix.values().sum::<usize>(),
        by_prefix.len()
    );
    assert!(
        over.is_empty(),
        "{} ChaosPods ran twice within their interval:\n{}\n{}",
        over.len(),
        over.join("\n"),
        host.log_text()
            .lines()
            .filter(|l| l.contains("deleted"))
            .take(20)
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(by_prefix.len(), FLEET, "a ChaosPod killed nothing");
    assert_eq!(total, FLEET as i64);
}
