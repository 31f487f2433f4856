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

use crate::registry::bytes::unpack;
use crate::registry::files::plugin_files;
use crate::registry::manager::{Accepted, Manager};
use crate::registry::origin::Origin;
use crate::registry::refusal::{Reason, Rejection};
use crate::registry::wasmplugin::{ConfigMapSource, DEFAULT_KEY, WasmPlugin};

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
async fn fetch(
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
    let unchanged = old.observed_generation == generation
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
    client: &Client,
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
    let outcome = match fetch(
        client,
        wp.metadata.namespace.as_deref(),
        &r.config_map,
        &r.sha256,
    )
    .await
    {
        Ok(bytes) => {
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

/// Handles one WasmPlugin: fetch, verify, offer (the active version, then the candidate),
/// report (the log line says how long each part took: fetching the ConfigMap, loading the
/// version, in all with the status written). Returns whether a version waits for its
/// permissions (to be handled again until they are granted).
pub async fn handle(client: &Client, manager: &Manager, wp: &WasmPlugin, at_startup: bool) -> bool {
    let origin = origin_of(wp);
    let started = std::time::Instant::now();
    let ns = wp.metadata.namespace.as_deref();
    let (outcome, fetch_ms) = match fetch(client, ns, &wp.spec.config_map, &wp.spec.sha256).await {
        Ok(bytes) => {
            let fetched = started.elapsed().as_millis();
            (manager.offer(&origin, bytes).await, fetched)
        }
        Err(r) => (Err(r), started.elapsed().as_millis()),
    };
    let load_ms = started.elapsed().as_millis() - fetch_ms;
    let candidate = handle_candidate(client, manager, wp, &origin, &outcome).await;
    manager.set_record(&origin, wp.spec.record).await;
    write_status(client, wp, &outcome, candidate.as_ref()).await;
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
    outcome
        .as_ref()
        .err()
        .is_some_and(Rejection::waits_for_permissions)
        || candidate
            .as_ref()
            .and_then(|c| c.as_ref().err())
            .is_some_and(Rejection::waits_for_permissions)
}

/// Loads every WasmPlugin of `namespace` once (before the plugins directory, so uploads win).
pub async fn load_cluster(
    client: &Client,
    manager: &Manager,
    namespace: &str,
) -> anyhow::Result<()> {
    let api: Api<WasmPlugin> = Api::namespaced(client.clone(), namespace);
    for wp in api.list(&Default::default()).await?.items {
        handle(client, manager, &wp, true).await;
    }
    Ok(())
}

/// Watches the WasmPlugins of `namespace` until shutdown: new or changed ones are offered,
/// deleted ones stop their plugin; one whose version waits for its permissions is handled
/// again every `recheck`.
pub async fn watch_cluster(
    client: Client,
    manager: Arc<Manager>,
    namespace: String,
    recheck: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut waiting: HashMap<Origin, WasmPlugin> = HashMap::new();
    let mut tick = tokio::time::interval(recheck);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let api: Api<WasmPlugin> = Api::namespaced(client.clone(), &namespace);
    let mut events = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut listed: HashSet<Origin> = HashSet::new();
    let mut known: HashSet<Origin> = HashSet::new();
    // The generation last handled per WasmPlugin: a change of the status only (the host's
    // own verdict, a rollout's counts every second) needs no new fetch and offer.
    let mut handled: HashMap<Origin, Option<i64>> = HashMap::new();
    loop {
        let next = tokio::select! {
            e = events.next() => Some(e),
            _ = tick.tick() => None,
            _ = shutdown.wait_for(|v| *v) => return,
        };
        let Some(event) = next else {
            for (origin, wp) in std::mem::take(&mut waiting) {
                if handle(&client, &manager, &wp, false).await {
                    waiting.insert(origin, wp);
                }
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
                if handled.get(&origin) == Some(&wp.metadata.generation) {
                    continue;
                }
                handled.insert(origin.clone(), wp.metadata.generation);
                waiting.remove(&origin);
                if handle(&client, &manager, &wp, false).await {
                    waiting.insert(origin, wp);
                }
            }
            Some(Ok(watcher::Event::InitDone)) => {
                for gone in known.difference(&listed).cloned().collect::<Vec<_>>() {
                    waiting.remove(&gone);
                    manager.remove(&gone).await;
                    handled.remove(&gone);
                    known.remove(&gone);
                }
            }
            Some(Ok(watcher::Event::Delete(wp))) => {
                let origin = origin_of(&wp);
                waiting.remove(&origin);
                known.remove(&origin);
                handled.remove(&origin);
                manager.remove(&origin).await;
            }
            Some(Err(e)) => tracing::warn!(error = %e, "watching WasmPlugins"),
            None => return,
        }
    }
}
