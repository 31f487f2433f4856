//! One watch, one cache and one owner index per related kind (and label selector), shared by
//! every plugin that relates to it: with PodReplica and ChaosPod both relating to pods, the
//! host lists and watches pods once and holds each pod once.
//!
//! A [`KindCache`] lives while a controller holds it ([`SharedCaches::acquire`]); the last
//! holder dropping it stops its watch. Each controller subscribes a callback
//! ([`KindCache::subscribe`]) that the watch task calls for every event *after* the cache and
//! the owner index have taken it in: there the controller shows the event to its
//! expectations and triggers the primaries it concerns. A controller that subscribes to a
//! cache already listed starts warm (its own primary list triggers every primary anyway).
//!
//! Relations of one kind with different label selectors get a cache each (an object in both
//! selections is then held twice): watching the whole kind instead would cache every object
//! of the kind for a plugin that asked for a few.
//!
//! Relations that read different parts of the objects (`Relation::fields`) share one cache
//! that keeps the union of what they read: a relation the cache does not cover yet widens it
//! ([`KindCache::widen`]), which relists the kind packing the wider view; a controller counts
//! as synced only once a list covering its fields is in. A cache never narrows while held: a
//! plugin then sees more than it declared, never less.
//!
//! A selection whose labels the host sets and anyone may edit (a shard's owned objects) may
//! have a [`Custodian`]: the cache asks it before letting go of an object the watch says
//! left the selection, and shows it every object that comes in or changes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use futures::StreamExt;
use futures::future::BoxFuture;
use kube::Client;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::reflector::{ObjectRef, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;

use crate::cache::feed::feed;
use crate::cache::guest_view::pack;
use crate::cache::named::Named;
use crate::cache::owners::OwnerIndex;
use crate::k8s::kinds::{api_as, api_for, api_resource};
use crate::observe::Fields;
use crate::runtime::{Relation, Selection};
use crate::telemetry::metrics::{CacheLabels, Metrics};

/// Looks after the objects of a selection whose labels others may edit: a cache of a
/// relation it covers asks it before letting go of an object its watch says left the
/// selection, and shows it every object that came in or changed.
pub trait Custodian: Send + Sync {
    /// Whether it looks after the cache of `relation`.
    fn covers(&self, relation: &Relation) -> bool;
    /// The watch says `object` (as the cache held it) left the selection of `relation`:
    /// whether the cache keeps it, because it is still there and was put back into the
    /// selection (its return then comes as a change). The watch waits for the answer.
    fn keeps<'a>(
        &'a self,
        relation: &'a Relation,
        object: &'a DynamicObject,
    ) -> BoxFuture<'a, bool>;
    /// `object` came into the selection of `relation` or changed. Must not block.
    fn arrived(&self, relation: &Relation, object: &DynamicObject);
}

/// A callback shown every event of a [`KindCache`], after the cache and its index, with the
/// object as the cache held it before an `Apply` or a `Delete` (`None`: it did not).
pub type OnEvent = Box<dyn FnMut(&watcher::Event<DynamicObject>, Option<&DynamicObject>) + Send>;

/// Where events enter a cache: each is taken in (the store, the owner index, every
/// subscriber) as one step under the gate, and [`Gate::settled`] runs between two such
/// steps, never inside one. Whoever reads the store and records what it waits for under
/// the gate (the expectations of a plan's own writes) cannot find an object the
/// subscribers have not yet been shown: the subscribers then classify its event knowing
/// what was recorded (an echo of the plan's create is not taken for news).
#[derive(Clone, Default)]
pub struct Gate(Arc<Mutex<()>>);

impl Gate {
    /// Runs `f` between two events: none is half taken in meanwhile.
    pub fn settled<R>(&self, f: impl FnOnce() -> R) -> R {
        let _between = self.0.lock().unwrap_or_else(|e| e.into_inner());
        f()
    }
}

#[derive(Default)]
struct Subscribers {
    next_id: u64,
    list: Vec<(u64, OnEvent)>,
}

/// What tells two relations' caches apart.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct CacheKey {
    group: String,
    version: String,
    plural: String,
    label_selector: Option<String>,
    /// A referenced relation's cache is its controller's own (it holds what that
    /// controller's primaries name): a number no other key has.
    own: Option<u64>,
}

impl CacheKey {
    fn of(relation: &Relation) -> CacheKey {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        CacheKey {
            group: relation.kind.group.clone(),
            version: relation.kind.version.clone(),
            plural: relation.kind.plural.clone(),
            label_selector: relation.label_selector.clone(),
            own: matches!(relation.selection, Selection::Referenced(_))
                .then(|| NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)),
        }
    }
}

