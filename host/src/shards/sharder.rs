//! The sharder's pass over the objects of one kind, and a shard's acknowledgement of a
//! drain, as API calls. A pass reads the objects' metadata from a watch ([`KindWatch`],
//! no list per pass), decides each one's move
//! ([`crate::shards::assign::decide`]) and writes it as a label patch that carries the
//! resourceVersion it decided on, so a decision made on a stale read fails (409) and waits
//! for the next pass instead of overriding a shard's acknowledgement. An object taken from
//! another shard (acknowledged, or a dead shard's) carries the handover annotation until
//! its new shard has taken over what it owns ([`crate::shards::scope::HANDOVER_ANNOTATION`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

use crate::shards::assign::{DRAIN_LABEL, Move, SHARD_LABEL, decide};
use crate::shards::ring::Ring;
use crate::shards::scope::HANDOVER_ANNOTATION;

/// Label patches of one pass sent at once.
const PATCHES_IN_FLIGHT: usize = 16;

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Pass {
    /// Objects seen.
    pub objects: usize,
    /// Objects labelled for a shard, by shard (written).
    pub assigned: BTreeMap<String, usize>,
    /// Objects whose live shard was asked to let go.
    pub drained: usize,
    /// Objects taken, without a drain, from a shard no longer live (its Lease was not seen
    /// renewed in time), by that shard (written).
    pub taken: BTreeMap<String, usize>,
    /// Writes that lost a race with another writer (retried by the next pass).
    pub conflicts: usize,
}

fn label<'a>(labels: Option<&'a BTreeMap<String, String>>, key: &str) -> Option<&'a str> {
    labels.and_then(|l| l.get(key)).map(String::as_str)
}

fn handed_over(m: &kube::core::ObjectMeta) -> bool {
    m.annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(HANDOVER_ANNOTATION))
}

/// Objects per page when the sharder lists.
pub const PAGE: u32 = 500;

/// The metadata of every object `lp` selects, read a page of [`PAGE`] at a time, so that
/// neither the API server nor the host holds one answer for every object at once.
pub async fn list_paged(
    api: &Api<DynamicObject>,
    lp: &ListParams,
) -> Result<Vec<kube::core::PartialObjectMeta<DynamicObject>>, kube::Error> {
    let mut all = Vec::new();
    let mut page = lp.clone().limit(PAGE);
    loop {
        let list = api.list_metadata(&page).await?;
        all.extend(list.items);
        match list.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => page = page.continue_token(&token),
            None => return Ok(all),
        }
    }
}

/// One object's metadata, as the sharder reads it.
pub type ObjectMeta = Arc<PartialObjectMeta<DynamicObject>>;

/// The metadata of one kind's objects, kept current by a watch (read in pages of [`PAGE`]
/// when it lists): what the sharder's passes read, instead of listing every object on every
/// pass. A pass may read it slightly behind the API server; every write it decides carries
/// the resourceVersion it read, so a stale decision fails (409) and is made again on the
/// next pass. It also notes which objects changed since the last pass ([`Changes`]), so
/// that a pass with the ring unchanged decides only those. The watch stops when this is
/// dropped.
pub struct KindWatch {
    resource: ApiResource,
    reader: Store<PartialObjectMeta<DynamicObject>>,
    changes: Arc<std::sync::Mutex<Changes>>,
    task: tokio::task::JoinHandle<()>,
}

/// The objects of a [`KindWatch`] that changed (or went) since a pass last took them, and
/// whether the watch (re)listed since: then any object may have changed unseen.
#[derive(Debug, Default)]
pub struct Changes {
    keys: std::collections::HashSet<(Option<String>, String)>,
    relisted: bool,
}

impl Changes {
    /// An object changed or went.
    pub fn note(&mut self, m: &kube::core::ObjectMeta) {
        if let Some(name) = &m.name {
            self.keys.insert((m.namespace.clone(), name.clone()));
        }
    }

    /// The watch starts or ends a list.
    pub fn relist(&mut self) {
        self.relisted = true;
    }

