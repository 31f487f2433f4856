//! The objects primaries name (a relation that selects [`Selection::Referenced`]): a
//! reference to one Secret must not cache every Secret of the namespace.
//!
//! The cache of such a relation watches the *metadata* of its kind (names, versions: no
//! `data`, no `spec`) and holds whole only the objects some primary names. A decision first
//! tells it what its primary names now ([`Named::want`]): what the cache does not hold yet is
//! read then (a GET), before the decision observes it; what no primary names any more is let
//! go. When the metadata watch shows a named object changed or gone, the cache reads it again
//! (or drops it) and its subscribers route the event to the primaries that name it
//! ([`Named::naming`]), as an owned object's event goes to its owner.
//!
//! Reads and the watch's refreshes of held objects take turns ([`Named::fetching`]): a read
//! that started before a change never overwrites the refresh that change caused.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;
use tokio::sync::watch;

use crate::cache::guest_view::pack;
use crate::cache::shared::Intake;
use crate::k8s::kinds::api_for;
use crate::observe::Fields;
use crate::observe::select::referenced_names;
use crate::runtime::{KindRef, Reference};

/// An object a primary names: (namespace, name).
pub type Name = (Option<String>, String);

/// Why a named object is read.
#[derive(Clone, Copy)]
enum Read<'a> {
    /// A decision of a primary that names it is about to observe it.
    ForDecision,
    /// The watch saw it at this version.
    Seen(&'a str),
}

/// Which primaries name which objects.
#[derive(Default)]
struct Index {
    by_object: HashMap<Name, HashSet<ObjectRef<DynamicObject>>>,
    by_primary: HashMap<ObjectRef<DynamicObject>, Vec<Name>>,
}

impl Index {
    /// Sets what `primary` names; the names no primary names any more.
    fn set(&mut self, primary: &ObjectRef<DynamicObject>, names: Vec<Name>) -> Vec<Name> {
        let before = self.by_primary.remove(primary).unwrap_or_default();
        for name in &names {
            self.by_object
                .entry(name.clone())
                .or_default()
                .insert(primary.clone());
        }
        let mut gone = Vec::new();
        for name in before.into_iter().filter(|n| !names.contains(n)) {
            if let Some(primaries) = self.by_object.get_mut(&name) {
                primaries.remove(primary);
                if primaries.is_empty() {
                    self.by_object.remove(&name);
                    gone.push(name);
                }
            }
        }
        if !names.is_empty() {
            self.by_primary.insert(primary.clone(), names);
        }
        gone
    }
}

/// The named objects of one referenced relation: the index of who names what, and the reads
/// that fill the relation's cache ([`crate::cache::shared::KindCache`]).
pub struct Named {
    reference: Reference,
    kind: KindRef,
    resource: ApiResource,
    client: kube::Client,
    /// The host's scope (`None`: every namespace).
    scope: Option<String>,
    /// What the cache keeps of each object.
    fields: watch::Receiver<Fields>,
    intake: Mutex<Intake>,
    reader: Store<DynamicObject>,
    index: Mutex<Index>,
    /// Named objects a read found absent: not read again until the watch shows them.
    absent: Mutex<HashSet<Name>>,
    /// Named objects read for a decision and shown to no subscriber yet: the watch shows
    /// them when it sees them (another primary that names one may have decided while it
    /// was absent).
    unshown: Mutex<HashSet<Name>>,
    /// Held by a read and by the watch's refresh, so that they take turns.
    fetching: tokio::sync::Mutex<()>,
    /// Told how many objects the cache holds after each change (a gauge).
    counted: Box<dyn Fn(usize) + Send + Sync>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn name_of(meta: &kube::api::ObjectMeta) -> Name {
    (
        meta.namespace.clone(),
        meta.name.clone().unwrap_or_default(),
    )
}

impl Named {
    /// The named objects of a relation of `kind` selected by `reference`, read through
    /// `client` within `scope`, taken into the cache through `intake` (whose store `reader`
    /// reads), each kept as `fields` says; `counted` is told how many it holds.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        reference: Reference,
        kind: KindRef,
        resource: ApiResource,
        client: kube::Client,
        scope: Option<String>,
        fields: watch::Receiver<Fields>,
        intake: Mutex<Intake>,
        reader: Store<DynamicObject>,
        counted: Box<dyn Fn(usize) + Send + Sync>,
    ) -> Named {
        Named {
            reference,
            kind,
            resource,
            client,
            scope,
            fields,
            intake,
            reader,
            index: Mutex::default(),
            absent: Mutex::default(),
            unshown: Mutex::default(),
            fetching: tokio::sync::Mutex::new(()),
            counted,
        }
    }

