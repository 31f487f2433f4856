//! End to end: a primary is decided when the objects it controls come to rest, not at every
//! step of their way. 300 PodReplicas applied at 3, then 5, then 2, on a host with the
//! default wait (`--progress-hold-ms` 30 s without a step of the pods: a wait that ends by
//! its timer and not by the last pod is counted in `wasmop_progress_holds_expired_total`,
//! asserted zero). However slow the machine, the pods keep making steps, so the count does
//! not depend on how long they take to get Ready. For each phase:
//! - every PodReplica converges in about two decisions (one that creates or deletes, one
//!   when the last pod is Running or gone): reconciles at most 2.2 per PodReplica, from
//!   the host's own metric;
//! - a watch of the pods and the PodReplicas times, per PodReplica, how long after the pod
//!   that completed it (the last one Ready, or the last one gone) its status said so: the
//!   slowest of 300 below the wait, none released by a timer;
//! - the sampler never sees a PodReplica with more live pods than its size.
//!
//! Then news still decides at once: a pod deleted by someone else is replaced well within
//! the wait (a held change would wait all of it).
//!
//! And pods that wait their turn (the scheduler paused, the test binding 280 pods one at a
//! time): each PodReplica is decided once its pod runs, however long its pod waited for its
//! turn while the others moved; pods stuck (a condition False) or left waiting when nothing
//! moves any more show in the status a wait after their last step.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::fleet::*;
use crate::support::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use kube::runtime::{WatchStreamExt, watcher};

const REPLICAS: usize = 300;
/// The host's default `--progress-hold-ms`, given to it explicitly: the window the test
/// waits out is the one the host runs.
const HOLD: Duration = Duration::from_secs(30);

/// What the watch saw, per PodReplica UID: when its pods last reached the size in force
/// (all Ready, none more), and when its status first said so after that.
#[derive(Default)]
struct Seen {
    size: usize,
    /// pod name → (owner UID, Ready).
    pods: HashMap<String, (String, bool)>,
    /// owner UID → when its pods last became exactly `size`, all Ready.
    pods_done: HashMap<String, Instant>,
    /// owner UID → when its status said `size` ready after its pods did.
    status_done: HashMap<String, Instant>,
    /// PodReplica name → UID.
    uid_of: HashMap<String, String>,
    /// owner UID → the (readyReplicas, replicas) its status said last.
    said: HashMap<String, (Option<usize>, Option<usize>)>,
    /// When the watch saw the last step of a pod.
    last_step: Option<Instant>,
}

impl Seen {
    fn pods_of(&self, owner: &str) -> (usize, usize) {
        let mine = self.pods.values().filter(|(o, _)| o == owner);
        mine.fold((0, 0), |(n, r), (_, ready)| {
            (n + 1, r + usize::from(*ready))
        })
    }

    fn pod_changed(&mut self, owner: &str, at: Instant) {
        self.last_step = Some(at);
        let size = self.size;
        if self.pods_of(owner) == (size, size) {
            self.pods_done.insert(owner.to_string(), at);
            self.status_done.remove(owner);
            // The two watches are not ordered with each other: a status already seen
            // saying so came no later than this.
            self.status_said(owner, at);
        } else {
            self.pods_done.remove(owner);
        }
    }

    /// The status of `owner` as last seen, at `at`: done if it says the size in force after
    /// its pods reached it.
    fn status_said(&mut self, owner: &str, at: Instant) {
        let size = Some(self.size);
        if self.said.get(owner) == Some(&(size, size))
            && self.pods_done.contains_key(owner)
            && !self.status_done.contains_key(owner)
        {
            self.status_done.insert(owner.to_string(), at);
        }
    }
}

fn ready(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
        && p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn owner(p: &Pod) -> Option<String> {
    p.metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.clone())
}