    /// What a pass takes: `None` when it must look at every object (asked to, or a list
    /// since the last pass), else the objects changed since; either way, nothing is noted
    /// afterwards.
    pub fn take(&mut self, every: bool) -> Option<Vec<(Option<String>, String)>> {
        let all = every || self.relisted;
        self.relisted = false;
        let keys = std::mem::take(&mut self.keys);
        (!all).then(|| keys.into_iter().collect())
    }
}

impl KindWatch {
    /// Starts watching `ar`'s objects in `namespace` (all namespaces when `None`).
    pub fn start(client: &kube::Client, ar: &ApiResource, namespace: Option<&str>) -> Self {
        let writer = reflector::store::Writer::new(ar.clone());
        let reader = writer.as_reader();
        let config = watcher::Config::default().page_size(PAGE);
        // An API of metadata only: its watch asks for metadata only.
        let api: Api<PartialObjectMeta<DynamicObject>> = match namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
            None => Api::all_with(client.clone(), ar),
        };
        let stream = reflector::reflector(writer, watcher(api, config)).default_backoff();
        let kind = ar.kind.clone();
        let changes = Arc::new(std::sync::Mutex::new(Changes::default()));
        let noted = changes.clone();
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                // After the store took the event in: a pass that takes the change reads it.
                let mut changes = noted.lock().unwrap_or_else(|e| e.into_inner());
                match event {
                    Ok(watcher::Event::Apply(o) | watcher::Event::Delete(o)) => {
                        changes.note(&o.metadata);
                    }
                    Ok(watcher::Event::Init | watcher::Event::InitDone) => changes.relist(),
                    Ok(watcher::Event::InitApply(_)) => {}
                    Err(e) => {
                        tracing::debug!(%kind, error = %e, "sharder's watch interrupted; it resumes");
                    }
                }
            }
        });
        KindWatch {
            resource: ar.clone(),
            reader,
            changes,
            task,
        }
    }

    /// The kind watched.
    pub fn resource(&self) -> &ApiResource {
        &self.resource
    }

    /// Whether the watch has listed once, waiting at most `within` for it.
    pub async fn synced(&self, within: Duration) -> bool {
        matches!(
            tokio::time::timeout(within, self.reader.wait_until_ready()).await,
            Ok(Ok(()))
        )
    }

    /// The objects for a pass, as the watch last saw them: every one if `every` or if the
    /// watch listed since the last pass (the second value then says `true`), else those
    /// that changed since the last pass and are still there.
    pub fn objects(&self, every: bool) -> (Vec<ObjectMeta>, bool) {
        let taken = self
            .changes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take(every);
        match taken {
            None => (self.reader.state(), true),
            Some(keys) => {
                let objects = keys
                    .into_iter()
                    .filter_map(|(ns, name)| {
                        let mut key = reflector::ObjectRef::new_with(&name, self.resource.clone());
                        if let Some(ns) = ns {
                            key = key.within(&ns);
                        }
                        self.reader.get(&key)
                    })
                    .collect();
                (objects, false)
            }
        }
    }
}

impl Drop for KindWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The API of `ar`'s objects in `namespace` (all namespaces when `None`).
pub fn api_of(
    client: &kube::Client,
    ar: &ApiResource,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    }
}