/// The caches of every related kind, each shared by the controllers that relate to it.
pub struct SharedCaches {
    client: Client,
    namespace: Option<String>,
    metrics: Arc<Metrics>,
    custodian: Option<Arc<dyn Custodian>>,
    caches: Mutex<HashMap<CacheKey, Weak<KindCache>>>,
}

impl SharedCaches {
    /// Caches that watch through `client`, within `namespace` when given, counted in
    /// `metrics` (`wasmop_cached_objects`, `wasmop_cache_subscribers`).
    pub fn new(
        client: Client,
        namespace: Option<String>,
        metrics: Arc<Metrics>,
    ) -> Arc<SharedCaches> {
        Arc::new(SharedCaches {
            client,
            namespace,
            metrics,
            custodian: None,
            caches: Mutex::default(),
        })
    }

    /// [`SharedCaches::new`] whose caches of the relations `custodian` covers are looked
    /// after by it.
    pub fn with_custodian(
        client: Client,
        namespace: Option<String>,
        metrics: Arc<Metrics>,
        custodian: Arc<dyn Custodian>,
    ) -> Arc<SharedCaches> {
        Arc::new(SharedCaches {
            client,
            namespace,
            metrics,
            custodian: Some(custodian),
            caches: Mutex::default(),
        })
    }

    /// The cache for `relation`: the running one if a controller holds it, else a new one
    /// whose watch starts now. Must be called within a Tokio runtime.
    pub fn acquire(&self, relation: &Relation) -> Arc<KindCache> {
        let key = CacheKey::of(relation);
        let mut caches = self.caches.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(cache) = caches.get(&key).and_then(Weak::upgrade) {
            cache.widen(&Fields::of(relation));
            return cache;
        }
        caches.retain(|_, c| c.strong_count() > 0);
        let custodian = self.custodian.clone().filter(|c| c.covers(relation));
        let cache = Arc::new(KindCache::start(
            &self.client,
            relation,
            self.namespace.as_deref(),
            self.metrics.clone(),
            custodian,
        ));
        caches.insert(key, Arc::downgrade(&cache));
        cache
    }
}

/// One watch of a kind, its cache and its index by controlling owner.
pub struct KindCache {
    /// The kind's API resource.
    pub resource: ApiResource,
    /// Every watched object, packed at ingest ([`crate::cache::packed`]).
    pub store: Store<DynamicObject>,
    /// The cache indexed by controlling owner UID.
    pub owners: Arc<OwnerIndex>,
    /// What the watch packs of each object: sent to the watch task, which relists when it
    /// widens.
    packing: watch::Sender<Fields>,
    /// The view the last complete list packed (`None` before the first).
    listed: watch::Receiver<Option<Fields>>,
    subscribers: Arc<Mutex<Subscribers>>,
    /// Where its events come in ([`Gate`]).
    pub gate: Gate,
    /// A referenced relation's: who names what, and the reads that fill the cache.
    pub named: Option<Arc<Named>>,
    task: tokio::task::AbortHandle,
    metrics: Arc<Metrics>,
    labels: CacheLabels,
}

impl Drop for KindCache {
    fn drop(&mut self) {
        self.task.abort();
        self.metrics.cached_objects.remove(&self.labels);
        self.metrics.cache_subscribers.remove(&self.labels);
    }
}

/// A subscription to a [`KindCache`]; dropping it unsubscribes.
pub struct Subscription {
    cache: Arc<KindCache>,
    id: u64,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut subs = lock(&self.cache.subscribers);
        subs.list.retain(|(id, _)| *id != self.id);
        self.cache.count_subscribers(subs.list.len());
    }
}

fn lock(s: &Mutex<Subscribers>) -> std::sync::MutexGuard<'_, Subscribers> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

/// What an event of the watch goes through, in order, as one step under the [`Gate`].
pub(crate) struct Intake {
    gate: Gate,
    writer: Writer<DynamicObject>,
    reader: Store<DynamicObject>,
    index: Arc<OwnerIndex>,
    subscribers: Arc<Mutex<Subscribers>>,
}

