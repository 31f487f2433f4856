//! The two sources of plugin versions: the plugins directory (polled; a changed file is
//! offered again) and `WasmPlugin` objects in the cluster (watched; the status says what the
//! host made of each upload).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};
use tokio::sync::watch;

use kube::Resource as _;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use crate::registry::artifacts::Artifacts;
use crate::registry::bytes::unpack;
use crate::registry::files::plugin_files;
use crate::registry::manager::{Accepted, Manager};
use crate::registry::origin::Origin;
use crate::registry::refusal::{Reason, Rejection};
use crate::registry::wasmplugin::{
    ArtifactStatus, ConfigMapSource, DEFAULT_KEY, Source, WasmPlugin,
};
use crate::telemetry::metrics::RefusalLabels;

/// What handling a WasmPlugin needs besides the manager: the API client, how OCI sources
/// are pulled, and the name the host's Events go out under.
#[derive(Clone)]
pub(crate) struct Uploads {
    /// The API client (the host's identity).
    pub client: Client,
    /// Pulls of OCI sources.
    pub artifacts: Arc<Artifacts>,
    /// Who publishes the refusal Events.
    pub reporter: Reporter,
    /// The artifact digest the last handling of each WasmPlugin pulled, and at which
    /// generation: a followed tag that still names it needs no new offer (a refused build
    /// is not compiled again at every poll).
    pub pulled: Arc<std::sync::Mutex<HashMap<Origin, Pulled>>>,
}

/// The generation of a WasmPlugin and the artifact digest its handling pulled.
pub(crate) type Pulled = (Option<i64>, String);

type Stamp = (SystemTime, u64);