/// One pass over `objects` of kind `ar` (from a [`KindWatch`], or a list), given the
/// ring's `live` members. The first assignment of an object in `unsharded` (it controls
/// objects made before sharding) carries the handover annotation too. Counts only the
/// moves written.
pub async fn pass(
    client: &kube::Client,
    ar: &ApiResource,
    objects: &[ObjectMeta],
    live: &[String],
    unsharded: &std::collections::HashSet<String>,
) -> Result<Pass, kube::Error> {
    let ring = Ring::new(live, crate::shards::ring::DEFAULT_VNODES);
    let mut out = Pass::default();
    let mut patches = Vec::new();
    for obj in objects {
        out.objects += 1;
        let m = &obj.metadata;
        let (Some(name), Some(uid)) = (m.name.clone(), m.uid.as_deref()) else {
            continue;
        };
        let labels = m.labels.as_ref();
        let owner = label(labels, SHARD_LABEL);
        let draining = label(labels, DRAIN_LABEL).is_some();
        let decided = decide(uid, owner, draining, live, &ring);
        let patch = match &decided {
            Move::Stay => continue,
            Move::Assign(shard) => {
                // A dead shard's object (or one that controls objects made before
                // sharding): its new shard takes over what it owns first.
                let handover = match owner {
                    Some(o) => Some(json!({HANDOVER_ANNOTATION: o})),
                    // (An acknowledged drain's annotation, naming the old shard, stays.)
                    None if unsharded.contains(uid) && !handed_over(m) => {
                        Some(json!({HANDOVER_ANNOTATION: "unsharded"}))
                    }
                    None => None,
                };
                let mut p = json!({"metadata": {"resourceVersion": m.resource_version,
                    "labels": {SHARD_LABEL: shard, DRAIN_LABEL: null}}});
                if let Some(a) = handover {
                    p["metadata"]["annotations"] = a;
                }
                p
            }
            Move::Drain => {
                json!({"metadata": {"resourceVersion": m.resource_version,
                    "labels": {DRAIN_LABEL: "true"}}})
            }
        };
        let from = matches!(decided, Move::Assign(_))
            .then(|| owner.map(str::to_string))
            .flatten();
        patches.push((
            api_of(client, ar, m.namespace.as_deref()),
            name,
            patch,
            (decided, from),
        ));
    }
    let mut sent = futures::stream::iter(patches)
        .map(|(api, name, patch, decided)| async move {
            api.patch_metadata(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(|_| decided)
        })
        .buffer_unordered(PATCHES_IN_FLIGHT);
    let mut failed = None;
    while let Some(result) = sent.next().await {
        match result {
            Ok((Move::Assign(shard), from)) => {
                *out.assigned.entry(shard).or_default() += 1;
                if let Some(from) = from {
                    *out.taken.entry(from).or_default() += 1;
                }
            }
            Ok((Move::Drain, _)) => out.drained += 1,
            Ok((Move::Stay, _)) => {}
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => out.conflicts += 1,
            Err(e) => failed = Some(e),
        }
    }
    // Logged also when the pass stopped early: these moves were written.
    for (shard, n) in &out.taken {
        tracing::warn!(%shard, taken = n, "took objects of a shard whose Lease was not seen renewed");
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// Shard `shard` lets go of object `name` (read at `resource_version`) that it was asked
/// to drain: it removes both labels and leaves the handover annotation, after which the
/// sharder may give the object to its new shard. Called only once the shard no longer
/// reconciles the object.
pub async fn acknowledge(
    api: &Api<DynamicObject>,
    name: &str,
    resource_version: Option<&str>,
    shard: &str,
) -> Result<(), kube::Error> {
    let patch = json!({"metadata": {"resourceVersion": resource_version,
        "labels": {SHARD_LABEL: null, DRAIN_LABEL: null},
        "annotations": {HANDOVER_ANNOTATION: shard}}});
    api.patch_metadata(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(ns: &str, name: &str) -> kube::core::ObjectMeta {
        kube::core::ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            ..Default::default()
        }
    }

    #[test]
    fn a_pass_takes_the_changes_once_and_every_object_after_a_list() {
        let mut c = Changes::default();
        // The first pass after the watch listed looks at every object.
        c.relist();
        c.note(&meta("d", "a"));
        assert_eq!(c.take(false), None);
        // Then only what changed since, each once however often it changed.
        c.note(&meta("d", "b"));
        c.note(&meta("d", "b"));
        c.note(&meta("e", "b"));
        let mut taken = c.take(false).unwrap();
        taken.sort();
        assert_eq!(
            taken,
            vec![
                (Some("d".into()), "b".into()),
                (Some("e".into()), "b".into())
            ]
        );
        assert_eq!(c.take(false), Some(vec![]), "taken: not again");
        // Asked for every object (the ring changed, a pass failed): every one, and what
        // was noted is not taken again after it.
        c.note(&meta("d", "c"));
        assert_eq!(c.take(true), None);
        assert_eq!(c.take(false), Some(vec![]));
    }
}