impl Intake {
    /// Takes `e` into the store and the index, then shows it to every subscriber with the
    /// object as the store held it before (`held_as`: the kind's resource).
    pub(crate) fn take(&mut self, e: &watcher::Event<DynamicObject>, held_as: &ApiResource) {
        let Intake {
            gate,
            writer,
            reader,
            index,
            subscribers,
        } = self;
        gate.settled(|| {
            let before = match e {
                watcher::Event::Apply(o) | watcher::Event::Delete(o) => {
                    reader.get(&ObjectRef::from_obj_with(o, held_as.clone()))
                }
                _ => None,
            };
            writer.apply_watcher_event(e);
            index.apply(e);
            for (_, on_event) in lock(subscribers).list.iter_mut() {
                on_event(e, before.as_deref());
            }
        })
    }

    /// Takes `e` into the store and the index without showing it to any subscriber (an
    /// object the cache holds only while a primary names it, [`crate::cache::named`]: read
    /// for the decision about to observe it, or let go because none names it any more).
    pub(crate) fn take_unshown(&mut self, e: &watcher::Event<DynamicObject>) {
        let Intake {
            gate,
            writer,
            index,
            ..
        } = self;
        gate.settled(|| {
            writer.apply_watcher_event(e);
            index.apply(e);
        })
    }
}

impl KindCache {
    fn start(
        client: &Client,
        relation: &Relation,
        namespace: Option<&str>,
        metrics: Arc<Metrics>,
        custodian: Option<Arc<dyn Custodian>>,
    ) -> KindCache {
        let kind = &relation.kind;
        let looked_after = relation.clone();
        let resource = api_resource(kind);
        let api = api_for(client, kind, namespace);
        let incoming = api_as(client, kind, namespace);
        let labels_watched = relation.label_selector.clone();
        let what = format!("{}.{}", kind.plural, kind.group);
        let labels = CacheLabels {
            resource: what.clone(),
            selector: relation.label_selector.clone().unwrap_or_default(),
        };
        let (gauges, gauge_labels) = (metrics.clone(), labels.clone());
        let writer: Writer<DynamicObject> = Writer::new(resource.clone());
        let store = writer.as_reader();
        let reader = store.clone();
        let owners = OwnerIndex::new();
        let (listed_tx, listed) = watch::channel(None);
        let (packing, mut packed_as) = watch::channel(Fields::of(relation));
        let subscribers: Arc<Mutex<Subscribers>> = Arc::default();
        let gate = Gate::default();
        let mut intake = Intake {
            gate: gate.clone(),
            writer,
            reader: reader.clone(),
            index: owners.clone(),
            subscribers: subscribers.clone(),
        };
        if let Selection::Referenced(reference) = &relation.selection {
            let named = Arc::new(Named::new(
                reference.clone(),
                kind.clone(),
                resource.clone(),
                client.clone(),
                namespace.map(str::to_string),
                packed_as,
                Mutex::new(intake),
                reader,
                Box::new(move |n| {
                    gauges
                        .cached_objects
                        .get_or_create(&gauge_labels)
                        .set(n as i64);
                }),
            ));
            let task = tokio::spawn(named.clone().watch(labels_watched, listed_tx));
            return KindCache {
                resource,
                store,
                owners,
                packing,
                listed,
                subscribers,
                gate,
                named: Some(named),
                task: task.abort_handle(),
                metrics,
                labels,
            };
        }
        // Every list is a consistent read ([`crate::cache::feed`]): a cache that starts after
        // a restart, a swap or a relist holds every write acknowledged before it, also the
        // last writes of the process or controller it replaces, which no expectation
        // remembers.
        let ar = resource.clone();
        let held_as = resource.clone();
        let watch = move |fields: Fields| {
            let ar = ar.clone();
            feed(incoming.clone(), api.clone(), labels_watched.clone())
                .modify(move |o| pack(o, &ar, &fields))
                .default_backoff()
                .boxed()
        };
        let task = tokio::spawn(async move {
            let mut fields = packed_as.borrow_and_update().clone();
            let mut events = watch(fields.clone());
            let mut listing = std::time::Instant::now();
            loop {
                let event = tokio::select! {
                    widened = packed_as.changed() => {
                        if widened.is_err() {
                            break;
                        }
                        // A new watch lists everything again, packed the wider way; the
                        // cache and the index swap the new list in whole at its end.
                        fields = packed_as.borrow_and_update().clone();
                        events = watch(fields.clone());
                        tracing::info!(kind = %what, "a relation reads more of these objects: relisting");
                        continue;
                    }
                    event = events.next() => match event {
                        Some(event) => event,
                        None => break,
                    },
                };
                match event {
                    Ok(watcher::Event::Delete(o))
                        if match &custodian {
                            Some(c) => c.keeps(&looked_after, &o).await,
                            None => false,
                        } =>
                    {
                        // Put back into the selection: the cache keeps it as it was until
                        // its return comes.
                        continue;
                    }
                    Ok(e) => {
                        if matches!(e, watcher::Event::Init) {
                            listing = std::time::Instant::now();
                        }
                        if let (Some(c), watcher::Event::Apply(o) | watcher::Event::InitApply(o)) =
                            (&custodian, &e)
                        {
                            c.arrived(&looked_after, o);
                        }
                        intake.take(&e, &held_as);
                        gauges
                            .cached_objects
                            .get_or_create(&gauge_labels)
                            .set(reader.len() as i64);
                        if matches!(e, watcher::Event::InitDone) {
                            tracing::debug!(kind = %what, objects = reader.len(),
                                took = ?listing.elapsed(), "listed");
                            listed_tx.send_replace(Some(fields.clone()));
                        }
                    }
                    Err(e) => tracing::warn!(kind = %what, error = %e, "watch failed; retrying"),
                }
            }
        });
        KindCache {
            resource,
            store,
            owners,
            packing,
            listed,
            subscribers,
            gate,
            named: None,
            task: task.abort_handle(),
            metrics,
            labels,
        }
    }