fn stamp(path: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// Offers every plugin file of `dir`, then polls the directory every `every` and offers
/// files that changed, until shutdown; a removed file stops its plugin. A file whose plugin runs from an upload is
/// superseded (the manager's rule); it is offered again once that plugin no longer runs
/// from an upload (its WasmPlugin was deleted).
pub async fn watch_dir(
    manager: Arc<Manager>,
    dir: PathBuf,
    every: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut seen: HashMap<PathBuf, Stamp> = HashMap::new();
    let mut superseded: HashMap<PathBuf, String> = HashMap::new();
    // The plugin each accepted file runs; an upload may take it over (same name), and once
    // that upload is deleted the file is offered again.
    let mut accepted: HashMap<PathBuf, String> = HashMap::new();
    // Files refused for want of permissions (reported once, offered at every look).
    let mut waiting: HashSet<PathBuf> = HashSet::new();
    loop {
        let mut retry = Vec::new();
        for (path, name) in &superseded {
            let origin = manager.origin_of(name).await;
            if !origin.is_some_and(|o| o.is_upload()) {
                retry.push(path.clone());
            }
        }
        for (path, name) in &accepted {
            if manager.origin_of(name).await.is_none() {
                retry.push(path.clone());
            }
        }
        for path in &retry {
            accepted.remove(path);
        }
        for path in retry {
            superseded.remove(&path);
            seen.remove(&path);
        }
        let present = plugin_files(&dir).unwrap_or_default();
        // A file that is gone stops its plugin (as a deleted WasmPlugin does).
        let gone: Vec<PathBuf> = seen
            .keys()
            .filter(|p| !present.contains(p))
            .cloned()
            .collect();
        for path in gone {
            seen.remove(&path);
            superseded.remove(&path);
            accepted.remove(&path);
            tracing::info!(file = %path.display(), "plugin file removed");
            manager.remove(&Origin::file(&path)).await;
        }
        for path in present {
            let Some(st) = stamp(&path) else { continue };
            if seen.get(&path) == Some(&st) {
                continue;
            }
            seen.insert(path.clone(), st);
            let Ok(bytes) = tokio::fs::read(&path).await else {
                continue;
            };
            let origin = Origin::file(&path);
            match manager.offer(&origin, bytes).await {
                Ok(a) => {
                    waiting.remove(&path);
                    tracing::info!(file = %path.display(), plugin = %a.info.name, version = %a.info.version, change = ?a.change, "plugin file accepted");
                    accepted.insert(path.clone(), a.info.name.clone());
                }
                Err(r) if r.waits_for_permissions() => {
                    // Offered again at the next look, until its RBAC is there.
                    seen.remove(&path);
                    if waiting.insert(path.clone()) {
                        tracing::warn!(file = %path.display(), reason = %r.reason, "plugin file waits for its permissions: {}", r.message);
                    }
                }
                Err(r) if r.reason == Reason::Superseded => {
                    tracing::info!(file = %path.display(), "{r}");
                    if let Some(name) = r.plugin.clone() {
                        superseded.insert(path.clone(), name);
                    }
                }
                Err(r) => {
                    tracing::error!(file = %path.display(), reason = %r.reason, "plugin file refused: {}", r.message)
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = shutdown.wait_for(|v| *v) => return,
        }
    }
}

fn origin_of(wp: &WasmPlugin) -> Origin {
    Origin::upload(
        wp.metadata.namespace.as_deref().unwrap_or_default(),
        wp.metadata.name.as_deref().unwrap_or_default(),
    )
}

/// The component in ConfigMap `src` of namespace `ns`, checked against `sha256`.
async fn fetch_config_map(
    client: &Client,
    ns: Option<&str>,
    src: &ConfigMapSource,
    sha256: &str,
) -> Result<Vec<u8>, Rejection> {
    let ns = ns.unwrap_or("default");
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let key = src.key.as_deref().unwrap_or(DEFAULT_KEY);
    let cm = api
        .get_opt(&src.name)
        .await
        .map_err(|e| Rejection::new(Reason::ConfigMapUnreadable, e.to_string()))?
        .ok_or_else(|| {
            Rejection::new(
                Reason::ConfigMapMissing,
                format!("ConfigMap {ns}/{} not found", src.name),
            )
        })?;
    let data = cm
        .binary_data
        .as_ref()
        .and_then(|d| d.get(key))
        .ok_or_else(|| {
            Rejection::new(
                Reason::ConfigMapMissing,
                format!("ConfigMap {ns}/{} has no binaryData key `{key}`", src.name),
            )
        })?;
    unpack(&data.0, sha256).map_err(|e| {
        let reason = if matches!(e, crate::registry::bytes::BytesError::DigestMismatch { .. }) {
            Reason::DigestMismatch
        } else {
            Reason::BadBytes
        };
        Rejection::new(reason, e.to_string())
    })
}

/// The bytes `source` names, for WasmPlugin `wp`, and the artifact they came from (an OCI
/// source). `known` is the artifact the status says runs; `refresh` resolves a tag again.
async fn fetch(
    uploads: &Uploads,
    wp: &WasmPlugin,
    source: Result<Source<'_>, String>,
    known: Option<&ArtifactStatus>,
    refresh: bool,
) -> Result<(Vec<u8>, Option<ArtifactStatus>), Rejection> {
    let ns = wp.metadata.namespace.as_deref();
    match source.map_err(|why| Rejection::new(Reason::InvalidSource, why))? {
        Source::ConfigMap(cm, sha256) => Ok((
            fetch_config_map(&uploads.client, ns, cm, sha256).await?,
            None,
        )),
        Source::Oci(oci, pin) => {
            let whole = uploads.artifacts.whole_pull_deadline();
            let fetched = tokio::time::timeout(
                whole,
                uploads.artifacts.fetch(
                    &uploads.client,
                    ns.unwrap_or("default"),
                    oci,
                    known,
                    (refresh, pin),
                ),
            )
            .await
            .map_err(|_| {
                Rejection::new(
                    Reason::Pull("PullTimeout"),
                    format!(
                        "{}: the whole pull (resolve, manifest, component, signatures) took longer than {} s",
                        oci.reference,
                        whole.as_secs()
                    ),
                )
            })??;
            Ok((fetched.bytes, Some(fetched.status)))
        }
    }
}

/// The `type` condition for an outcome: `(status, reason, message)`.
fn condition_of(
    outcome: &Result<Accepted, Rejection>,
    what: &str,
) -> (&'static str, String, String) {
    match outcome {
        Ok(a) => (
            "True",
            "Loaded".to_string(),
            format!("{what} {} {} ({:?})", a.info.name, a.info.version, a.change),
        ),
        Err(r) => ("False", r.reason.to_string(), r.message.clone()),
    }
}

/// Writes the status of `wp` for the outcome of its active version and of its candidate
/// (when the spec names one), unless it already says so.
async fn write_status(
    client: &Client,
    wp: &WasmPlugin,
    outcome: &Result<Accepted, Rejection>,
    artifact: Option<&ArtifactStatus>,
    candidate: Option<&Result<Accepted, Rejection>>,
) {
    let ns = wp.metadata.namespace.as_deref().unwrap_or("default");
    let name = wp.metadata.name.as_deref().unwrap_or_default();
    let generation = wp.metadata.generation;
    let old = wp.status.clone().unwrap_or_default();
    let now = jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .unwrap_or_else(|_| jiff::Timestamp::now())
        .to_string();
    let mut wanted = vec![("Ready", condition_of(outcome, "running"))];
    if let Some(c) = candidate {
        wanted.push((
            "Candidate",
            condition_of(c, "deciding beside the active version:"),
        ));
    }
    let artifact_unchanged = match outcome {
        Ok(_) => old.artifact.as_ref() == artifact,
        Err(_) => true,
    };
    let unchanged = old.observed_generation == generation
        && artifact_unchanged
        && old.conditions.len() == wanted.len()
        && wanted.iter().all(|(t, (status, reason, _))| {
            old.conditions.iter().any(|c| {
                c.type_ == *t
                    && c.status == *status
                    && c.reason == *reason
                    && c.observed_generation == generation
            })
        });
    if unchanged {
        return;
    }
    let conditions: Vec<Value> = wanted
        .iter()
        .map(|(t, (status, reason, message))| {
            let transition = old
                .conditions
                .iter()
                .find(|c| c.type_ == *t && c.status == *status)
                .map(|c| c.last_transition_time.clone())
                .unwrap_or_else(|| now.clone());
            json!({"type": t, "status": status, "reason": reason, "message": message,
                   "lastTransitionTime": transition, "observedGeneration": generation})
        })
        .collect();
    let mut status = json!({"observedGeneration": generation, "conditions": conditions});
    match outcome {
        Ok(a) => {
            status["pluginName"] = json!(a.info.name);
            status["pluginVersion"] = json!(a.info.version);
            status["digest"] = json!(a.digest);
            status["artifact"] = json!(artifact);
            status["primaryKind"] = json!(format!(
                "{}.{}/{}",
                a.info.primary.kind, a.info.primary.group, a.info.primary.version
            ));
        }
        // Refused: the fields keep describing the version that still runs, if any.
        Err(_) => {
            status["pluginName"] = json!(old.plugin_name);
            status["pluginVersion"] = json!(old.plugin_version);
            status["digest"] = json!(old.digest);
            status["artifact"] = json!(old.artifact);
            status["primaryKind"] = json!(old.primary_kind);
        }
    }
    if let (Some(Ok(c)), Some(r)) = (candidate, wp.spec.rollout.as_ref()) {
        let mut cand = json!({"version": c.info.version, "digest": c.digest,
            "mode": r.mode().name()});
        if let crate::rollout::Mode::Canary(p) = r.mode() {
            cand["canaryPercent"] = json!(p);
        }
        status["candidate"] = cand;
    }
    let api: Api<WasmPlugin> = Api::namespaced(client.clone(), ns);
    let patch =
        json!({"apiVersion": "wasmop.dev/v1alpha1", "kind": "WasmPlugin", "status": status});
    if let Err(e) = api
        .patch_status(
            name,
            &PatchParams::apply("wasmop").force(),
            &Patch::Apply(&patch),
        )
        .await
    {
        if crate::k8s::fence::is_fenced_off(&e) {
            tracing::debug!(
                wasmplugin = name,
                "standby: the leader writes the WasmPlugin status"
            );
        } else {
            tracing::warn!(wasmplugin = name, error = %e, "could not write the WasmPlugin status");
        }
    }
}

/// Offers the candidate the spec of `wp` names (fetched like the active version), or drops
/// the one that runs when the spec names none or the active version was refused.
async fn handle_candidate(
    uploads: &Uploads,
    manager: &Manager,
    wp: &WasmPlugin,
    origin: &Origin,
    active: &Result<Accepted, Rejection>,
) -> Option<Result<Accepted, Rejection>> {
    let Some(r) = wp.spec.rollout.as_ref() else {
        manager.drop_candidate(origin).await;
        return None;
    };
    if active.is_err() {
        manager.drop_candidate(origin).await;
        return Some(Err(Rejection::new(
            Reason::NoActiveVersion,
            "the active version of this spec was refused; a candidate goes beside a running active version",
        )));
    }
    if r.strategy == crate::registry::wasmplugin::Strategy::Canary && r.canary_percent.is_none() {
        manager.drop_candidate(origin).await;
        return Some(Err(Rejection::new(
            Reason::InvalidRollout,
            "strategy Canary needs canaryPercent (0-100)",
        )));
    }
    let outcome = match fetch(uploads, wp, r.source(), None, true).await {
        Ok((bytes, _)) => {
            manager
                .offer_candidate(origin, bytes, r.mode(), r.policy())
                .await
        }
        Err(e) => Err(e),
    };
    if outcome.is_err() {
        manager.drop_candidate(origin).await;
    }
    Some(outcome)
}

/// Counts a refusal the status did not show yet and says it in a Warning Event on `wp`.
async fn report_refusal(
    uploads: &Uploads,
    manager: &Manager,
    wp: &WasmPlugin,
    kind: &'static str,
    r: &Rejection,
) {
    let generation = wp.metadata.generation;
    let shown = wp.status.as_ref().is_some_and(|s| {
        s.conditions.iter().any(|c| {
            c.type_ == kind
                && c.status == "False"
                && c.reason == r.reason.as_str()
                && c.observed_generation == generation
                && c.message == r.message
        })
    });
    if shown || r.waits_for_permissions() {
        return;
    }
    let ns = wp.metadata.namespace.as_deref().unwrap_or("default");
    let name = wp.metadata.name.as_deref().unwrap_or_default();
    let source = if kind == "Candidate" {
        wp.spec.rollout.as_ref().and_then(|r| r.source().ok())
    } else {
        wp.spec.source().ok()
    };
    manager
        .metrics()
        .source_refusals
        .get_or_create(&RefusalLabels {
            wasmplugin: format!("{ns}/{name}"),
            source: source.map_or("invalid", |s| s.kind()),
            reason: r.reason.to_string(),
        })
        .inc();
    let recorder = Recorder::new(uploads.client.clone(), uploads.reporter.clone());
    let ev = Event {
        type_: EventType::Warning,
        reason: r.reason.to_string(),
        note: Some(
            format!(
                "{}: {}",
                if kind == "Candidate" {
                    "candidate refused"
                } else {
                    "refused"
                },
                r.message
            )
            .chars()
            .take(1000)
            .collect(),
        ),
        action: "Load".into(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&ev, &wp.object_ref(&())).await
        && !crate::k8s::fence::is_fenced_off(&e)
    {
        tracing::warn!(wasmplugin = name, error = %e, "could not publish the refusal Event");
    }
}

/// Handles one WasmPlugin: fetch, verify, offer (the active version, then the candidate),
/// report (the log line says how long each part took: fetching the bytes, loading the
/// version, in all with the status written). `poll` resolves an OCI tag again (the
/// WasmPlugin follows it) and stops there when the tag names what the last handling pulled;
/// a changed spec resolves it again too. Returns whether a version waits for its
/// permissions or for a registry that did not answer (to be handled again).
pub(crate) async fn handle(
    uploads: &Uploads,
    manager: &Manager,
    wp: &WasmPlugin,
    at_startup: bool,
    poll: bool,
) -> bool {
    let origin = origin_of(wp);
    let started = std::time::Instant::now();
    let status = wp.status.as_ref();
    let known = status.and_then(|s| s.artifact.as_ref());
    let refresh = poll || status.and_then(|s| s.observed_generation) != wp.metadata.generation;
    let (outcome, artifact, fetch_ms) =
        match fetch(uploads, wp, wp.spec.source(), known, refresh).await {
            Ok((bytes, artifact)) => {
                let fetched = started.elapsed().as_millis();
                if let Some(a) = &artifact {
                    let seen = (wp.metadata.generation, a.digest.clone());
                    let mut pulled = uploads.pulled.lock().expect("pulled lock");
                    if poll && pulled.get(&origin) == Some(&seen) {
                        return false;
                    }
                    pulled.insert(origin.clone(), seen);
                }
                (manager.offer(&origin, bytes).await, artifact, fetched)
            }
            Err(r) => (Err(r), None, started.elapsed().as_millis()),
        };
    let load_ms = started.elapsed().as_millis() - fetch_ms;
    let candidate = handle_candidate(uploads, manager, wp, &origin, &outcome).await;
    manager.set_record(&origin, wp.spec.record).await;
    if let Err(r) = &outcome {
        report_refusal(uploads, manager, wp, "Ready", r).await;
    }
    if let Some(Err(r)) = &candidate {
        report_refusal(uploads, manager, wp, "Candidate", r).await;
    }
    write_status(
        &uploads.client,
        wp,
        &outcome,
        artifact.as_ref(),
        candidate.as_ref(),
    )
    .await;
    let total_ms = started.elapsed().as_millis();
    match &outcome {
        Ok(a) => {
            tracing::info!(%origin, plugin = %a.info.name, version = %a.info.version, change = ?a.change, at_startup, fetch_ms, load_ms, total_ms, "WasmPlugin accepted")
        }
        Err(r) => {
            tracing::warn!(%origin, reason = %r.reason, fetch_ms, load_ms, total_ms, "WasmPlugin refused: {}", r.message)
        }
    }
    match &candidate {
        Some(Ok(a)) => {
            tracing::info!(%origin, candidate = %a.info.version, change = ?a.change, "rollout candidate accepted")
        }
        Some(Err(r)) => {
            tracing::warn!(%origin, reason = %r.reason, "rollout candidate refused: {}", r.message)
        }
        None => {}
    }
    outcome.as_ref().err().is_some_and(Rejection::retries)
        || candidate
            .as_ref()
            .and_then(|c| c.as_ref().err())
            .is_some_and(Rejection::retries)
}

/// WasmPlugins handled at once when the host loads them all (at start, on taking the lead):
/// one slow registry holds up one of these, not the others.
const LOADS_AT_ONCE: usize = 8;

/// Loads every WasmPlugin of `namespace` once (before the plugins directory, so uploads
/// win), several at once.
pub(crate) async fn load_cluster(
    uploads: &Uploads,
    manager: &Manager,
    namespace: &str,
) -> anyhow::Result<()> {
    let api: Api<WasmPlugin> = Api::namespaced(uploads.client.clone(), namespace);
    let items = api.list(&Default::default()).await?.items;
    futures::stream::iter(items.iter())
        .for_each_concurrent(LOADS_AT_ONCE, |wp| async move {
            handle(uploads, manager, wp, true, false).await;
        })
        .await;
    Ok(())
}

/// One WasmPlugin's handling, on a task of its own: a registry that hangs holds up only
/// this WasmPlugin (until the pull's deadline), and its deletion stops the task at once.
struct Worker {
    jobs: tokio::sync::mpsc::UnboundedSender<(WasmPlugin, bool)>,
    task: tokio::task::JoinHandle<()>,
}

/// What a worker reports after handling: the WasmPlugin as handled, and whether it waits
/// to be handled again by itself ([`Rejection::retries`]).
type Handled = (Origin, WasmPlugin, bool);

impl Worker {
    fn start(
        origin: Origin,
        uploads: Uploads,
        manager: Arc<Manager>,
        done: tokio::sync::mpsc::UnboundedSender<Handled>,
    ) -> Self {
        let (jobs, mut queue) = tokio::sync::mpsc::unbounded_channel::<(WasmPlugin, bool)>();
        let task = tokio::spawn(async move {
            while let Some(mut job) = queue.recv().await {
                // Only the newest version of the object matters; a poll stays a poll
                // only if nothing else asked meanwhile.
                while let Ok(newer) = queue.try_recv() {
                    job = (newer.0, job.1 && newer.1);
                }
                let (wp, poll) = job;
                let retries = handle(&uploads, &manager, &wp, false, poll).await;
                if done.send((origin.clone(), wp, retries)).is_err() {
                    return;
                }
            }
        });
        Worker { jobs, task }
    }
}

/// The workers of the WasmPlugins of one namespace, by origin.
struct Workers {
    uploads: Uploads,
    manager: Arc<Manager>,
    done: tokio::sync::mpsc::UnboundedSender<Handled>,
    by_origin: HashMap<Origin, Worker>,
}

impl Workers {
    /// Hands `wp` to its worker (started when it has none).
    fn handle(&mut self, origin: &Origin, wp: WasmPlugin, poll: bool) {
        let worker = self.by_origin.entry(origin.clone()).or_insert_with(|| {
            Worker::start(
                origin.clone(),
                self.uploads.clone(),
                self.manager.clone(),
                self.done.clone(),
            )
        });
        let _ = worker.jobs.send((wp, poll));
    }

    /// Stops the worker of `origin` wherever it is (a pull that hangs included).
    fn stop(&mut self, origin: &Origin) {
        if let Some(w) = self.by_origin.remove(origin) {
            w.task.abort();
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for w in self.by_origin.values() {
            w.task.abort();
        }
    }
}

/// Watches the WasmPlugins of `namespace` until shutdown: new or changed ones are offered,
/// deleted ones stop their plugin; one whose version waits for its permissions is handled
/// again every `recheck`. Each WasmPlugin is handled on a task of its own ([`Worker`]), so
/// one registry that hangs stalls no other WasmPlugin, and a deletion takes effect at once.
pub(crate) async fn watch_cluster(
    uploads: Uploads,
    manager: Arc<Manager>,
    namespace: String,
    recheck: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut waiting: HashMap<Origin, WasmPlugin> = HashMap::new();
    // WasmPlugins that follow their OCI tag, with when to resolve it again.
    let mut following: HashMap<Origin, (WasmPlugin, tokio::time::Instant)> = HashMap::new();
    let mut tick = tokio::time::interval(recheck.min(Duration::from_secs(5)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let api: Api<WasmPlugin> = Api::namespaced(uploads.client.clone(), &namespace);
    let mut events = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut listed: HashSet<Origin> = HashSet::new();
    let mut known: HashSet<Origin> = HashSet::new();
    // The generation last handled per WasmPlugin: a change of the status only (the host's
    // own verdict, a rollout's counts every second) needs no new fetch and offer.
    let mut handled: HashMap<Origin, Option<i64>> = HashMap::new();
    let mut last_recheck = tokio::time::Instant::now();
    let (done, mut handled_rx) = tokio::sync::mpsc::unbounded_channel::<Handled>();
    let mut workers = Workers {
        uploads: uploads.clone(),
        manager: manager.clone(),
        done,
        by_origin: HashMap::new(),
    };
    loop {
        let next = tokio::select! {
            e = events.next() => Some(e),
            Some((origin, wp, retries)) = handled_rx.recv() => {
                // A WasmPlugin deleted meanwhile has no worker any more: nothing to wait for.
                if retries && workers.by_origin.contains_key(&origin) {
                    waiting.insert(origin, wp);
                }
                continue;
            }
            _ = tick.tick() => None,
            _ = shutdown.wait_for(|v| *v) => return,
        };
        let Some(event) = next else {
            let now = tokio::time::Instant::now();
            if now.duration_since(last_recheck) >= recheck {
                last_recheck = now;
                for (origin, wp) in std::mem::take(&mut waiting) {
                    workers.handle(&origin, wp, false);
                }
            }
            for (origin, (wp, due)) in following.iter_mut() {
                if *due > now || waiting.contains_key(origin) {
                    continue;
                }
                *due = now + poll_of(wp).unwrap_or(Duration::from_secs(60));
                workers.handle(origin, wp.clone(), true);
            }
            continue;
        };
        match event {
            Some(Ok(watcher::Event::Init)) => {
                listed.clear();
                // A relist handles every WasmPlugin again.
                handled.clear();
            }
            Some(Ok(watcher::Event::InitApply(wp))) | Some(Ok(watcher::Event::Apply(wp))) => {
                let origin = origin_of(&wp);
                listed.insert(origin.clone());
                known.insert(origin.clone());
                match poll_of(&wp) {
                    // The latest object (its status names the digest that runs); the
                    // next resolve stays when it was due.
                    Some(every) => {
                        let due = following
                            .get(&origin)
                            .map(|(_, due)| *due)
                            .unwrap_or_else(|| tokio::time::Instant::now() + every);
                        following.insert(origin.clone(), (wp.clone(), due));
                    }
                    None => {
                        following.remove(&origin);
                    }
                }
                if handled.get(&origin) == Some(&wp.metadata.generation) {
                    // The status changed (the host's own write): a later retry starts
                    // from what it says.
                    if let Some(w) = waiting.get_mut(&origin) {
                        *w = wp;
                    }
                    continue;
                }
                handled.insert(origin.clone(), wp.metadata.generation);
                waiting.remove(&origin);
                workers.handle(&origin, wp, false);
            }
            Some(Ok(watcher::Event::InitDone)) => {
                for gone in known.difference(&listed).cloned().collect::<Vec<_>>() {
                    workers.stop(&gone);
                    waiting.remove(&gone);
                    following.remove(&gone);
                    uploads.pulled.lock().expect("pulled lock").remove(&gone);
                    manager.remove(&gone).await;
                    handled.remove(&gone);
                    known.remove(&gone);
                }
            }
            Some(Ok(watcher::Event::Delete(wp))) => {
                let origin = origin_of(&wp);
                workers.stop(&origin);
                waiting.remove(&origin);
                following.remove(&origin);
                uploads.pulled.lock().expect("pulled lock").remove(&origin);
                known.remove(&origin);
                handled.remove(&origin);
                manager.remove(&origin).await;
            }
            Some(Err(e)) => tracing::warn!(error = %e, "watching WasmPlugins"),
            None => return,
        }
    }
}

/// How often `wp` resolves its tag again, when it follows one.
fn poll_of(wp: &WasmPlugin) -> Option<Duration> {
    let oci = wp.spec.oci.as_ref()?;
    let every = oci.poll_seconds?;
    // A reference pinned by digest has nothing to follow.
    (!oci.reference.contains('@')).then(|| Duration::from_secs(every.max(5)))
}
