//! The plugin manager: which plugin versions run, and the swap of a running plugin for a
//! new version.
//!
//! Guarantees: a new version is compiled and validated before anything changes; a
//! refused version leaves the running one alone; a swap is atomic (reconciles already
//! running finish on the old version, later ones use the new one) and every existing
//! object is reconciled again; a version that watches differently restarts its controller;
//! the same bytes again change nothing. Offers are handled one at a time, in order, so of
//! two quick uploads the later one ends up active. The map of running plugins is locked
//! only to read or change it: never across a compile, a question to the API server or a
//! controller's stop, so the readers (readiness, the shard announcement, the reporter) do
//! not wait for an offer.
//!
//! Identity: a plugin is its name, and it owns its primary kind.
//! - A source (a WasmPlugin, a file) that runs plugin A cannot turn into plugin B
//!   (`NameChanged`): a renamed plugin is a new upload or file, and the old one goes with its
//!   source.
//! - A primary kind is reconciled by one plugin only: a second plugin that declares it is
//!   refused (`PrimaryKindClaimed`), and a plugin cannot change its primary kind
//!   (`PrimaryKindChanged`).
//! - One rule decides between sources of the same name: an upload (WasmPlugin) wins over a
//!   file of the plugins directory, at any time. A file whose plugin runs from an upload is
//!   refused (`Superseded`) and runs again once that WasmPlugin is deleted; an upload
//!   replaces a version that runs from a file. Two uploads (or two files) of the same name:
//!   the first one keeps it (`NameTaken`).
//! - A controller that does not stop within its grace period is aborted.
//!
//! Approval ([`crate::registry::approval`]): a version (active or candidate) is refused, the running
//! version staying, when a kind it declares is not what the API server serves
//! (`KindMismatch`), a relation's kind is not served (`KindNotServed`), the host may not
//! list and watch what it watches (`HostCannotWatch`) or its plugin's ServiceAccount lacks
//! a rule the version declares (`PermissionsMissing`); but for a mismatch, its source
//! offers it again until the CRD or the RBAC is there.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::channel::mpsc;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::registry::origin::Origin;
pub use crate::registry::refusal::{Reason, Rejection};
use crate::registry::runner::{Prepared, Runner};
use crate::registry::slot::PluginSlot;
use crate::rollout::{Candidate, Mode, Policy};
use crate::runtime::{Limits, LoadedPlugin, PluginInfo, Sandbox, digest_of};
use crate::telemetry::health::Health;
use crate::telemetry::metrics::{LoadLabels, LoadResult, Metrics};

/// What happened to an accepted version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The same bytes already run: nothing changed.
    Unchanged,
    /// A new plugin: its controller started.
    Started,
    /// The running plugin now uses this version.
    Swapped,
    /// The version watches differently: its controller was restarted.
    Restarted,
}

/// An accepted version.
#[derive(Debug)]
pub struct Accepted {
    /// What it declares.
    pub info: PluginInfo,
    /// Its digest.
    pub digest: String,
    /// What changed.
    pub change: Change,
    /// The pass over every object the change starts, once this is dropped.
    pub pass: Pass,
}

impl Accepted {
    fn unchanged(info: PluginInfo, digest: String) -> Self {
        Accepted {
            info,
            digest,
            change: Change::Unchanged,
            pass: Pass::default(),
        }
    }
}

/// The pass over every object of a plugin that a swap (or a new candidate) starts, sent
/// when dropped: the caller writes the verdict first, so that its status write does not
/// queue behind a thousand reconciles, and the pass starts whatever the caller does.
#[derive(Debug, Default)]
pub struct Pass(Option<mpsc::UnboundedSender<()>>);

impl Pass {
    fn of(running: &Running) -> Self {
        Pass(Some(running.reconcile_all.clone()))
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.unbounded_send(());
        }
    }
}

struct Running {
    slot: Arc<PluginSlot>,
    origin: Origin,
    stop: watch::Sender<bool>,
    reconcile_all: mpsc::UnboundedSender<()>,
    /// `None` while the controller stops for a restart (the entry stays, so that readers
    /// see the plugin run throughout).
    task: Option<JoinHandle<()>>,
}