    /// Takes `e` in, shown to the subscribers or not, and counts what the cache holds.
    fn take(&self, e: &watcher::Event<DynamicObject>, shown: bool) {
        let mut intake = lock(&self.intake);
        if shown {
            intake.take(e, &self.resource);
        } else {
            intake.take_unshown(e);
        }
        drop(intake);
        (self.counted)(self.reader.len());
    }

    fn object_ref(&self, (ns, name): &Name) -> ObjectRef<DynamicObject> {
        let r = ObjectRef::new_with(name, self.resource.clone());
        match ns {
            Some(ns) => r.within(ns),
            None => r,
        }
    }

    /// The primaries that name the object `name`.
    pub fn naming(&self, name: &Name) -> Vec<ObjectRef<DynamicObject>> {
        lock(&self.index)
            .by_object
            .get(name)
            .map(|p| p.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Whether some primary names `name`.
    fn wanted(&self, name: &Name) -> bool {
        lock(&self.index).by_object.contains_key(name)
    }

    /// Notes what `primary` (whose reference is `at`) names now, reads what the cache does
    /// not hold yet and lets go of what no primary names any more. An object that does not
    /// exist is simply not there; any other failure to read one is the error (the decision
    /// waits for it rather than deciding without an object its primary names).
    pub async fn want(&self, at: &ObjectRef<DynamicObject>, primary: &Value) -> Result<(), String> {
        let names = referenced_names(&self.reference, self.kind.namespaced, primary);
        let gone = lock(&self.index).set(at, names.clone());
        for name in gone {
            self.forget(&name);
        }
        for name in names {
            if self.reader.get(&self.object_ref(&name)).is_none()
                && !lock(&self.absent).contains(&name)
            {
                self.refresh(&name, Read::ForDecision).await?;
            }
        }
        Ok(())
    }

    /// Forgets what `primary` named (it was deleted, or left this shard).
    pub fn release(&self, primary: &ObjectRef<DynamicObject>) {
        let gone = lock(&self.index).set(primary, Vec::new());
        for name in gone {
            self.forget(&name);
        }
    }

    /// Drops `name` from the cache, telling no one: no primary names it.
    fn forget(&self, name: &Name) {
        lock(&self.absent).remove(name);
        lock(&self.unshown).remove(name);
        if let Some(held) = self.reader.get(&self.object_ref(name)) {
            self.take(&watcher::Event::Delete((*held).clone()), false);
        }
    }

    /// Reads `name` and takes what it read (or its absence) in: for a decision about to
    /// observe it, shown to no subscriber; for the watch, which saw it at a version,
    /// shown, and only if the cache does not hold it at that version (unless a read for a
    /// decision took it in unshown).
    async fn refresh(&self, name: &Name, why: Read<'_>) -> Result<(), String> {
        let _turn = self.fetching.lock().await;
        let held = self.reader.get(&self.object_ref(name));
        if let Read::Seen(version) = why {
            let same = held
                .as_ref()
                .and_then(|h| h.metadata.resource_version.as_deref())
                == Some(version);
            if same {
                if lock(&self.unshown).remove(name)
                    && let Some(held) = held
                {
                    self.take(&watcher::Event::Apply((*held).clone()), true);
                }
                return Ok(());
            }
        }
        let namespace = if self.kind.namespaced {
            name.0.as_deref()
        } else {
            None
        };
        let api: Api<DynamicObject> = api_for(&self.client, &self.kind, namespace);
        let read = api.get_opt(&name.1).await.map_err(|e| {
            format!(
                "cannot read {} {}{}: {e}",
                self.kind.kind,
                name.0
                    .as_deref()
                    .map(|ns| format!("{ns}/"))
                    .unwrap_or_default(),
                name.1
            )
        })?;
        if !self.wanted(name) {
            return Ok(());
        }
        let event = match read {
            Some(mut o) => {
                lock(&self.absent).remove(name);
                pack(&mut o, &self.resource, &self.fields.borrow());
                watcher::Event::Apply(o)
            }
            None => {
                lock(&self.absent).insert(name.clone());
                match held {
                    Some(held) => watcher::Event::Delete((*held).clone()),
                    None => return Ok(()),
                }
            }
        };
        match why {
            Read::ForDecision => {
                lock(&self.unshown).insert(name.clone());
                self.take(&event, false);
            }
            Read::Seen(_) => {
                lock(&self.unshown).remove(name);
                self.take(&event, true);
            }
        }
        Ok(())
    }

    /// Watches the metadata of the kind (within the host's scope, selected by `labels`):
    /// a named object that changed is read again, one gone is dropped, each as an event
    /// for the subscribers. `listed` gets the fields of the first complete list (nothing is
    /// held before a primary names it, so the first list only starts the watch).
    pub(crate) async fn watch(
        self: Arc<Self>,
        labels: Option<String>,
        listed: watch::Sender<Option<Fields>>,
    ) {
        let api: Api<PartialObjectMeta<DynamicObject>> =
            match (self.kind.namespaced, self.scope.as_deref()) {
                (true, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, &self.resource),
                _ => Api::all_with(self.client.clone(), &self.resource),
            };
        let mut config = watcher::Config::default();
        if let Some(l) = &labels {
            config = config.labels(l);
        }
        let what = format!("{}.{}", self.kind.plural, self.kind.group);
        let mut events = std::pin::pin!(watcher(api, config).default_backoff());
        // The names a list showed: a held object not among them went while no watch ran.
        let mut listing: Option<HashSet<Name>> = None;
        while let Some(event) = events.next().await {
            let event = match event {
                Ok(e) => e,
                Err(e) => {
                    tracing::warn!(kind = %what, error = %e, "watch of the named objects failed; retrying");
                    continue;
                }
            };
            let result = match event {
                watcher::Event::Init => {
                    listing = Some(HashSet::new());
                    Ok(())
                }
                watcher::Event::InitApply(m) | watcher::Event::Apply(m) => {
                    let name = name_of(&m.metadata);
                    if let Some(seen) = listing.as_mut() {
                        seen.insert(name.clone());
                    }
                    if self.wanted(&name) {
                        let version = m.metadata.resource_version.as_deref().unwrap_or_default();
                        self.refresh(&name, Read::Seen(version)).await
                    } else {
                        Ok(())
                    }
                }
                watcher::Event::Delete(m) => {
                    let name = name_of(&m.metadata);
                    let _turn = self.fetching.lock().await;
                    lock(&self.unshown).remove(&name);
                    if self.wanted(&name) {
                        lock(&self.absent).insert(name.clone());
                    }
                    if let Some(held) = self.reader.get(&self.object_ref(&name)) {
                        self.take(&watcher::Event::Delete((*held).clone()), true);
                    }
                    Ok(())
                }
                watcher::Event::InitDone => {
                    let seen = listing.take().unwrap_or_default();
                    let _turn = self.fetching.lock().await;
                    for held in self.reader.state() {
                        let name = name_of(&held.metadata);
                        if !seen.contains(&name) {
                            lock(&self.unshown).remove(&name);
                            lock(&self.absent).insert(name);
                            self.take(&watcher::Event::Delete((*held).clone()), true);
                        }
                    }
                    listed.send_replace(Some(self.fields.borrow().clone()));
                    Ok(())
                }
            };
            if let Err(e) = result {
                tracing::warn!(kind = %what, error = %e, "cannot read a named object again");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn primary(name: &str) -> ObjectRef<DynamicObject> {
        let ar = ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&());
        ObjectRef::new_with(name, ar).within("a")
    }

    fn named(n: &str) -> Name {
        (Some("a".into()), n.into())
    }

    #[test]
    fn a_name_is_let_go_when_the_last_primary_naming_it_stops() {
        let mut index = Index::default();
        assert!(
            index
                .set(&primary("p1"), vec![named("x"), named("y")])
                .is_empty()
        );
        assert!(index.set(&primary("p2"), vec![named("x")]).is_empty());
        assert_eq!(index.set(&primary("p1"), vec![named("z")]), [named("y")]);
        assert_eq!(index.set(&primary("p2"), Vec::new()), [named("x")]);
        assert_eq!(index.set(&primary("p1"), Vec::new()), [named("z")]);
        assert!(index.by_object.is_empty() && index.by_primary.is_empty());
    }
}
