//! The plugin manager: which plugin versions run, and the swap of a running plugin for a
//! new version.
//!
//! Guarantees: a new version is compiled and validated before anything changes; a
//! refused version leaves the running one alone; a swap is atomic (reconciles already
//! running finish on the old version, later ones use the new one) and every existing
//! object is reconciled again; a version that watches differently restarts its controller;
//! the same bytes again change nothing. Offers are handled one at a time, in order, so of
//! two quick uploads the later one ends up active.
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
//! Approval ([`super::approval`]): a version (active or candidate) is refused, the running
//! version staying, when a kind it declares is not what the API server serves
//! (`KindMismatch`), a relation's kind is not served (`KindNotServed`), the host may not
//! list and watch what it watches (`HostCannotWatch`) or its plugin's ServiceAccount lacks
//! a rule the version declares (`PermissionsMissing`); but for a mismatch, its source
//! offers it again until the CRD or the RBAC is there.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::channel::mpsc;
use tokio::sync::{Mutex, watch};
use tokio::task::JoinHandle;

use crate::operator::caches::KindCache;
use crate::operator::context::PluginSlot;
use crate::operator::controller::{ControllerDeps, run_controller};
use crate::operator::finalize;
use crate::ops::health::Health;
use crate::ops::metrics::{LoadLabels, LoadResult, Metrics};
use crate::rollout::{Candidate, Mode, Policy};
use crate::runtime::{Limits, LoadError, LoadedPlugin, PluginInfo, Sandbox, digest_of};

/// Why an offered version was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {message}")]
pub struct Rejection {
    /// CamelCase reason for status conditions and Events.
    pub reason: &'static str,
    /// What is wrong.
    pub message: String,
    /// The plugin the refused version declared, when it got that far.
    pub plugin: Option<String>,
}

impl Rejection {
    /// A rejection with this reason.
    pub fn new(reason: &'static str, message: impl Into<String>) -> Self {
        Rejection {
            reason,
            plugin: None,
            message: message.into(),
        }
    }

    fn from_load(e: &LoadError) -> Self {
        let reason = match e {
            LoadError::NotWasm | LoadError::CoreModule => "NotAComponent",
            LoadError::Compile(_) => "CompileFailed",
            LoadError::World(_) => "WorldMismatch",
            LoadError::Info(_) => "InfoFailed",
            LoadError::InvalidInfo(_) => "InvalidInfo",
        };
        Rejection::new(reason, e.to_string())
    }
}

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
    origin: String,
    stop: watch::Sender<bool>,
    reconcile_all: mpsc::UnboundedSender<()>,
    task: JoinHandle<()>,
}

/// Starts, swaps and stops plugin controllers.
pub struct Manager {
    deps: ControllerDeps,
    health: Arc<Health>,
    metrics: Arc<Metrics>,
    limits: Limits,
    shutdown: watch::Receiver<bool>,
    running: Mutex<HashMap<String, Running>>,
}

/// How long a stopped controller may take to finish its running reconciles.
pub const STOP_GRACE: Duration = Duration::from_secs(30);

fn same_watches(a: &PluginInfo, b: &PluginInfo) -> bool {
    a.primary == b.primary && a.relations == b.relations && a.finalizer == b.finalizer
}

impl Manager {
    /// A manager that runs controllers with `deps` until `shutdown` turns true.
    pub fn new(
        deps: ControllerDeps,
        health: Arc<Health>,
        metrics: Arc<Metrics>,
        limits: Limits,
        shutdown: watch::Receiver<bool>,
    ) -> Self {
        Manager {
            deps,
            health,
            metrics,
            limits,
            shutdown,
            running: Mutex::default(),
        }
    }

    /// The sandbox plugins are loaded into.
    pub fn sandbox(&self) -> &Sandbox {
        &self.deps.sandbox
    }

    /// Name, digest and origin of every running plugin.
    pub async fn running(&self) -> Vec<(String, String, String)> {
        let running = self.running.lock().await;
        running
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
        let running = self.running.lock().await;
        running
            .values()
            .map(|r| {
                let held = r.slot.primaries().map_or(0, |s| s.len());
                (r.slot.current().info.clone(), held)
            })
            .collect()
    }

    /// The shared caches of `info`'s relations, in their order (started if none runs).
    fn caches_for(&self, info: &PluginInfo) -> Vec<Arc<KindCache>> {
        info.relations
            .iter()
            .map(|r| {
                let r = crate::shards::scope::relation_for(r, self.deps.shard.as_deref());
                self.deps.caches.acquire(&r)
            })
            .collect()
    }

    fn start(&self, plugin: LoadedPlugin, caches: Vec<Arc<KindCache>>, origin: &str) -> Running {
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
        let task = tokio::spawn(run_controller(
            self.deps.clone(),
            slot.clone(),
            caches,
            synced,
            all_rx,
            shutdown,
        ));
        Running {
            slot,
            origin: origin.to_string(),
            stop,
            reconcile_all,
            task,
        }
    }

