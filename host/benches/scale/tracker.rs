//! The pod tracker: one watch on every PodReplica pod, kept for the whole run. It knows the
//! live (not terminating) pods per PodReplica at every event, records the most any one ever
//! had in the current phase, and tells waiters when a new pod of a PodReplica appears. A
//! watch sees every change in order, so nothing between two looks is missed.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::broadcast;
use tokio::task::AbortHandle;

/// The label PodReplica puts on its pods (value: the PodReplica's name).
pub const LABEL: &str = "app.example.com/podreplica";

#[derive(Default)]
struct State {
    /// Live pod names per PodReplica name.
    live: HashMap<String, HashSet<String>>,
    /// Running live pods per PodReplica name.
    running: HashMap<String, HashSet<String>>,
    /// The most live pods any PodReplica had since the phase began.
    most: usize,
    /// The first PodReplica that had that many, and the pods it had then.
    most_of: (String, Vec<String>),
    /// When the watch last changed the live or Running pods of each PodReplica.
    changed: HashMap<String, Instant>,
}

/// A running tracker; stops with the process, or at [`Tracker::stop`].
#[derive(Clone)]
pub struct Tracker {
    state: Arc<Mutex<State>>,
    created: broadcast::Sender<(String, Instant)>,
    /// The label whose value names a pod's owner.
    key: &'static str,
    watching: Arc<OnceLock<AbortHandle>>,
}

impl Tracker {
    /// Starts watching the PodReplica pods of namespace `default`.
    pub fn start(client: Client) -> Tracker {
        Self::start_by(client, LABEL)
    }

    /// Starts watching the pods of namespace `default` that carry label `key`, each counted
    /// under that label's value as its owner.
    pub fn start_by(client: Client, key: &'static str) -> Tracker {
        let (created, _) = broadcast::channel(4096);
        let tracker = Tracker {
            state: Arc::default(),
            created,
            key,
            watching: Arc::default(),
        };
        let t = tracker.clone();
        let task = tokio::spawn(async move {
            let pods: Api<Pod> = Api::namespaced(client, "default");
            let mut events = watcher(pods, watcher::Config::default().labels(key))
                .default_backoff()
                .boxed();
            while let Some(e) = events.next().await {
                match e {
                    Ok(watcher::Event::Apply(p)) | Ok(watcher::Event::InitApply(p)) => t.seen(&p),
                    Ok(watcher::Event::Delete(p)) => t.gone(&p),
                    _ => {}
                }
            }
        });
        let _ = tracker.watching.set(task.abort_handle());
        tracker
    }

    /// Stops the watch.
    pub fn stop(&self) {
        if let Some(task) = self.watching.get() {
            task.abort();
        }
    }

    fn seen(&self, pod: &Pod) {
        let (Some(owner), Some(name)) = (self.owner_of(pod), pod.metadata.name.clone()) else {
            return;
        };
        if pod.metadata.deletion_timestamp.is_some() {
            return self.gone(pod);
        }
        let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
        let mut st = self.state.lock().unwrap();
        let most = st.most;
        let live = st.live.entry(owner.clone()).or_default();
        let new = live.insert(name.clone());
        let n = live.len();
        if n > most {
            let pods = live.iter().cloned().collect();
            st.most = n;
            st.most_of = (owner.clone(), pods);
        }
        let run = st.running.entry(owner.clone()).or_default();
        let moved = if running {
            run.insert(name)
        } else {
            run.remove(&name)
        };
        if new || moved {
            st.changed.insert(owner.clone(), Instant::now());
        }
        drop(st);
        if new {
            let _ = self.created.send((owner, Instant::now()));
        }
    }

    fn gone(&self, pod: &Pod) {
        let (Some(owner), Some(name)) = (self.owner_of(pod), pod.metadata.name.as_ref()) else {
            return;
        };
        let mut st = self.state.lock().unwrap();
        let mut moved = false;
        if let Some(l) = st.live.get_mut(&owner) {
            moved |= l.remove(name);
        }
        if let Some(r) = st.running.get_mut(&owner) {
            moved |= r.remove(name);
        }
        if moved {
            st.changed.insert(owner, Instant::now());
        }
    }

    /// When the watch last changed the live or Running pods of `owner` (the event, not
    /// the look that noticed it).
    pub fn changed_at(&self, owner: &str) -> Option<Instant> {
        self.state.lock().unwrap().changed.get(owner).copied()
    }

    /// Whether every one of `owners` has exactly `size` live pods, all Running.
    pub fn all_at(&self, owners: &[String], size: usize) -> bool {
        let st = self.state.lock().unwrap();
        owners.iter().all(|o| {
            st.live.get(o).map_or(0, HashSet::len) == size
                && st.running.get(o).map_or(0, HashSet::len) == size
        })
    }

    /// Live pod names of `owner`.
    pub fn live(&self, owner: &str) -> Vec<String> {
        let st = self.state.lock().unwrap();
        st.live
            .get(owner)
            .map(|l| l.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The most live pods any PodReplica had since the last call; starts a new phase.
    pub fn take_most(&self) -> usize {
        let mut st = self.state.lock().unwrap();
        let most = st.most;
        st.most = st.live.values().map(HashSet::len).max().unwrap_or(0);
        most
    }

    /// The first PodReplica that had the most live pods since the phase began, and those
    /// pods (what a failed bound names).
    pub fn most_of(&self) -> (String, Vec<String>) {
        self.state.lock().unwrap().most_of.clone()
    }

    fn owner_of(&self, pod: &Pod) -> Option<String> {
        pod.metadata.labels.as_ref()?.get(self.key).cloned()
    }

    /// New pods as they appear: (PodReplica name, when the watch showed it).
    pub fn created(&self) -> broadcast::Receiver<(String, Instant)> {
        self.created.subscribe()
    }
}