/// Watches the PodReplicas' pods and the PodReplicas for the whole test.
fn start_timing(client: &Client, seen: Arc<Mutex<Seen>>) -> Vec<tokio::task::JoinHandle<()>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let timing = seen.clone();
    let pod_task = tokio::spawn(async move {
        let mut events = watcher(pods, watcher::Config::default().labels(LABEL))
            .default_backoff()
            .boxed();
        while let Some(Ok(event)) = events.next().await {
            let at = Instant::now();
            let mut s = timing.lock().unwrap();
            match event {
                watcher::Event::Apply(p) | watcher::Event::InitApply(p) => {
                    let Some(o) = owner(&p) else { continue };
                    let name = p.metadata.name.clone().unwrap_or_default();
                    if p.metadata.deletion_timestamp.is_some() {
                        s.pods.remove(&name);
                    } else {
                        s.pods.insert(name, (o.clone(), ready(&p)));
                    }
                    s.pod_changed(&o, at);
                }
                watcher::Event::Delete(p) => {
                    let Some(o) = owner(&p) else { continue };
                    s.pods
                        .remove(p.metadata.name.as_deref().unwrap_or_default());
                    s.pod_changed(&o, at);
                }
                _ => {}
            }
        }
    });
    let prs: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &podreplica_resource());
    let pr_task = tokio::spawn(async move {
        let mut events = watcher(prs, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(Ok(event)) = events.next().await {
            let at = Instant::now();
            let (watcher::Event::Apply(pr) | watcher::Event::InitApply(pr)) = event else {
                continue;
            };
            let uid = pr.metadata.uid.clone().unwrap_or_default();
            let mut s = seen.lock().unwrap();
            s.uid_of
                .insert(pr.metadata.name.clone().unwrap_or_default(), uid.clone());
            let said = |k: &str| pr.data["status"][k].as_u64().map(|n| n as usize);
            s.said
                .insert(uid.clone(), (said("readyReplicas"), said("replicas")));
            s.status_said(&uid, at);
        }
    });
    vec![pod_task, pr_task]
}