    fn count_subscribers(&self, n: usize) {
        self.metrics
            .cache_subscribers
            .get_or_create(&self.labels)
            .set(n as i64);
    }

    /// Calls `on_event` for every event from now on, after the cache and the index took it
    /// in, until the returned subscription is dropped.
    pub fn subscribe(self: &Arc<Self>, on_event: OnEvent) -> Subscription {
        let mut subs = lock(&self.subscribers);
        let id = subs.next_id;
        subs.next_id += 1;
        subs.list.push((id, on_event));
        self.count_subscribers(subs.list.len());
        Subscription {
            cache: self.clone(),
            id,
        }
    }

    /// Makes the cache keep at least `needed` of every object: if it does not yet, the
    /// kind is listed again and packed with the union of both views.
    pub fn widen(&self, needed: &Fields) {
        self.packing.send_if_modified(|current| {
            if current.covers(needed) {
                return false;
            }
            *current = current.union(needed);
            true
        });
    }

    /// Waits until a full list that keeps at least `needed` of every object has passed the
    /// cache, the index and every subscriber (a decision before that could read an index
    /// missing what it owns, or objects without the fields it reads).
    pub fn listed_with(&self, needed: Fields) -> impl std::future::Future<Output = ()> + use<> {
        let mut listed = self.listed.clone();
        async move {
            let _ = listed
                .wait_for(|l| l.as_ref().is_some_and(|f| f.covers(&needed)))
                .await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc;

    /// A plan records its create while the pod's event is half taken in (in the store, its
    /// subscribers not yet shown it): under the gate the record waits for the subscribers,
    /// so it never finds in the store an object whose event they have yet to classify.
    #[test]
    fn a_reader_under_the_gate_never_sees_an_object_its_subscribers_were_not_shown() {
        let pods = ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&());
        let writer = Writer::new(pods.clone());
        let store = writer.as_reader();
        let subscribers: Arc<Mutex<Subscribers>> = Arc::default();
        let gate = Gate::default();
        let mut intake = Intake {
            gate: gate.clone(),
            writer,
            reader: store.clone(),
            index: OwnerIndex::new(),
            subscribers: subscribers.clone(),
        };
        let shown = Arc::new(AtomicBool::new(false));
        let (inside_tx, inside_rx) = mpsc::channel::<()>();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let seen = shown.clone();
        lock(&subscribers).list.push((
            0,
            Box::new(move |_, _| {
                let _ = inside_tx.send(());
                let _ = go_rx.recv();
                seen.store(true, Ordering::SeqCst);
            }),
        ));
        let pod: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "d", "uid": "u", "resourceVersion": "7"}}))
        .unwrap();
        let held_as = pods.clone();
        let taking = std::thread::spawn(move || intake.take(&watcher::Event::Apply(pod), &held_as));
        inside_rx.recv().unwrap();
        let shown_then = shown.clone();
        let reading = std::thread::spawn(move || {
            gate.settled(|| {
                let r = ObjectRef::new_with("p", pods).within("d");
                (store.get(&r).is_some(), shown_then.load(Ordering::SeqCst))
            })
        });
        // Time for the reader to run ahead if nothing stops it.
        std::thread::sleep(std::time::Duration::from_millis(50));
        go_tx.send(()).unwrap();
        taking.join().unwrap();
        let (visible, shown) = reading.join().unwrap();
        assert!(visible, "the pod is in the store once taken in");
        assert!(
            shown,
            "the reader saw the pod before its subscribers were shown it"
        );
    }
}