    async fn stop(mut running: Running) {
        let _ = running.stop.send(true);
        if tokio::time::timeout(STOP_GRACE, &mut running.task)
            .await
            .is_err()
        {
            tracing::warn!(origin = %running.origin, "controller did not stop within {STOP_GRACE:?}: aborted");
            running.task.abort();
            let _ = running.task.await;
        }
    }

    /// Checks the identity rules (module docs) for `info` offered from `origin`.
    fn check_identity(
        running: &HashMap<String, Running>,
        origin: &str,
        info: &PluginInfo,
    ) -> Result<(), Rejection> {
        let name = &info.name;
        if let Some((other, _)) = running
            .iter()
            .find(|(n, r)| r.origin == origin && *n != name)
        {
            return Err(Rejection::new(
                "NameChanged",
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
                "PrimaryKindClaimed",
                format!(
                    "{}.{} is reconciled by plugin `{other}`; one primary kind has one plugin",
                    info.primary.kind, info.primary.group
                ),
            ));
        }
        if let Some(r) = running.get(name).filter(|r| r.origin != origin) {
            let upload = |o: &str| o.starts_with("cluster:");
            if upload(&r.origin) && !upload(origin) {
                return Err(Rejection::new(
                    "Superseded",
                    format!("plugin `{name}` runs from the upload {}", r.origin),
                ));
            }
            if upload(&r.origin) == upload(origin) {
                return Err(Rejection::new(
                    "NameTaken",
                    format!("plugin `{name}` runs from {}", r.origin),
                ));
            }
        }
        let current = running.get(name).map(|r| r.slot.current());
        if let Some(current) = current.filter(|c| c.info.primary != info.primary) {
            return Err(Rejection::new(
                "PrimaryKindChanged",
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
        for r in self.running.lock().await.values() {
            let _ = r.reconcile_all.unbounded_send(());
        }
    }

    /// The origin a plugin runs from, if it runs.
    pub async fn origin_of(&self, name: &str) -> Option<String> {
        self.running
            .lock()
            .await
            .get(name)
            .map(|r| r.origin.clone())
    }

    /// Offers a version from `origin` (`dir:PATH` or `cluster:NS/NAME`); the identity rules
    /// of the module docs decide between sources.
    pub async fn offer(&self, origin: &str, bytes: Vec<u8>) -> Result<Accepted, Rejection> {
        let digest = digest_of(&bytes);
        let mut running = self.running.lock().await;
        if let Some(r) = running
            .values()
            .find(|r| r.origin == origin && r.slot.current().digest == digest)
        {
            let current = r.slot.current();
            return Ok(Accepted {
                info: current.info.clone(),
                digest,
                change: Change::Unchanged,
                pass: Pass::default(),
            });
        }
        let loaded = self.deps.sandbox.load_async(bytes, self.limits).await;
        let plugin = match loaded {
            Ok(p) => p,
            Err(e) => {
                self.count("unknown", LoadResult::Rejected);
                return Err(Rejection::from_load(&e));
            }
        };
        let info = plugin.info.clone();
        let name = info.name.clone();
        if let Err(mut r) = Self::check_identity(&running, origin, &info) {
            if r.reason != "Superseded" {
                self.count(&name, LoadResult::Rejected);
            }
            r.plugin = Some(name);
            return Err(r);
        }
        if let Some(r) = running.get_mut(&name) {
            let current = r.slot.current();
            if current.digest == digest {
                // The same bytes from an upload take over the file's plugin: it now runs
                // from the upload (whose candidate and deletion then concern it).
                r.origin = origin.to_string();
                return Ok(Accepted {
                    info,
                    digest,
                    change: Change::Unchanged,
                    pass: Pass::default(),
                });
            }
        }
        if let Err(mut r) = super::approval::approve(&self.deps, &info).await {
            tracing::warn!(plugin = %name, version = %info.version, reason = r.reason, "{}", r.message);
            r.plugin = Some(name);
            return Err(r);
        }
        self.count(&name, LoadResult::Accepted);
        let mut pass = Pass::default();
        let change = match running.remove(&name) {
            None => {
                let caches = self.caches_for(&info);
                running.insert(name.clone(), self.start(plugin, caches, origin));
                Change::Started
            }
            Some(mut r) if same_watches(&r.slot.current().info, &info) => {
                let old = r.slot.swap(plugin);
                r.origin = origin.to_string();
                pass = Pass::of(&r);
                tracing::info!(plugin = %name, from = %old.info.version, to = %info.version, %digest, "swapped");
                running.insert(name.clone(), r);
                Change::Swapped
            }
            Some(r) => {
                tracing::info!(plugin = %name, "the new version watches differently: restarting its controller");
                let old = r.slot.current();
                // Taken before the old controller lets go: a cache both versions use
                // stays listed across the restart.
                let caches = self.caches_for(&info);
                Self::stop(r).await;
                if let Some(fin) = old.info.finalizer.as_deref()
                    && info.finalizer.as_deref() != Some(fin)
                {
                    self.release_finalizer(&old.info, fin).await;
                }
                running.insert(name.clone(), self.start(plugin, caches, origin));
                Change::Restarted
            }
        };
        Ok(Accepted {
            info,
            digest,
            change,
            pass,
        })
    }

    /// Offers a candidate version for the plugin that runs from `origin`: it must be the same
    /// plugin (name) and watch the same way (so it can be asked the very same question).
    /// The same candidate again keeps its counts; a new mode or policy applies at once. Every
    /// object is reconciled again, so the candidate meets each of them soon.
    pub async fn offer_candidate(
        &self,
        origin: &str,
        bytes: Vec<u8>,
        mode: Mode,
        policy: Policy,
    ) -> Result<Accepted, Rejection> {
        let digest = digest_of(&bytes);
        let running = self.running.lock().await;
        let Some(r) = running.values().find(|r| r.origin == origin) else {
            return Err(Rejection::new(
                "NoActiveVersion",
                format!("nothing runs from {origin}: a candidate needs an active version"),
            ));
        };
        let active = r.slot.current();
        if let Some(old) = r.slot.candidate().filter(|c| c.plugin.digest == digest) {
            let info = old.plugin.info.clone();
            if old.mode == mode && old.policy == policy {
                return Ok(Accepted {
                    info,
                    digest,
                    change: Change::Unchanged,
                    pass: Pass::default(),
                });
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
        let plugin = match self.deps.sandbox.load_async(bytes, self.limits).await {
            Ok(p) => p,
            Err(e) => return Err(Rejection::from_load(&e)),
        };
        let info = plugin.info.clone();
        let name = &active.info.name;
        if &info.name != name {
            return Err(Rejection::new(
                "CandidateNameDiffers",
                format!(
                    "{origin} runs plugin `{name}`; the candidate is named `{}`",
                    info.name
                ),
            ));
        }
        if !same_watches(&active.info, &info) {
            return Err(Rejection::new(
                "CandidateWatchesDifferently",
                format!(
                    "the candidate declares other relations, primary kind or finalizer than {} {}: it could not decide on the same observed value; push it as the active version instead",
                    name, active.info.version
                ),
            ));
        }
        super::approval::approve(&self.deps, &info).await?;
        let candidate = Candidate {
            plugin: Arc::new(plugin),
            mode,
            policy,
            stats: Default::default(),
            in_flight: Default::default(),
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
    pub async fn drop_candidate(&self, origin: &str) {
        let running = self.running.lock().await;
        for r in running.values().filter(|r| r.origin == origin) {
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
    pub async fn set_record(&self, origin: &str, on: Option<bool>) {
        for r in self.running.lock().await.values() {
            if r.origin == origin {
                r.slot.set_record_switch(on);
            }
        }
    }

    /// The origin and slot of every running plugin.
    pub async fn slots(&self) -> Vec<(String, Arc<PluginSlot>)> {
        let running = self.running.lock().await;
        running
            .values()
            .map(|r| (r.origin.clone(), r.slot.clone()))
            .collect()
    }

    /// The origin and slot of every plugin with a candidate.
    pub async fn rollouts(&self) -> Vec<(String, Arc<PluginSlot>)> {
        let running = self.running.lock().await;
        running
            .values()
            .filter(|r| r.slot.candidate().is_some())
            .map(|r| (r.origin.clone(), r.slot.clone()))
            .collect()
    }

    /// Stops the plugins that came from `origin`; the objects they made stay, but their
    /// finalizer is released (nothing would ever remove it).
    pub async fn remove(&self, origin: &str) {
        let mut running = self.running.lock().await;
        let names: Vec<String> = running
            .iter()
            .filter(|(_, r)| r.origin == origin)
            .map(|(n, _)| n.clone())
            .collect();
        for name in names {
            if let Some(r) = running.remove(&name) {
                tracing::info!(plugin = %name, origin, "plugin removed: stopping its controller");
                let info = r.slot.current().info.clone();
                Self::stop(r).await;
                if let Some(fin) = info.finalizer.as_deref() {
                    self.release_finalizer(&info, fin).await;
                }
                self.health.flag(&format!("caches/{name}")).set(true);
            }
        }
    }

    /// Releases `fin` from the objects of a plugin that no longer declares it (logged).
    async fn release_finalizer(&self, info: &PluginInfo, fin: &str) {
        if !self.deps.fence.is_open() {
            tracing::info!(plugin = %info.name, finalizer = fin, "standby: the leader releases the finalizer");
            return;
        }
        let ns = self.deps.namespace.as_deref();
        let client = match self.deps.principals.client_for(&info.name) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(plugin = %info.name, error = %e, "cannot make the plugin's client");
                return;
            }
        };
        match finalize::release_everywhere(&self.deps.client, &client, info, fin, ns).await {
            Ok(n) => tracing::info!(plugin = %info.name, finalizer = fin, released = n,
                "finalizer no longer declared: released from the plugin's objects"),
            Err(e) => tracing::error!(plugin = %info.name, finalizer = fin, error = %e,
                "could not release the finalizer from the plugin's objects"),
        }
    }

    /// Waits until every controller has stopped (after shutdown), at most `grace`; the
    /// ones still running then are aborted.
    pub async fn join(&self, grace: Duration) {
        let mut running = self.running.lock().await;
        let mut tasks: Vec<JoinHandle<()>> = running.drain().map(|(_, r)| r.task).collect();
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
