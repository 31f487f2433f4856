//! A fleet of PodReplicas at size: applying many at once, waiting until every one has its
//! pods, and the sampler that watches for the one thing that must never happen (an owner
//! with more live pods than its size) for the whole of a test.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams, ObjectMeta};
use serde_json::json;

use super::diagnose::pods_and_nodes;
use super::{apply, podreplica_resource};

/// The label PodReplica puts on its pods.
pub const LABEL: &str = "app.example.com/podreplica";

/// The controlling owner UID of a live (not terminating) pod.
fn live_owner(meta: &ObjectMeta) -> Option<&str> {
    if meta.deletion_timestamp.is_some() {
        return None;
    }
    let owners = meta.owner_references.as_deref()?;
    owners
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.as_str())
}

/// Live (not terminating) pods per controlling owner UID, and how many are Running.
pub async fn live_by_owner(client: &Client) -> Option<HashMap<String, (usize, usize)>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let list = pods.list(&ListParams::default().labels(LABEL)).await.ok()?;
    let mut by_owner: HashMap<String, (usize, usize)> = HashMap::new();
    for p in &list.items {
        let Some(owner) = live_owner(&p.metadata) else {
            continue;
        };
        let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
        let e = by_owner.entry(owner.to_string()).or_default();
        e.0 += 1;
        e.1 += usize::from(phase == Some("Running"));
    }
    Some(by_owner)
}

/// Live (not terminating) pods per controlling owner UID, from a metadata-only list: the
/// sampler's cheap look (the API server sends and the test parses only metadata). Each pod
/// as "name (created at)", for the report of an owner seen over its size.
pub async fn live_pods(client: &Client) -> Option<HashMap<String, Vec<String>>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let list = pods
        .list_metadata(&ListParams::default().labels(LABEL))
        .await
        .ok()?;
    let mut by_owner: HashMap<String, Vec<String>> = HashMap::new();
    for p in &list.items {
        let m = &p.metadata;
        if let Some(owner) = live_owner(m) {
            let created = m.creation_timestamp.as_ref().map(|t| t.0.to_string());
            by_owner.entry(owner.to_string()).or_default().push(format!(
                "{} ({})",
                m.name.as_deref().unwrap_or_default(),
                created.unwrap_or_default()
            ));
        }
    }
    Some(by_owner)
}

/// The test's current phase, for the sampler's report.
#[derive(Clone, Default)]
pub struct Phase(Arc<Mutex<String>>);

impl Phase {
    pub fn set(&self, what: &str) {
        *self.0.lock().unwrap() = what.to_string();
    }

    pub fn get(&self) -> String {
        self.0.lock().unwrap().clone()
    }
}

/// An owner seen over the bound: the first time, in which phase, with which pods.
struct Overshoot {
    phase: String,
    at: Duration,
    pods: Vec<String>,
}

/// The sampler: lists without pause until stopped; keeps the most live pods per owner, and
/// for each owner seen over `bound` the first such look.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    lists: Arc<AtomicUsize>,
    most: Arc<Mutex<HashMap<String, usize>>>,
    over: Arc<Mutex<HashMap<String, Overshoot>>>,
    task: tokio::task::JoinHandle<()>,
    started: Instant,
}

impl Sampler {
    /// Starts listing; an owner with more than `bound` live pods is reported.
    pub fn start(client: Client, phase: Phase, bound: usize) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let lists = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(Mutex::new(HashMap::new()));
        let over = Arc::new(Mutex::new(HashMap::new()));
        let started = Instant::now();
        let (s, l, m, o) = (stop.clone(), lists.clone(), most.clone(), over.clone());
        let task = tokio::spawn(async move {
            while !s.load(Ordering::SeqCst) {
                if let Some(seen) = live_pods(&client).await {
                    let mut most = m.lock().unwrap();
                    let mut over = o.lock().unwrap();
                    for (owner, pods) in seen {
                        let e = most.entry(owner.clone()).or_insert(0);
                        *e = (*e).max(pods.len());
                        if pods.len() > bound {
                            over.entry(owner).or_insert_with(|| Overshoot {
                                phase: phase.get(),
                                at: started.elapsed(),
                                pods,
                            });
                        }
                    }
                    l.fetch_add(1, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        Sampler {
            stop,
            lists,
            most,
            over,
            task,
            started,
        }
    }

    /// Stops it; returns (lists per second, the most live pods of any owner, a report of
    /// the owners seen over the bound, one line each).
    pub async fn finish(self, uids: &[String]) -> (f64, usize, Vec<String>) {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.unwrap();
        let rate = self.lists.load(Ordering::SeqCst) as f64 / self.started.elapsed().as_secs_f64();
        let most = self.most.lock().unwrap();
        let worst = most.values().copied().max().unwrap_or(0);
        let over = self.over.lock().unwrap();
        let mut report: Vec<(Duration, String)> = over
            .iter()
            .map(|(uid, o)| {
                let name = uids
                    .iter()
                    .position(|u| u == uid)
                    .map_or(uid.clone(), |i| format!("pr-{i}"));
                (
                    o.at,
                    format!(
                        "{name}: {} live at {:.1?} during \"{}\": {}",
                        o.pods.len(),
                        o.at,
                        o.phase,
                        o.pods.join(", ")
                    ),
                )
            })
            .collect();
        report.sort();
        (rate, worst, report.into_iter().map(|(_, l)| l).collect())
    }
}

/// Applies PodReplicas `pr-0` … `pr-{count-1}` of `size` in `default`, 16 at a time;
/// their UIDs in order.
pub async fn apply_replicas(client: &Client, count: usize, size: usize) -> Vec<String> {
    let ar = podreplica_resource();
    futures::stream::iter(0..count)
        .map(|i| {
            let ar = ar.clone();
            async move {
                let pr = json!({"apiVersion": "app.example.com/v1alpha1", "kind": "PodReplica",
                    "metadata": {"name": format!("pr-{i}"), "namespace": "default"},
                    "spec": {"size": size}});
                apply(client, &ar, "default", &pr)
                    .await
                    .unwrap()
                    .metadata
                    .uid
                    .unwrap()
            }
        })
        .buffered(16)
        .collect()
        .await
}

/// Waits until every PodReplica has exactly `size` live pods, all Running.
/// On a timeout it says which are off and why (pods unscheduled, nodes not Ready).
pub async fn all_converged_at(client: &Client, uids: &[String], size: usize, what: &str) {
    let started = Instant::now();
    let timeout = Duration::from_secs(300);
    loop {
        if let Some(seen) = live_by_owner(client).await
            && uids.iter().all(|u| seen.get(u) == Some(&(size, size)))
        {
            break;
        }
        if started.elapsed() > timeout {
            let seen = live_by_owner(client).await.unwrap_or_default();
            let off: Vec<_> = uids
                .iter()
                .enumerate()
                .filter_map(|(i, u)| {
                    let got = seen.get(u).copied().unwrap_or_default();
                    (got != (size, size)).then(|| format!("pr-{i} {got:?}"))
                })
                .collect();
            panic!(
                "timed out after {timeout:?} waiting for: {what}\n\
                 {} of {} PodReplicas off (live, running): {}\n{}",
                off.len(),
                uids.len(),
                off.iter().take(10).cloned().collect::<Vec<_>>().join(", "),
                pods_and_nodes(client, "default", LABEL).await
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!("{what}: {:?}", started.elapsed());
}
