//! A fleet of PodReplicas at size: applying many at once, waiting until every one has its
//! pods, and the sampler that watches for the one thing that must never happen (a pod made
//! for an owner that already has as many live pods as its size) for the whole of a test.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams, ObjectMeta};
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
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

/// Live pods per owner, kept from a watch: each pod's owner, and each owner's pods as
/// "name (created at)".
#[derive(Default)]
struct Live {
    owner_of: HashMap<String, String>,
    pods: HashMap<String, BTreeMap<String, String>>,
}

impl Live {
    /// Takes in the pod's latest metadata; returns its owner's live pods if it has one,
    /// and whether the pod is new (not seen live before).
    fn apply(&mut self, m: &ObjectMeta) -> Option<(String, Vec<String>, bool)> {
        let name = m.name.clone().unwrap_or_default();
        let new = !self.owner_of.contains_key(&name);
        self.remove(&name);
        let owner = live_owner(m)?.to_string();
        let created = m.creation_timestamp.as_ref().map(|t| t.0.to_string());
        let shown = format!("{name} ({})", created.unwrap_or_default());
        self.owner_of.insert(name.clone(), owner.clone());
        let pods = self.pods.entry(owner.clone()).or_default();
        pods.insert(name, shown);
        Some((owner, pods.values().cloned().collect(), new))
    }

    fn remove(&mut self, name: &str) {
        if let Some(owner) = self.owner_of.remove(name)
            && let Some(pods) = self.pods.get_mut(&owner)
        {
            pods.remove(name);
        }
    }
}

/// What the sampler found so far.
#[derive(Default)]
struct Seen {
    events: usize,
    most: HashMap<String, usize>,
    over: HashMap<String, Overshoot>,
}

impl Seen {
    /// Looks at an owner's live `pods`: over `bound` is an overshoot when `judged` (a pod
    /// was just made for it, or the whole list was read again).
    fn look(
        &mut self,
        owner: String,
        pods: Vec<String>,
        (bound, judged): (usize, bool),
        phase: &Phase,
        at: Duration,
    ) {
        let e = self.most.entry(owner.clone()).or_insert(0);
        *e = (*e).max(pods.len());
        if judged && pods.len() > bound {
            self.over.entry(owner).or_insert_with(|| Overshoot {
                phase: phase.get(),
                at,
                pods,
            });
        }
    }
}

/// The sampler: watches the PodReplicas' pods (metadata only) until stopped and looks at
/// the owner of every pod that changes, so it sees every state the API server went
/// through, however slow a list of thousands of pods is; keeps the most live pods per
/// owner, and for each owner seen over `bound` the first such look. After a relist (the
/// watch broke, say the API server restarted) it looks at every owner.
pub struct Sampler {
    bound: Arc<std::sync::atomic::AtomicUsize>,
    stop: tokio::sync::watch::Sender<bool>,
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

impl Sampler {
    /// Starts watching; a pod made for an owner that already had `bound` live pods (the
    /// size in force, [`Sampler::set_bound`]) is reported.
    pub fn start(client: Client, phase: Phase, bound: usize) -> Sampler {
        let bound = Arc::new(std::sync::atomic::AtomicUsize::new(bound));
        let in_force = bound.clone();
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let seen = Arc::new(Mutex::new(Seen::default()));
        let started = Instant::now();
        let shared = seen.clone();
        let task = tokio::spawn(async move {
            // Metadata only: the API server sends, and the sampler parses, no pod bodies.
            let pods: Api<PartialObjectMeta<Pod>> = Api::namespaced(client, "default");
            let mut events = watcher(pods, watcher::Config::default().labels(LABEL))
                .default_backoff()
                .boxed();
            let (mut live, mut relisting) = (Live::default(), None::<Live>);
            loop {
                let event = tokio::select! {
                    _ = stopped.changed() => break,
                    event = events.next() => match event {
                        Some(Ok(event)) => event,
                        Some(Err(_)) => continue,
                        None => break,
                    },
                };
                let mut seen = shared.lock().unwrap();
                seen.events += 1;
                let at = started.elapsed();
                let bound = in_force.load(std::sync::atomic::Ordering::SeqCst);
                match event {
                    watcher::Event::Init => relisting = Some(Live::default()),
                    watcher::Event::InitApply(m) => {
                        if let Some(r) = relisting.as_mut() {
                            r.apply(&m.metadata);
                        }
                    }
                    watcher::Event::InitDone => {
                        let before =
                            std::mem::replace(&mut live, relisting.take().unwrap_or_default());
                        for (owner, pods) in &live.pods {
                            // Judged when a pod was made while the watch was away (one it
                            // had not seen); pods of a scale-down still being deleted are not.
                            let made = pods.keys().any(|p| !before.owner_of.contains_key(p));
                            seen.look(
                                owner.clone(),
                                pods.values().cloned().collect(),
                                (bound, made),
                                &phase,
                                at,
                            );
                        }
                    }
                    watcher::Event::Apply(m) => {
                        if let Some((owner, pods, new)) = live.apply(&m.metadata) {
                            seen.look(owner, pods, (bound, new), &phase, at);
                        }
                    }
                    watcher::Event::Delete(m) => {
                        live.remove(m.metadata.name.as_deref().unwrap_or_default())
                    }
                }
            }
        });
        Sampler {
            bound,
            stop,
            seen,
            task,
        }
    }

    /// Sets the size in force from now on: call it before the change that makes it so
    /// (a scale-up's pods are judged against the new size, and a scale-down makes none).
    pub fn set_bound(&self, size: usize) {
        self.bound.store(size, std::sync::atomic::Ordering::SeqCst);
    }

    /// Stops it and asserts what it saw: at least `min_events` pod events, `size` live pods
    /// at most for any owner and exactly that for some (the bound was reached, not just
    /// respected), and no pod made while its owner had the size in force.
    pub async fn held(self, uids: &[String], size: usize, min_events: usize) {
        let (events, worst, over) = self.finish(uids).await;
        println!(
            "sampler: {events} pod events watched; the most live pods of any PodReplica: {worst}"
        );
        assert!(
            events >= min_events && worst == size,
            "the sampler watched {events} pod events for {} PodReplicas (most live pods {worst}, size {size})",
            uids.len()
        );
        assert!(
            over.is_empty(),
            "{} PodReplicas got a pod while they had the size in force live:\n{}",
            over.len(),
            over.join("\n")
        );
    }

    /// Stops it; returns (the watch events it saw, the most live pods of any owner, a
    /// report of the owners seen over the bound, one line each).
    pub async fn finish(self, uids: &[String]) -> (usize, usize, Vec<String>) {
        let _ = self.stop.send(true);
        self.task.await.unwrap();
        let seen = self.seen.lock().unwrap();
        let worst = seen.most.values().copied().max().unwrap_or(0);
        let over = &seen.over;
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
        (
            seen.events,
            worst,
            report.into_iter().map(|(_, l)| l).collect(),
        )
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