/// The sum of the host's metric `name` over PodReplica's series.
fn metric(host: &Host, name: &str) -> f64 {
    let (_, text) = host.http_get("/metrics").expect("metrics");
    let prefix = format!("{name}{{plugin=\"podreplica\"");
    text.lines()
        .filter(|l| l.starts_with(&prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn reconciles(host: &Host) -> f64 {
    metric(host, "wasmop_reconciles_total")
}

fn holds_expired(host: &Host) -> f64 {
    metric(host, "wasmop_progress_holds_expired_total")
}

/// Whether the host declares metric `family` (its `# TYPE` line), with or without series.
fn exposes(host: &Host, family: &str) -> bool {
    let (_, text) = host.http_get("/metrics").expect("metrics");
    text.lines()
        .any(|l| l.starts_with(&format!("# TYPE {family} ")))
}

/// PodReplica's reconciles in flight (`wasmop_queue_depth`); `None` while not exposed.
fn in_flight(host: &Host) -> Option<f64> {
    let (_, text) = host.http_get("/metrics")?;
    text.lines().find_map(|l| {
        l.strip_prefix("wasmop_queue_depth{plugin=\"podreplica\"} ")?
            .parse()
            .ok()
    })
}

/// Applies every PodReplica at `size`, waits until each has converged and its status says
/// so; asserts the reconciles and how long each status came after its pods.
async fn phase(
    client: &Client,
    host: &Host,
    seen: &Arc<Mutex<Seen>>,
    sampler: &Sampler,
    size: usize,
) {
    sampler.set_bound(size);
    seen.lock().unwrap().size = size;
    let (before, expired_before) = (reconciles(host), holds_expired(host));
    let started = Instant::now();
    let uids = apply_replicas(client, REPLICAS, size).await;
    all_converged_at(
        client,
        &uids,
        size,
        &format!("{REPLICAS} PodReplicas x {size}"),
    )
    .await;
    let what = format!("at {size}: every status says {size} ready after its pods");
    eventually(Duration::from_secs(60), &what, || {
        let s = seen.lock().unwrap();
        let n = uids
            .iter()
            .filter(|u| s.status_done.contains_key(*u))
            .count();
        std::future::ready((n == uids.len()).then_some(()))
    })
    .await;
    // The pods of a scale-down gone too (their last removal asks for a decision), then a
    // second for the decisions the last changes asked for.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let what = format!("at {size}: no pod terminating");
    eventually(Duration::from_secs(60), &what, || async {
        let list = pods.list(&ListParams::default().labels(LABEL)).await.ok()?;
        (list.items.len() == REPLICAS * size).then_some(())
    })
    .await;
    let converged_in = started.elapsed();
    // A hold runs out a whole wait after the last step it saw, and a decision it asked for
    // is counted when it ends: the window runs until a whole wait has passed since the
    // last pod step the watch saw, and no reconcile is in flight then.
    let what = format!("at {size}: a whole wait after the last pod step, no reconcile in flight");
    eventually(HOLD * 2, &what, || {
        let last = seen.lock().unwrap().last_step;
        std::future::ready(
            (last.is_some_and(|l| l.elapsed() >= HOLD) && in_flight(host) == Some(0.0))
                .then_some(()),
        )
    })
    .await;
    let count = reconciles(host) - before;
    let expired = holds_expired(host) - expired_before;
    let mut lags: Vec<Duration> = {
        let s = seen.lock().unwrap();
        uids.iter()
            .map(|u| s.status_done[u].saturating_duration_since(s.pods_done[u]))
            .collect()
    };
    let slowest = {
        let s = seen.lock().unwrap();
        let name_of: HashMap<&String, &String> = s.uid_of.iter().map(|(n, u)| (u, n)).collect();
        let mut by: Vec<(Duration, String)> = uids
            .iter()
            .map(|u| {
                let lag = s.status_done[u].saturating_duration_since(s.pods_done[u]);
                (lag, name_of.get(u).map_or(u.clone(), |n| n.to_string()))
            })
            .collect();
        by.sort();
        by.into_iter().rev().take(3).collect::<Vec<_>>()
    };
    lags.sort();
    let (p50, max) = (lags[lags.len() / 2], lags[lags.len() - 1]);
    println!("at {size}: the slowest statuses: {slowest:?}");
    println!(
        "at {size}: converged in {converged_in:.1?}, {count} reconciles ({:.2} per PodReplica) and {expired} holds ran out by a whole wait after the last step, status after the pods p50 {p50:?}, max {max:?}",
        count / REPLICAS as f64
    );
    // Positive first: every PodReplica decided in the phase, counted by the metric read
    // below; the metric of holds run out exposed by its name. Then the bounds.
    assert!(
        count >= REPLICAS as f64,
        "at {size}: {count} reconciles for {REPLICAS} PodReplicas"
    );
    assert!(
        exposes(host, "wasmop_progress_holds_expired"),
        "the metric of holds run out is not exposed by that name"
    );
    assert!(
        count <= 2.2 * REPLICAS as f64,
        "at {size}: {count} reconciles for {REPLICAS} PodReplicas (more than 2.2 each)"
    );
    // Every wait ends with the last of its pods, none by its limit. The status follows its
    // last pod within the time the queue of 300 decisions takes, never a whole wait.
    assert_eq!(expired, 0.0, "at {size}: {expired} holds ran out");
    assert!(
        p50 < Duration::from_secs(1) && max < HOLD,
        "at {size}: status after the pods p50 {p50:?}, max {max:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_podreplica_is_decided_when_its_pods_come_to_rest_and_news_decides_at_once() {
    let cluster = Cluster::start_with_node_pods("progress", 700);
    let client = cluster.client().await;
    let hold_ms = HOLD.as_millis().to_string();
    let host = Host::start(
        &cluster,
        &["podreplica.wasm"],
        &["--progress-hold-ms", &hold_ms],
        &[],
    );
    wait_for_crd(&client, &podreplica_resource()).await;
    let phase_name = Phase::default();
    let sampler = Sampler::start(client.clone(), phase_name.clone(), 3);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let watches = start_timing(&client, seen.clone());

    for size in [3, 5, 2] {
        phase_name.set(&format!("at {size}"));
        phase(&client, &host, &seen, &sampler, size).await;
    }

    // News: a pod deleted by someone else is replaced at once.
    phase_name.set("news");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let uid = seen.lock().unwrap().uid_of["pr-7"].clone();
    let mine = |list: &[Pod]| -> Vec<String> {
        list.iter()
            .filter(|p| owner(p).as_deref() == Some(uid.as_str()))
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| p.metadata.name.clone())
            .collect()
    };
    let list = pods
        .list(&ListParams::default().labels(LABEL))
        .await
        .unwrap();
    let before = mine(&list.items);
    assert_eq!(before.len(), 2, "pr-7 at size 2: {before:?}");
    let victim = before[0].clone();
    let deleted = Instant::now();
    pods.delete(&victim, &DeleteParams::default())
        .await
        .unwrap();
    eventually(HOLD, "the deleted pod replaced", || async {
        let list = pods.list(&ListParams::default().labels(LABEL)).await.ok()?;
        let now = mine(&list.items);
        (now.len() == 2 && !now.contains(&victim)).then_some(())
    })
    .await;
    let took = deleted.elapsed();
    println!("a pod deleted by someone else: replaced after {took:?}");
    assert!(
        took < HOLD / 3,
        "replaced after {took:?}: held like progress"
    );

    sampler.held(&[], 5, 1000).await;
    for w in watches {
        w.abort();
    }
}

/// The kube-scheduler of a control plane, paused (SIGSTOP) until dropped (SIGCONT).
struct PausedScheduler(String);

impl PausedScheduler {
    fn pause(cluster: &Cluster) -> PausedScheduler {
        let pid = std::fs::read_to_string(cluster.state.join("kube-scheduler.pid"))
            .expect("the scheduler's pid file");
        let pid = pid.trim().to_string();
        let ok = std::process::Command::new("kill")
            .args(["-STOP", &pid])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "pausing the scheduler ({pid})");
        PausedScheduler(pid)
    }
}

impl Drop for PausedScheduler {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-CONT", &self.0])
            .status();
    }
}

/// PodReplicas waiting their turn. The scheduler is paused and the test schedules the pods
/// itself, one every few tens of milliseconds (a queue the cluster works through, as the
/// scheduler does beside thousands of pods): on a host with a wait of 4 s, 280 PodReplicas of
/// size 1, most of whose pods wait far longer than 4 s for their turn, are each decided once
/// their pod is Running and never with their pod still pending (the other pods' steps keep
/// them held: checked per PodReplica on its status, and on the count of holds run out). Ten
/// pods the test marks unschedulable (a condition `False`: something went wrong) show in
/// their PodReplica's status 4 s after that step, while the others still move; ten it leaves
/// waiting show 4 s after the last step of any pod, when nothing moves any more. Then the
/// scheduler resumes and every PodReplica converges; the sampler bounds each at one pod.
#[tokio::test(flavor = "multi_thread")]
async fn pods_waiting_their_turn_hold_their_primary_while_other_pods_move() {
    const BOUND: usize = 280;
    const STUCK: usize = 10;
    const LEFT: usize = 10;
    const ALL: usize = BOUND + STUCK + LEFT;
    const WAIT: Duration = Duration::from_secs(4);
    let cluster = Cluster::start_with_node_pods("turn", 200);
    let client = cluster.client().await;
    let paused = PausedScheduler::pause(&cluster);
    let wait_ms = WAIT.as_millis().to_string();
    // Why each PodReplica was decided, in the host's log (kept when the test fails).
    let host = Host::start(
        &cluster,
        &["podreplica.wasm"],
        &["--progress-hold-ms", &wait_ms],
        &[(
            "WASMOP_LOG",
            "info,wasmop::controller=debug,wasmop::reconcile=debug",
        )],
    );
    wait_for_crd(&client, &podreplica_resource()).await;
    let phase_name = Phase::default();
    phase_name.set("waiting their turn");
    let sampler = Sampler::start(client.clone(), phase_name.clone(), 1);
    let seen = Arc::new(Mutex::new(Seen {
        size: 1,
        ..Seen::default()
    }));
    let watches = start_timing(&client, seen.clone());
    // Every status a PodReplica is given with its pod still pending (live 1, ready 0), and
    // when the test's watch saw it first.
    let pending: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let prs: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &podreplica_resource());
    let noted = pending.clone();
    let pending_task = tokio::spawn(async move {
        let mut events = watcher(prs, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(Ok(event)) = events.next().await {
            let at = Instant::now();
            let watcher::Event::Apply(pr) = event else {
                continue;
            };
            let status = &pr.data["status"];
            if status["replicas"].as_u64() == Some(1)
                && status["readyReplicas"].as_u64().unwrap_or(0) == 0
            {
                let uid = pr.metadata.uid.clone().unwrap_or_default();
                noted.lock().unwrap().entry(uid).or_insert(at);
            }
        }
    });
    let expired_before = holds_expired(&host);
    // No hold starts before this.
    let applied = Instant::now();
    let uids = apply_replicas(&client, ALL, 1).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod_of: HashMap<String, String> = eventually(
        Duration::from_secs(120),
        "a pod of every PodReplica, waiting for the paused scheduler",
        || async {
            let list = pods.list(&ListParams::default().labels(LABEL)).await.ok()?;
            let by: HashMap<String, String> = list
                .items
                .iter()
                .filter_map(|p| Some((owner(p)?, p.metadata.name.clone()?)))
                .collect();
            (by.len() == ALL).then_some(by)
        },
    )
    .await;
    let nodes: Vec<String> = Api::<k8s_openapi::api::core::v1::Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert!(!nodes.is_empty(), "no node");
    let created = Instant::now();
    // Something went wrong for the stuck ones, as the scheduler says it: a condition False.
    let mut stuck_at = HashMap::new();
    for uid in &uids[BOUND..BOUND + STUCK] {
        let status = serde_json::json!({"status": {"conditions": [{"type": "PodScheduled",
            "status": "False", "reason": "Unschedulable", "message": "the test says so"}]}});
        pods.patch_status(
            &pod_of[uid],
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&status),
        )
        .await
        .unwrap();
        stuck_at.insert(uid.clone(), Instant::now());
    }
    // The queue: one pod bound at a time, in the order of their PodReplicas.
    let mut bound_at = HashMap::new();
    for (i, uid) in uids[..BOUND].iter().enumerate() {
        let name = &pod_of[uid];
        let binding = serde_json::json!({"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name, "namespace": "default"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": nodes[i % nodes.len()]}});
        pods.create_subresource::<serde_json::Value, serde_json::Value>(
            "binding",
            name,
            &kube::api::PostParams::default(),
            &binding,
        )
        .await
        .unwrap_or_else(|e| panic!("binding {name}: {e}"));
        bound_at.insert(uid.clone(), Instant::now());
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    let queued_for = created.elapsed();
    println!("{BOUND} pods bound one at a time over {queued_for:.1?} (the wait: {WAIT:?})");
    all_converged_at(&client, &uids[..BOUND], 1, "the bound pods Running").await;
    // The stuck and the left ones: their status says their pod is pending.
    let what = "a status of every stuck and left PodReplica saying its pod is pending";
    eventually(WAIT * 10, what, || {
        let p = pending.lock().unwrap();
        std::future::ready(
            uids[BOUND..]
                .iter()
                .all(|u| p.contains_key(u))
                .then_some(()),
        )
    })
    .await;
    let last_step = seen.lock().unwrap().last_step.expect("pod steps seen");
    // A whole wait after the last step, and nothing in flight: every hold that could run
    // out has.
    eventually(
        WAIT * 4,
        "a whole wait after the last step, nothing in flight",
        || {
            std::future::ready(
                (last_step.elapsed() >= WAIT * 2 && in_flight(&host) == Some(0.0)).then_some(()),
            )
        },
    )
    .await;
    let expired = holds_expired(&host) - expired_before;
    let pending = pending.lock().unwrap().clone();
    // The bound ones: none decided with its pod pending, as long as its pod was bound within
    // the longest a wait is kept for a pod waiting its turn (ten waits from its hold; on a
    // machine slow enough to take longer, those later are not judged).
    let judged: Vec<&String> = uids[..BOUND]
        .iter()
        .filter(|u| bound_at[*u].duration_since(applied) < WAIT * 9)
        .collect();
    let waited_long = judged
        .iter()
        .filter(|u| bound_at[**u].duration_since(created) > WAIT)
        .count();
    let early: Vec<usize> = judged
        .iter()
        .filter(|u| pending.contains_key(**u))
        .filter_map(|u| uids.iter().position(|x| x == *u))
        .collect();
    let unjudged_pending = uids[..BOUND]
        .iter()
        .filter(|u| !judged.contains(u) && pending.contains_key(*u))
        .count();
    let stuck_lag: Vec<Duration> = uids[BOUND..BOUND + STUCK]
        .iter()
        .map(|u| pending[u].saturating_duration_since(stuck_at[u]))
        .collect();
    let left_lag: Vec<(bool, Duration)> = uids[BOUND + STUCK..]
        .iter()
        .map(|u| {
            let at = pending[u];
            (at >= last_step, at.saturating_duration_since(last_step))
        })
        .collect();
    println!(
        "{} of {BOUND} bound pods judged ({waited_long} waited longer than a wait); decided with their pod pending: {early:?}; holds run out: {expired}; stuck: status after its condition {stuck_lag:?}; left: status after the last pod step {left_lag:?}",
        judged.len()
    );
    assert!(
        waited_long >= BOUND / 2,
        "only {waited_long} pods waited longer than a wait for their turn: the test did not make a queue"
    );
    for i in &early {
        let u = &uids[*i];
        println!(
            "pr-{i}: its status said pending {:?} after the PodReplicas were applied, its pod was bound at {:?}",
            pending[u].saturating_duration_since(applied),
            bound_at[u].saturating_duration_since(applied),
        );
    }
    assert!(
        early.is_empty(),
        "PodReplicas decided with their pod waiting its turn (pr-N): {early:?}"
    );
    // Holds run out: the stuck and the left ones, and any bound too late to be judged.
    assert_eq!(
        expired,
        (STUCK + LEFT + unjudged_pending) as f64,
        "holds run out"
    );
    for lag in &stuck_lag {
        assert!(
            // (The host may see the condition a few milliseconds before the test has the
            // patch's answer.)
            *lag + Duration::from_millis(500) >= WAIT && *lag < WAIT + Duration::from_secs(20),
            "a stuck pod's PodReplica decided {lag:?} after its condition (the wait: {WAIT:?})"
        );
    }
    // Held while the others moved, unless the queue outlasted the longest a hold is kept
    // (a machine slow enough to take that long): then it came by that longest.
    let within_cap = last_step.duration_since(applied) < WAIT * 9;
    for (after, lag) in &left_lag {
        assert!(
            (*after || !within_cap) && *lag < WAIT + Duration::from_secs(20),
            "a left pod's PodReplica decided {lag:?} after the last pod step (after it: {after})"
        );
    }
    // The scheduler resumes: every PodReplica converges.
    drop(paused);
    all_converged_at(&client, &uids, 1, "every PodReplica Running once scheduled").await;
    sampler.held(&uids, 1, ALL).await;
    pending_task.abort();
    for w in watches {
        w.abort();
    }
}