/// Starts, swaps and stops plugin controllers.
pub struct Manager {
    runner: Arc<dyn Runner>,
    health: Arc<Health>,
    metrics: Arc<Metrics>,
    limits: Limits,
    shutdown: watch::Receiver<bool>,
    /// Held by the offer (or removal) under way: one at a time, in order.
    turn: tokio::sync::Mutex<()>,
    running: Mutex<HashMap<String, Running>>,
    /// How long a version that watches differently may take to list its caches before it
    /// is refused (`CachesNotListed`), the running version deciding meanwhile.
    list_timeout: Duration,
}

/// How long the caches of a version that watches differently may take to list, by default.
pub const LIST_TIMEOUT: Duration = Duration::from_secs(120);

/// How long a stopped controller may take to finish its running reconciles.
pub const STOP_GRACE: Duration = Duration::from_secs(30);

fn same_watches(a: &PluginInfo, b: &PluginInfo) -> bool {
    a.primary == b.primary && a.relations == b.relations && a.finalizer == b.finalizer
}

impl Manager {
    /// A manager that runs its plugins through `runner` until `shutdown` turns true.
    pub fn new(
        runner: Arc<dyn Runner>,
        health: Arc<Health>,
        metrics: Arc<Metrics>,
        limits: Limits,
        shutdown: watch::Receiver<bool>,
    ) -> Self {
        Manager {
            runner,
            health,
            metrics,
            limits,
            shutdown,
            turn: tokio::sync::Mutex::default(),
            running: Mutex::default(),
            list_timeout: LIST_TIMEOUT,
        }
    }

    /// The same manager, giving a version that watches differently `timeout` to list its
    /// caches (`--list-timeout-seconds`).
    pub fn with_list_timeout(mut self, timeout: Duration) -> Self {
        self.list_timeout = timeout;
        self
    }

    fn running_map(&self) -> MutexGuard<'_, HashMap<String, Running>> {
        self.running.lock().expect("running plugins lock")
    }

    /// The sandbox plugins are loaded into.
    pub fn sandbox(&self) -> &Sandbox {
        self.runner.sandbox()
    }

    /// The host's metrics.
    pub(crate) fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Name, digest and origin of every running plugin.
    pub async fn running(&self) -> Vec<(String, String, Origin)> {
        self.running_map()
            .iter()
            .map(|(name, r)| {
                (
                    name.clone(),
                    r.slot.current().digest.clone(),
                    r.origin.clone(),
                )
            })
            .collect()
    }

    /// What every running plugin declares, with the primaries its cache holds (this
    /// shard's, when sharded).
    pub async fn primaries(&self) -> Vec<(PluginInfo, usize)> {
        self.running_map()
            .values()
            .map(|r| {
                let held = r.slot.primaries().map_or(0, |s| s.len());
                (r.slot.current().info.clone(), held)
            })
            .collect()
    }

    fn start(&self, prepared: Box<dyn Prepared>, plugin: LoadedPlugin, origin: &Origin) -> Running {
        let name = plugin.info.name.clone();
        let slot = Arc::new(PluginSlot::new(plugin));
        let (stop, stop_rx) = watch::channel(false);
        let (reconcile_all, all_rx) = mpsc::unbounded();
        let synced = self.health.flag(&format!("caches/{name}"));
        synced.set(false);
        let mut global = self.shutdown.clone();
        let mut own = stop_rx;
        let shutdown = async move {
            tokio::select! {
                _ = global.wait_for(|v| *v) => {}
                _ = own.wait_for(|v| *v) => {}
            }
        };
        let task = prepared.start(slot.clone(), synced, all_rx, Box::pin(shutdown));
        Running {
            slot,
            origin: origin.clone(),
            stop,
            reconcile_all,
            task: Some(task),
        }
    }

    /// Stops a controller: tells it to, waits [`STOP_GRACE`] for its reconciles, then
    /// aborts it.
    async fn stop(origin: &Origin, stop: &watch::Sender<bool>, task: Option<JoinHandle<()>>) {
        let _ = stop.send(true);
        let Some(mut task) = task else { return };
        if tokio::time::timeout(STOP_GRACE, &mut task).await.is_err() {
            tracing::warn!(%origin, "controller did not stop within {STOP_GRACE:?}: aborted");
            task.abort();
            let _ = task.await;
        }
    }

    /// Checks the identity rules (module docs) for `info` offered from `origin`.
    fn check_identity(
        running: &HashMap<String, Running>,
        origin: &Origin,
        info: &PluginInfo,
    ) -> Result<(), Rejection> {
        let name = &info.name;
        if let Some((other, _)) = running
            .iter()
            .find(|(n, r)| r.origin == *origin && *n != name)
        {
            return Err(Rejection::new(
                Reason::NameChanged,
                format!(
                    "{origin} runs plugin `{other}`; this version is named `{name}`: a plugin of another name needs its own upload or file"
                ),
            ));
        }
        if let Some((other, _)) = running
            .iter()
            .find(|(n, r)| *n != name && r.slot.current().info.primary == info.primary)
        {
            return Err(Rejection::new(
                Reason::PrimaryKindClaimed,
                format!(
                    "{}.{} is reconciled by plugin `{other}`; one primary kind has one plugin",
                    info.primary.kind, info.primary.group
                ),
            ));
        }
        if let Some(r) = running.get(name).filter(|r| r.origin != *origin) {
            if r.origin.is_upload() && !origin.is_upload() {
                return Err(Rejection::new(
                    Reason::Superseded,
                    format!("plugin `{name}` runs from the upload {}", r.origin),
                ));
            }
            if r.origin.is_upload() == origin.is_upload() {
                return Err(Rejection::new(
                    Reason::NameTaken,
                    format!("plugin `{name}` runs from {}", r.origin),
                ));
            }
        }
        let current = running.get(name).map(|r| r.slot.current());
        if let Some(current) = current.filter(|c| c.info.primary != info.primary) {
            return Err(Rejection::new(
                Reason::PrimaryKindChanged,
                format!(
                    "plugin `{name}` reconciles {}.{}, this version declares {}.{}: a different primary kind needs a new plugin name",
                    current.info.primary.kind,
                    current.info.primary.group,
                    info.primary.kind,
                    info.primary.group
                ),
            ));
        }
        Ok(())
    }

    /// Reconciles every object of every running plugin again (on taking the lead).
    pub async fn reconcile_everything(&self) {
        for r in self.running_map().values() {
            let _ = r.reconcile_all.unbounded_send(());
        }
    }

    /// The origin a plugin runs from, if it runs.
    pub async fn origin_of(&self, name: &str) -> Option<Origin> {
        self.running_map().get(name).map(|r| r.origin.clone())
    }

    /// Offers a version from `origin`; the identity rules of the module docs decide between
    /// sources.
    pub async fn offer(&self, origin: &Origin, bytes: Vec<u8>) -> Result<Accepted, Rejection> {
        let _turn = self.turn.lock().await;
        let digest = digest_of(&bytes);
        let unchanged = self
            .running_map()
            .values()
            .find(|r| r.origin == *origin && r.slot.current().digest == digest)
            .map(|r| r.slot.current().info.clone());
        if let Some(info) = unchanged {
            return Ok(Accepted::unchanged(info, digest));
        }
        let plugin = match self.runner.sandbox().load_async(bytes, self.limits).await {
            Ok(p) => p,
            Err(e) => {
                self.count(&origin.expected_name(), LoadResult::Rejected);
                return Err(Rejection::from_load(&e));
            }
        };
        let info = plugin.info.clone();
        let name = info.name.clone();
        {
            let mut running = self.running_map();
            if let Err(mut r) = Self::check_identity(&running, origin, &info) {
                if r.reason != Reason::Superseded {
                    self.count(&name, LoadResult::Rejected);
                }
                r.plugin = Some(name);
                return Err(r);
            }
            if let Some(r) = running.get_mut(&name)
                && r.slot.current().digest == digest
            {
                // The same bytes from an upload take over the file's plugin: it now runs
                // from the upload (whose candidate and deletion then concern it).
                r.origin = origin.clone();
                return Ok(Accepted::unchanged(info, digest));
            }
        }
        if let Err(mut r) = self.runner.approve(&info).await {
            tracing::warn!(plugin = %name, version = %info.version, reason = %r.reason, "{}", r.message);
            r.plugin = Some(name);
            return Err(r);
        }
        // What runs now: nothing, a version that watches the same way (swapped in place), or
        // one that watches differently (its controller restarts).
        let restart = {
            let mut running = self.running_map();
            match running.get_mut(&name) {
                None => false,
                Some(r) if same_watches(&r.slot.current().info, &info) => {
                    self.count(&name, LoadResult::Accepted);
                    let old = r.slot.swap(plugin);
                    r.origin = origin.clone();
                    tracing::info!(plugin = %name, from = %old.info.version, to = %info.version, %digest, "swapped");
                    return Ok(Accepted {
                        info,
                        digest,
                        change: Change::Swapped,
                        pass: Pass::of(r),
                    });
                }
                Some(_) => true,
            }
        };
        // Taken before the old controller lets go: a cache both versions use stays listed
        // across the restart.
        let prepared = self.runner.prepare(&info);
        let change = if restart {
            // The running version decides until the new one's caches are listed: a cache
            // that cannot list (a slow or failing watch) leaves it running, and the new
            // version is refused with the reason (its source offers it again).
            if tokio::time::timeout(self.list_timeout, prepared.listed())
                .await
                .is_err()
            {
                let running = self
                    .running_map()
                    .get(&name)
                    .map(|r| r.slot.current().info.version.clone())
                    .unwrap_or_default();
                let message = format!(
                    "the caches of what {} watches were not listed within {:?}; {running} keeps deciding",
                    info.version, self.list_timeout
                );
                tracing::warn!(plugin = %name, version = %info.version, "{message}");
                self.count(&name, LoadResult::Rejected);
                let mut r = Rejection::new(Reason::CachesNotListed, message);
                r.plugin = Some(name);
                return Err(r);
            }
            let old = {
                let mut running = self.running_map();
                running
                    .get_mut(&name)
                    .map(|r| (r.slot.current(), r.stop.clone(), r.task.take()))
            };
            if let Some((old, stop, task)) = old {
                tracing::info!(plugin = %name, "the new version watches differently: restarting its controller");
                Self::stop(origin, &stop, task).await;
                if let Some(fin) = old.info.finalizer.as_deref()
                    && info.finalizer.as_deref() != Some(fin)
                {
                    self.runner.release_finalizer(&old.info, fin).await;
                }
            }
            Change::Restarted
        } else {
            Change::Started
        };
        self.count(&name, LoadResult::Accepted);
        let started = self.start(prepared, plugin, origin);
        self.running_map().insert(name, started);
        Ok(Accepted {
            info,
            digest,
            change,
            pass: Pass::default(),
        })
    }

    /// Offers a candidate version for the plugin that runs from `origin`: it must be the same
    /// plugin (name) and watch the same way (so it can be asked the very same question).
    /// The same candidate again keeps its counts; a new mode or policy applies at once. Every
    /// object is reconciled again, so the candidate meets each of them soon.
    pub async fn offer_candidate(
        &self,
        origin: &Origin,
        bytes: Vec<u8>,
        mode: Mode,
        policy: Policy,
    ) -> Result<Accepted, Rejection> {
        let _turn = self.turn.lock().await;
        let digest = digest_of(&bytes);
        let slot = {
            let running = self.running_map();
            let Some(r) = running.values().find(|r| r.origin == *origin) else {
                return Err(Rejection::new(
                    Reason::NoActiveVersion,
                    format!("nothing runs from {origin}: a candidate needs an active version"),
                ));
            };
            if let Some(old) = r.slot.candidate().filter(|c| c.plugin.digest == digest) {
                let info = old.plugin.info.clone();
                if old.mode == mode && old.policy == policy {
                    return Ok(Accepted::unchanged(info, digest));
                }
                r.slot.set_candidate(Some(Arc::new(Candidate {
                    plugin: old.plugin.clone(),
                    mode,
                    policy,
                    stats: old.stats.clone(),
                    in_flight: Default::default(),
                })));
                tracing::info!(plugin = %info.name, candidate = %info.version, mode = ?mode, "candidate mode or policy changed");
                return Ok(Accepted {
                    info,
                    digest,
                    change: Change::Swapped,
                    pass: if old.mode != mode {
                        Pass::of(r)
                    } else {
                        Pass::default()
                    },
                });
            }
            r.slot.clone()
        };
        let active = slot.current();
        let plugin = match self.runner.sandbox().load_async(bytes, self.limits).await {
            Ok(p) => p,
            Err(e) => return Err(Rejection::from_load(&e)),
        };
        let info = plugin.info.clone();
        let name = &active.info.name;
        if &info.name != name {
            return Err(Rejection::new(
                Reason::CandidateNameDiffers,
                format!(
                    "{origin} runs plugin `{name}`; the candidate is named `{}`",
                    info.name
                ),
            ));
        }
        if !same_watches(&active.info, &info) {
            return Err(Rejection::new(
                Reason::CandidateWatchesDifferently,
                format!(
                    "the candidate declares other relations, primary kind or finalizer than {} {}: it could not decide on the same observed value; push it as the active version instead",
                    name, active.info.version
                ),
            ));
        }
        self.runner.approve(&info).await?;
        let candidate = Candidate {
            plugin: Arc::new(plugin),
            mode,
            policy,
            stats: Default::default(),
            in_flight: Default::default(),
        };
        let running = self.running_map();
        // The turn is held: what runs from `origin` is still the slot read above.
        let Some(r) = running.values().find(|r| Arc::ptr_eq(&r.slot, &slot)) else {
            return Err(Rejection::new(
                Reason::NoActiveVersion,
                format!("nothing runs from {origin}: a candidate needs an active version"),
            ));
        };
        r.slot.set_candidate(Some(Arc::new(candidate)));
        tracing::info!(plugin = %name, active = %active.info.version, candidate = %info.version, %digest, mode = ?mode, "candidate decides beside the active version");
        Ok(Accepted {
            info,
            digest,
            change: Change::Started,
            pass: Pass::of(r),
        })
    }

    /// Drops the candidate of the plugin that runs from `origin`, if it has one; objects a
    /// canary decided are reconciled again by the active version.
    pub async fn drop_candidate(&self, origin: &Origin) {
        for r in self.running_map().values().filter(|r| r.origin == *origin) {
            if let Some(old) = r.slot.set_candidate(None) {
                if matches!(old.mode, Mode::Canary(_)) {
                    let _ = r.reconcile_all.unbounded_send(());
                }
                tracing::info!(plugin = %old.plugin.info.name, candidate = %old.plugin.info.version, "candidate dropped");
            }
        }
    }

    /// Sets whether the decisions of the plugin that runs from `origin` are recorded
    /// (`None`: as the host's `--record` says).
    pub async fn set_record(&self, origin: &Origin, on: Option<bool>) {
        for r in self.running_map().values() {
            if r.origin == *origin {
                r.slot.set_record_switch(on);
            }
        }
    }

    /// The origin and slot of every running plugin.
    pub async fn slots(&self) -> Vec<(Origin, Arc<PluginSlot>)> {
        self.running_map()
            .values()
            .map(|r| (r.origin.clone(), r.slot.clone()))
            .collect()
    }

    /// The origin and slot of every plugin with a candidate.
    pub async fn rollouts(&self) -> Vec<(Origin, Arc<PluginSlot>)> {
        self.running_map()
            .values()
            .filter(|r| r.slot.candidate().is_some())
            .map(|r| (r.origin.clone(), r.slot.clone()))
            .collect()
    }

    /// Stops the plugins that came from `origin`; the objects they made stay, but their
    /// finalizer is released (nothing would ever remove it).
    pub async fn remove(&self, origin: &Origin) {
        let _turn = self.turn.lock().await;
        let removed: Vec<(String, Running)> = {
            let mut running = self.running_map();
            let names: Vec<String> = running
                .iter()
                .filter(|(_, r)| r.origin == *origin)
                .map(|(n, _)| n.clone())
                .collect();
            names
                .into_iter()
                .filter_map(|n| running.remove(&n).map(|r| (n, r)))
                .collect()
        };
        for (name, mut r) in removed {
            tracing::info!(plugin = %name, %origin, "plugin removed: stopping its controller");
            let info = r.slot.current().info.clone();
            Self::stop(origin, &r.stop, r.task.take()).await;
            if let Some(fin) = info.finalizer.as_deref() {
                self.runner.release_finalizer(&info, fin).await;
            }
            self.health.flag(&format!("caches/{name}")).set(true);
        }
    }

    /// Waits until every controller has stopped (after shutdown), at most `grace`; the
    /// ones still running then are aborted.
    pub async fn join(&self, grace: Duration) {
        let mut tasks: Vec<JoinHandle<()>> = self
            .running_map()
            .drain()
            .filter_map(|(_, mut r)| r.task.take())
            .collect();
        if tokio::time::timeout(grace, futures::future::join_all(tasks.iter_mut()))
            .await
            .is_err()
        {
            tracing::warn!(
                ?grace,
                "reconciles still running after the grace period; aborted"
            );
            for t in &tasks {
                t.abort();
            }
        }
    }

    fn count(&self, plugin: &str, result: LoadResult) {
        self.metrics
            .plugin_loads
            .get_or_create(&LoadLabels {
                plugin: plugin.to_string(),
                result,
            })
            .inc();
    }
}

#[cfg(test)]
mod tests;
