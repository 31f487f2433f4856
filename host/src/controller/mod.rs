//! One kube-runtime controller per plugin: the primary kind, plus a subscription to the
//! shared cache of each declared relation ([`crate::cache::shared`]) whose events trigger the right
//! primaries (owned objects their owner, namespace-wide relations every primary of the
//! namespace).

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::future::BoxFuture;
use kube::Client;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::events::Reporter;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};

use crate::cache::shared::{KindCache, SharedCaches};
use crate::expect::Expectations;
use crate::expect::progress::{self, Change, Expiry, Hold, Holds};
use crate::k8s::kinds::{api_as, api_for, api_resource};
use crate::observe::{Fields, selector_of};
use crate::plan::Checker;
use crate::reconcile::context::{Backoff, Context, RelatedCache};
use crate::reconcile::finalize::release_everywhere;
use crate::reconcile::own_writes;
use crate::reconcile::{error_policy, reconcile};
use crate::registry::Rejection;
use crate::registry::approval::approve;
use crate::registry::runner::{Prepared, Runner, Stop};
use crate::registry::slot::PluginSlot;
use crate::runtime::{PluginInfo, Sandbox, Selection};
use crate::shards::scope::relation_for;
use crate::telemetry::health::ReadyFlag;
use crate::telemetry::metrics::Metrics;

/// Everything a plugin's controller needs from the host.
#[derive(Clone)]
pub struct ControllerDeps {
    /// Kubernetes client.
    pub client: Client,
    /// The sandbox.
    pub sandbox: Sandbox,
    /// What turns a plan into steps: the guard (`--unsafe-disable-guard`: nothing, tests
    /// only).
    pub checker: Arc<dyn Checker>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Restrict to one namespace.
    pub namespace: Option<String>,
    /// Reporting identity for Events.
    pub reporter: Reporter,
    /// Reconciles of one plugin running at once.
    pub concurrency: u16,
    /// Trailing-edge debounce of reconcile requests per object.
    pub debounce: Duration,
    /// Most time a primary waits for the objects it controls to come to rest
    /// ([`crate::expect::progress`]; zero: never).
    pub progress_hold: Duration,
    /// Open while this replica leads (always, without leader election).
    pub fence: Arc<crate::k8s::fence::Fence>,
    /// One watch and cache per related kind, shared by the plugins.
    pub caches: Arc<SharedCaches>,
    /// Where decisions are recorded.
    pub cases: Arc<crate::rollout::record::CaseRecorder>,
    /// The clients plugins act through (their own ServiceAccounts).
    pub principals: Arc<crate::principals::identity::Principals>,
    /// The host's client without the fence: SubjectAccessReviews (questions, not writes)
    /// are asked by standbys too.
    pub reviewer: Client,
    /// This replica's shard when sharding is on (`None`: one replica works on everything).
    pub shard: Option<String>,
    /// Install the CRD a version declares for its primary kind when it is not served
    /// (`--install-crds`).
    pub install_crds: bool,
    /// The owned kinds whose objects made before were labelled with their controller in
    /// this process (unsharded): once each.
    pub labelled: Arc<Labelling>,
    /// Where plans' requests outside the cluster go out.
    pub outbound: Arc<crate::effects::Outbound>,
}

/// The owned kinds (with their primary kind) this process has labelled the unlabelled
/// objects of ([`crate::shards::migrate`]), so that a hot swap or a second plugin does not
/// list them again.
#[derive(Default)]
pub struct Labelling(
    tokio::sync::Mutex<
        std::collections::HashSet<(crate::runtime::KindRef, crate::runtime::KindRef)>,
    >,
);

/// The registry runs its plugins' controllers through this (its seam, [`Runner`]).
impl Runner for ControllerDeps {
    fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    fn approve<'a>(&'a self, info: &'a PluginInfo) -> BoxFuture<'a, Result<(), Rejection>> {
        Box::pin(approve(
            &self.reviewer,
            &self.principals,
            (
                self.namespace.as_deref(),
                self.shard.is_some(),
                // Unfenced, as the CRDs installed at start: an idempotent apply.
                self.install_crds.then_some(&self.reviewer),
            ),
            info,
        ))
    }

    fn prepare(&self, info: &PluginInfo) -> Box<dyn Prepared> {
        let (caches, listed) = info
            .relations
            .iter()
            .map(|r| {
                let relation = relation_for(r, self.shard.as_deref());
                let cache = self.caches.acquire(&relation);
                let listed = cache.listed_with(Fields::of(&relation));
                (cache, Box::pin(listed) as BoxFuture<'static, ()>)
            })
            .unzip();
        Box::new(Ready {
            deps: self.clone(),
            caches,
            listed: std::sync::Mutex::new(listed),
        })
    }

    fn release_finalizer<'a>(&'a self, info: &'a PluginInfo, fin: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if !self.fence.is_open() {
                tracing::info!(plugin = %info.name, finalizer = fin, "standby: the leader releases the finalizer");
                return;
            }
            let ns = self.namespace.as_deref();
            let client = match self.principals.client_for(&info.name) {
                Ok(c) => c,
                Err(e) => {
                    tracing::error!(plugin = %info.name, error = %e, "cannot make the plugin's client");
                    return;
                }
            };
            match release_everywhere(&self.client, &client, info, fin, ns).await {
                Ok(n) => tracing::info!(plugin = %info.name, finalizer = fin, released = n,
                    "finalizer no longer declared: released from the plugin's objects"),
                Err(e) => tracing::error!(plugin = %info.name, finalizer = fin, error = %e,
                    "could not release the finalizer from the plugin's objects"),
            }
        })
    }
}

/// A plugin's controller with the caches of its relations taken, waiting to start.
struct Ready {
    deps: ControllerDeps,
    caches: Vec<Arc<KindCache>>,
    /// Each cache's first full list (with the fields this plugin reads), taken once.
    listed: std::sync::Mutex<Vec<BoxFuture<'static, ()>>>,
}

impl Prepared for Ready {
    fn listed(&self) -> BoxFuture<'static, ()> {
        let all = std::mem::take(&mut *self.listed.lock().unwrap_or_else(|e| e.into_inner()));
        Box::pin(async move {
            futures::future::join_all(all).await;
        })
    }

    fn start(
        self: Box<Self>,
        slot: Arc<PluginSlot>,
        synced: ReadyFlag,
        reconcile_all: futures::channel::mpsc::UnboundedReceiver<()>,
        stop: Stop,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(run_controller(
            self.deps,
            slot,
            self.caches,
            synced,
            reconcile_all,
            stop,
        ))
    }
}

/// Which primaries an event of a related object concerns.
struct Route {
    selection: Selection,
    primaries: reflector::Store<DynamicObject>,
    primary: ApiResource,
    /// A referenced relation's index of who names what.
    named: Option<Arc<crate::cache::named::Named>>,
}

/// The primaries a list (or relist) of a related kind concerns, queued only once the cache
/// has swapped the list in (`InitDone`): a decision queued by an object of the list before
/// that reads the cache as it was before the list, and nothing queues it again after.
#[derive(Default)]
struct Listed {
    owners: std::collections::HashSet<ObjectRef<DynamicObject>>,
    namespaces: std::collections::HashSet<Option<String>>,
}

impl Route {
    /// Owned objects concern the owners of the primary kind named in their owner
    /// references; namespace-wide relations every primary of the object's namespace.
    fn primaries_of(&self, obj: &DynamicObject) -> Vec<ObjectRef<DynamicObject>> {
        let ns = obj.metadata.namespace.as_deref();
        match self.selection {
            Selection::Owned => obj
                .metadata
                .owner_references
                .iter()
                .flatten()
                .filter_map(|o| ObjectRef::from_owner_ref(ns, o, self.primary.clone()))
                .collect(),
            Selection::Namespace => self
                .primaries
                .state()
                .into_iter()
                .filter(|p| p.metadata.namespace.as_deref() == ns)
                .map(|p| ObjectRef::from_obj_with(&*p, self.primary.clone()))
                .collect(),
            Selection::Referenced(_) => self
                .named
                .as_ref()
                .map(|n| {
                    n.naming(&(
                        obj.metadata.namespace.clone(),
                        obj.metadata.name.clone().unwrap_or_default(),
                    ))
                })
                .unwrap_or_default(),
        }
    }

    /// Notes what `obj`, an object of a list, concerns.
    fn note(&self, listed: &mut Listed, obj: &DynamicObject) {
        match self.selection {
            Selection::Owned | Selection::Referenced(_) => {
                listed.owners.extend(self.primaries_of(obj))
            }
            Selection::Namespace => {
                listed.namespaces.insert(obj.metadata.namespace.clone());
            }
        }
    }

    /// The primaries the list noted in `listed` concerns, `listed` emptied.
    fn listed(&self, listed: &mut Listed) -> Vec<ObjectRef<DynamicObject>> {
        let mut primaries: Vec<_> = listed.owners.drain().collect();
        if !listed.namespaces.is_empty() {
            primaries.extend(
                self.primaries
                    .state()
                    .into_iter()
                    .filter(|p| listed.namespaces.contains(&p.metadata.namespace))
                    .map(|p| ObjectRef::from_obj_with(&*p, self.primary.clone())),
            );
            listed.namespaces.clear();
        }
        primaries
    }
}

/// The primary's watch with the objects of a list (or relist) held back until its end
/// (`InitDone`), when the store has swapped them in: a decision they queued before would
/// read the primary as the store held it before the list, and nothing would queue it
/// again. A list arrives in pages, or one object at a time from a streaming list.
fn once_swapped_in<S>(
    events: S,
) -> impl futures::Stream<Item = Result<watcher::Event<DynamicObject>, watcher::Error>>
where
    S: futures::Stream<Item = Result<watcher::Event<DynamicObject>, watcher::Error>>,
{
    events
        .scan(Vec::new(), |held, event| {
            let out = match event {
                Ok(watcher::Event::Init) => {
                    held.clear();
                    vec![Ok(watcher::Event::Init)]
                }
                Ok(watcher::Event::InitApply(o)) => {
                    held.push(o);
                    Vec::new()
                }
                Ok(watcher::Event::InitDone) => {
                    let mut out: Vec<_> = held
                        .drain(..)
                        .map(|o| Ok(watcher::Event::InitApply(o)))
                        .collect();
                    out.push(Ok(watcher::Event::InitDone));
                    out
                }
                other => vec![other],
            };
            futures::future::ready(Some(futures::stream::iter(out)))
        })
        .flatten()
}

/// What an owned relation's subscriber needs to hold primaries back while their objects
/// progress ([`crate::expect::progress`]).
struct Holding {
    holds: Arc<Holds>,
    expectations: Arc<Expectations>,
    kind: crate::runtime::KindRef,
    resource: ApiResource,
    store: reflector::Store<DynamicObject>,
    owners: Arc<crate::cache::owners::OwnerIndex>,
    trigger: futures::channel::mpsc::UnboundedSender<ObjectRef<DynamicObject>>,
    /// Counted when a hold runs out.
    expired: prometheus_client::metrics::counter::Counter,
}

impl Holding {
    /// What the event is to the primaries: asked before the expectations see it (whether it
    /// is the echo of the host's own write is known only until then).
    fn change_of(
        &self,
        e: &watcher::Event<DynamicObject>,
        before: Option<&DynamicObject>,
    ) -> Change {
        let own = match e {
            watcher::Event::Apply(o) => self.expectations.settled_by(
                &own_writes::key_of(&self.kind, o),
                crate::expect::Seen::Present(o),
            ),
            watcher::Event::Delete(o) => self.expectations.settled_by(
                &own_writes::key_of(&self.kind, o),
                crate::expect::Seen::Gone,
            ),
            _ => false,
        };
        progress::change_of(e, before, own)
    }

    /// Whether the change of one of `p`'s objects waits: progress while some object `p`
    /// controls is still in progress. A hold ends by itself when no object of the primary
    /// made a step for the limit (each step re-arms it); news ends any hold and none begins
    /// until the decision it asks for.
    fn held(&self, p: &ObjectRef<DynamicObject>, key: &str, change: Change) -> bool {
        let Some(uid) = p.extra.uid.as_deref() else {
            return false;
        };
        let news = match change {
            Change::News => true,
            Change::Unmatched => !self.expectations.carries_out(uid),
            Change::Progress => false,
        };
        tracing::debug!(primary = key, ?change, news, "a related change");
        if news {
            self.holds.owe(key);
            return false;
        }
        if !self.busy(uid) {
            // The last of them came to rest: a decision is owed now (also if the primary
            // still waits for its own writes: the echo that settles them queues it). Still a
            // step for the others' holds ([`Holds::hold`] notes the steps of held ones).
            self.holds.stepped(std::time::Instant::now());
            self.holds.owe(key);
            return false;
        }
        match self.holds.hold(key, std::time::Instant::now()) {
            Hold::Refused => false,
            Hold::Already => true,
            Hold::Started(hold) => {
                let (holds, key, trigger, p) = (
                    self.holds.clone(),
                    key.to_string(),
                    self.trigger.clone(),
                    p.clone(),
                );
                let (limit, expired) = (holds.limit(), self.expired.clone());
                let turn = self.turn();
                let uid = uid.to_string();
                // One timer per hold: it sleeps until the limit after the last step.
                tokio::spawn(async move {
                    let mut wait = limit;
                    loop {
                        tokio::time::sleep(wait).await;
                        let waiting = turn(&uid);
                        match holds.expire(&key, hold, std::time::Instant::now(), waiting) {
                            Expiry::Later(more) => wait = more,
                            Expiry::Gone => return,
                            Expiry::Ran => {
                                tracing::debug!(
                                    primary = key,
                                    ?limit,
                                    "its objects made no progress for the limit: the wait ran out"
                                );
                                expired.inc();
                                let _ = trigger.unbounded_send(p);
                                return;
                            }
                        }
                    }
                });
                true
            }
        }
    }

    /// Whether an object of this relation that a primary (by uid) controls waits its turn
    /// ([`progress::waiting_turn`]), for a hold's timer.
    fn turn(&self) -> impl Fn(&str) -> bool + Send + 'static {
        let (expectations, kind) = (self.expectations.clone(), self.kind.clone());
        let (owners, store, resource) = (
            self.owners.clone(),
            self.store.clone(),
            self.resource.clone(),
        );
        move |uid| {
            progress::waiting_turn(
                &expectations,
                (&kind.group, &kind.kind),
                (&owners, &store, &resource),
                uid,
            )
        }
    }

    /// Whether objects of this relation that the primary `uid` controls are still on their
    /// way: one in progress as cached now, or more coming (a plan being carried out, or
    /// written objects not yet in the cache). What comes to rest while a plan is carried
    /// out is looked at when it ends ([`crate::reconcile`]'s `came_to_rest`).
    fn busy(&self, uid: &str) -> bool {
        self.expectations.carries_out(uid)
            || progress::on_the_way(
                &self.expectations,
                (&self.kind.group, &self.kind.kind),
                (&self.owners, &self.store, &self.resource),
                uid,
            )
    }
}

/// What the primary cache's events tell about objects that leave it (deleted, or no longer
/// labelled for this shard): what they waited for, whether they were taken over, their
/// backoff and the objects they named are forgotten. A relist forgets who was taken over (an object may have left and
/// come back unseen during the gap).
fn departures(
    expectations: Arc<Expectations>,
    sighted: Arc<crate::reconcile::handover::Sighted>,
    backoff: Arc<Backoff>,
    (named, primary): (Vec<Arc<crate::cache::named::Named>>, ApiResource),
) -> impl Fn(&Result<watcher::Event<DynamicObject>, watcher::Error>) {
    move |event| match event {
        Ok(watcher::Event::Delete(o)) => {
            let uid = o.metadata.uid.as_deref().unwrap_or_default();
            expectations.forget(uid);
            sighted.left(uid);
            let at = ObjectRef::from_obj_with(o, primary.clone());
            for n in &named {
                n.release(&at);
            }
            backoff.succeeded(&crate::expect::triggers::key_of(
                o.metadata.namespace.as_deref(),
                o.metadata.name.as_deref().unwrap_or_default(),
            ));
        }
        Ok(watcher::Event::Init) => sighted.relisted(),
        _ => {}
    }
}

/// Which events of the primary's watch ask for a decision: all but the echo of a write of
/// the host's own (a status, a finalizer, a label it wrote, seen back at the version the
/// write returned), which tells the plugin nothing it did not decide. An echo still
/// triggers the primary when a decision is owed: a change of a related object asked for
/// one while the primary waited for this very write (the changes were not queued then), or
/// a reconcile found the primary waiting for it and parked. The initial list and relists
/// always trigger.
fn primary_news(
    expectations: Arc<Expectations>,
    triggers: Arc<crate::expect::triggers::Triggers>,
    holds: Arc<Holds>,
    kind: crate::runtime::KindRef,
) -> impl FnMut(&watcher::Event<DynamicObject>) -> futures::future::Ready<bool> {
    move |event| {
        let news = match event {
            watcher::Event::Apply(o) => {
                let echo = expectations.observe_echo(&own_writes::key_of(&kind, o), o);
                let uid = o.metadata.uid.as_deref().unwrap_or_default();
                let key = crate::expect::triggers::key_of(
                    o.metadata.namespace.as_deref(),
                    o.metadata.name.as_deref().unwrap_or_default(),
                );
                let news = if echo {
                    !expectations.waits(uid) && triggers.asks(&key) && !holds.holds(&key)
                } else {
                    // Maybe the echo of a write of the plan being carried out, seen before
                    // its answer: the plan's end tells.
                    !expectations.raced(uid, o.metadata.resource_version.as_deref())
                };
                tracing::debug!(primary = key, echo, news, "a primary change");
                news
            }
            _ => true,
        };
        futures::future::ready(news)
    }
}

/// Waits until a store has its first full list. `Store::wait_until_ready` wakes only one of
/// several concurrent waiters (the controller itself waits too), so poll it with a timeout:
/// once the value is memoised every poll is immediately ready.
async fn wait_ready(store: &reflector::Store<DynamicObject>) {
    while tokio::time::timeout(Duration::from_millis(100), store.wait_until_ready())
        .await
        .is_err()
    {}
}

/// How long a plan's writes may stay unseen by the watch before the primary is decided
/// anyway (a lost event; kube-controller-manager waits 5 minutes).
pub const EXPECTATION_TTL: Duration = Duration::from_secs(60);

/// Runs the controller of the plugin in `slot` until `shutdown` resolves; reconciles that
/// are running then finish first. `caches` are the shared caches of its relations, in the
/// order the plugin declares them ([`SharedCaches::acquire`]). No reconcile decides before every cache (the primary's
/// and each relation's) has its first full list; `synced` turns true then (readiness). A
/// message on `reconcile_all` reconciles every object again (after a swap).
pub async fn run_controller(
    deps: ControllerDeps,
    slot: Arc<PluginSlot>,
    caches: Vec<Arc<KindCache>>,
    synced: ReadyFlag,
    reconcile_all: futures::channel::mpsc::UnboundedReceiver<()>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let info = slot.current().info.clone();
    let ns = deps.namespace.as_deref();
    let primary_ar = api_resource(&info.primary);
    let primary_api = api_for(&deps.client, &info.primary, ns);
    // Every list is a consistent read ([`crate::cache::feed`]): a cache that starts after a
    // restart, a swap or a relist holds every write acknowledged before it, also the last
    // writes of the process or controller it replaces, which no expectation remembers.
    // Sharded, a replica watches only the primaries labelled for its shard.
    let primary_labels = deps
        .shard
        .as_deref()
        .map(crate::shards::scope::shard_selector);
    let primary_feed = crate::cache::feed::feed(
        api_as(&deps.client, &info.primary, ns),
        primary_api,
        primary_labels,
    );
    let expectations = Arc::new(Expectations::new(EXPECTATION_TTL));
    let sighted = Arc::new(crate::reconcile::handover::Sighted::default());
    let backoff = Arc::new(Backoff::default());
    let triggers = Arc::new(crate::expect::triggers::Triggers::default());
    let holds = Arc::new(Holds::new(deps.progress_hold));
    let mut writer = reflector::store::Writer::new(primary_ar.clone());
    let primary_store = writer.as_reader();
    // Each event into the store and through `primary_news` as one step under the gate,
    // which a plan's record of its own write of the primary waits for: the record never
    // finds in the store an echo the filter has yet to see (and would take for news).
    let primary_gate = crate::cache::shared::Gate::default();
    let primaries = {
        let gate = primary_gate.clone();
        let named = caches.iter().filter_map(|c| c.named.clone()).collect();
        let departed = departures(
            expectations.clone(),
            sighted.clone(),
            backoff.clone(),
            (named, primary_ar.clone()),
        );
        let mut news = primary_news(
            expectations.clone(),
            triggers.clone(),
            holds.clone(),
            info.primary.clone(),
        );
        primary_feed.filter_map(move |event| {
            let keep = gate.settled(|| {
                if let Ok(e) = &event {
                    writer.apply_watcher_event(e);
                }
                departed(&event);
                match &event {
                    Ok(e) => news(e).into_inner(),
                    Err(_) => true,
                }
            });
            futures::future::ready(keep.then_some(event))
        })
    };
    let primaries = once_swapped_in(primaries).applied_objects();
    let mut controller =
        Controller::for_stream_with(primaries, primary_store.clone(), primary_ar.clone());
    slot.set_primaries(primary_store.clone());
    let mut related = Vec::new();
    let mut listed = Vec::new();
    // Held until the controller stops: its callbacks stay on the shared caches till then.
    let mut subscriptions = Vec::new();
    for (declared, cache) in info.relations.iter().zip(caches) {
        // The relation as this shard's cache watches it (owned objects narrowed to it).
        let relation = &crate::shards::scope::relation_for(declared, deps.shard.as_deref());
        let (trigger, triggered) = futures::channel::mpsc::unbounded();
        let mut tap = own_writes::tap(
            expectations.clone(),
            relation.kind.clone(),
            cache.resource.clone(),
            cache.store.clone(),
        );
        let route = Route {
            selection: relation.selection.clone(),
            primaries: primary_store.clone(),
            primary: primary_ar.clone(),
            named: cache.named.clone(),
        };
        let asked = triggers.clone();
        let waiting = expectations.clone();
        let holding = (relation.selection == crate::runtime::Selection::Owned
            && !holds.limit().is_zero())
        .then(|| Holding {
            holds: holds.clone(),
            expectations: expectations.clone(),
            kind: relation.kind.clone(),
            resource: cache.resource.clone(),
            store: cache.store.clone(),
            owners: cache.owners.clone(),
            trigger: trigger.clone(),
            expired: deps
                .metrics
                .progress_holds_expired
                .get_or_create(&crate::telemetry::metrics::PluginOnlyLabels {
                    plugin: info.name.clone(),
                })
                .clone(),
        });
        // After the cache and the index took the event in: expectations first, then the
        // primaries it concerns are queued (their decision reads what the tap settled), each
        // with the time it was asked for before it is queued. A primary that still waits
        // for writes of its own is not queued: the event that settles its last expectation
        // queues it, and that decision reads every change the waiting one missed. Progress of
        // an owned object waits for its siblings ([`crate::expect::progress`]).
        let mut from_list = Listed::default();
        subscriptions.push(cache.subscribe(Box::new(move |e, before| {
            // Only objects with an owner concern an owned relation's primaries (an unrelated
            // pod costs nothing here).
            let owned = matches!(e, watcher::Event::Apply(o) | watcher::Event::Delete(o)
                if o.metadata.owner_references.as_ref().is_some_and(|r| !r.is_empty()));
            let change = holding
                .as_ref()
                .filter(|_| owned)
                .map(|h| h.change_of(e, before));
            tap(e);
            // The objects of a list (and a relist) queue their primaries once the cache has
            // swapped the list in; they are no change of the object: not timed.
            let o = match e {
                watcher::Event::Apply(o) | watcher::Event::Delete(o) => o,
                watcher::Event::Init => {
                    from_list = Listed::default();
                    return;
                }
                watcher::Event::InitApply(o) => {
                    route.note(&mut from_list, o);
                    return;
                }
                watcher::Event::InitDone => {
                    for p in route.listed(&mut from_list) {
                        let _ = trigger.unbounded_send(p);
                    }
                    return;
                }
            };
            let now = std::time::Instant::now();
            for p in route.primaries_of(o) {
                let key = crate::expect::triggers::key_of(p.namespace.as_deref(), &p.name);
                asked.asked(key.clone(), now);
                if let (Some(h), Some(change)) = (&holding, change)
                    && h.held(&p, &key, change)
                {
                    continue;
                }
                if p.extra.uid.as_deref().is_some_and(|uid| waiting.waits(uid)) {
                    continue;
                }
                let _ = trigger.unbounded_send(p);
            }
        })));
        listed.push(cache.listed_with(Fields::of(relation)));
        controller = controller.reconcile_on(triggered);
        related.push(RelatedCache {
            relation: relation.clone(),
            resource: cache.resource.clone(),
            store: cache.store.clone(),
            selector: selector_of(relation),
            owners: cache.owners.clone(),
            gate: cache.gate.clone(),
            named: cache.named.clone(),
        });
    }

    // Without sharding, owned objects made before the host labelled them are labelled
    // before the first decision (sharded, the sharder does it before assigning).
    let labelled: Vec<_> = match deps.shard {
        Some(_) => Vec::new(),
        None => info
            .relations
            .iter()
            .zip(&related)
            .filter(|(_, c)| c.relation.selection == Selection::Owned)
            .map(|(declared, c)| {
                label_before_deciding(&deps, &info.primary, declared.kind.clone(), c.store.clone())
            })
            .collect(),
    };
    let (synced_tx, synced_rx) = tokio::sync::watch::channel(false);
    let writer = match deps.principals.client_for(&info.name) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(plugin = %info.name, error = %e, "cannot make the plugin's client");
            return;
        }
    };
    let ctx = Arc::new(Context {
        client: deps.client.clone(),
        writer: writer.clone(),
        sandbox: deps.sandbox.clone(),
        slot,
        primary: primary_ar,
        related: related.clone(),
        checker: deps.checker.clone(),
        events: crate::reconcile::events::EventSink::start(
            crate::reconcile::series::SeriesRecorder::new(writer, deps.reporter.clone()),
        ),
        metrics: deps.metrics.clone(),
        backoff,
        primary_store: primary_store.clone(),
        expectations,
        synced: synced_rx,
        fence: deps.fence.clone(),
        cases: deps.cases.clone(),
        shard: deps.shard.clone(),
        triggers,
        holds,
        sighted,
        primary_gate,
        outbound: deps.outbound.clone(),
    });

    let readiness = {
        let primary_store = primary_store.clone();
        let name = info.name.clone();
        async move {
            let lists = async {
                wait_ready(&primary_store).await;
                for l in listed {
                    l.await;
                }
                tracing::info!(plugin = %name, "caches synced");
                // Ready without the labelling: a standby cannot write, and must not hold
                // up a rollout waiting for it.
                synced.set(true);
            };
            futures::future::join(lists, futures::future::join_all(labelled)).await;
            let _ = synced_tx.send(true);
        }
    };
    let readiness = tokio::spawn(readiness);

    let plugin_name = info.name.clone();
    controller
        .with_config(
            ControllerConfig::default()
                .concurrency(deps.concurrency)
                .debounce(deps.debounce),
        )
        .reconcile_all_on(reconcile_all)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|res| {
            if let Err(e) = res {
                tracing::debug!(plugin = %plugin_name, error = %e, "controller event");
            }
            futures::future::ready(())
        })
        .await;
    readiness.abort();
    drop(subscriptions);
    tracing::info!(plugin = %info.name, "controller stopped");
}

/// Labels the objects of the owned `kind` that a `primary` controls and that carry no
/// controller label yet (made by a host that did not label), once per process, then waits
/// until `store` (the owned cache, which selects on that label) shows each of them, holding
/// the memo meanwhile. Tries again until it succeeds: a standby's writes are fenced off
/// until it leads.
fn label_before_deciding(
    deps: &ControllerDeps,
    primary: &crate::runtime::KindRef,
    kind: crate::runtime::KindRef,
    store: reflector::Store<DynamicObject>,
) -> BoxFuture<'static, ()> {
    let (client, labelling) = (deps.client.clone(), deps.labelled.clone());
    let (ns, primary) = (deps.namespace.clone(), primary.clone());
    Box::pin(async move {
        let key = (kind.clone(), primary.clone());
        let mut done = labelling.0.lock().await;
        if done.contains(&key) {
            return;
        }
        let mut pause = Duration::from_millis(500);
        let found = loop {
            let labelling = crate::shards::migrate::label_controlled(
                &client,
                &kind,
                &primary,
                ns.as_deref(),
                crate::shards::scope::CONTROLLER_LABEL,
            );
            match labelling.await {
                Ok(found) => break found,
                Err(e) if crate::k8s::fence::is_fenced_off(&e) => {
                    tracing::debug!(kind = %kind.kind, "standby: the leader labels what was made before");
                }
                Err(e) => {
                    tracing::warn!(kind = %kind.kind, error = %e, retry_in = ?pause,
                        "cannot label the owned objects made before the host labelled them; not deciding yet");
                }
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(30));
        };
        if found.objects.is_empty() {
            done.insert(key);
            return;
        }
        tracing::info!(kind = %kind.kind, objects = found.objects.len(), owners = found.owners.len(),
            "owned objects made before labelled with their controller");
        let mut waiting = found.objects;
        let mut checked = Instant::now();
        while !waiting.is_empty() {
            waiting.retain(|(ns, name, uid)| {
                let mut key = ObjectRef::new_with(name, api_resource(&kind));
                if let Some(ns) = ns {
                    key = key.within(ns);
                }
                store
                    .get(&key)
                    .is_none_or(|o| o.metadata.uid.as_deref() != Some(uid))
            });
            if waiting.is_empty() {
                break;
            }
            // One deleted since is never seen: asked for now and then.
            if checked.elapsed() >= Duration::from_secs(2) {
                checked = Instant::now();
                let mut still = Vec::new();
                for (ns, name, uid) in waiting {
                    let api = api_for(&client, &kind, ns.as_deref());
                    match api.get_metadata_opt(&name).await {
                        Ok(Some(m)) if m.metadata.uid.as_deref() == Some(uid.as_str()) => {
                            still.push((ns, name, uid));
                        }
                        Ok(_) => {}
                        Err(_) => still.push((ns, name, uid)),
                    }
                }
                waiting = still;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Only now: a controller of the same kinds starting meanwhile (a swap) waits here
        // rather than deciding before the cache shows what was labelled.
        done.insert(key);
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expect::triggers::Triggers;
    use crate::expect::{Expect, ObjectKey};

    fn kind() -> crate::runtime::KindRef {
        crate::runtime::KindRef {
            group: "app.example.com".into(),
            version: "v1alpha1".into(),
            kind: "PodReplica".into(),
            plural: "podreplicas".into(),
            namespaced: true,
        }
    }

    fn primary(rv: &str) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "app.example.com/v1alpha1", "kind": "PodReplica",
            "metadata": {"name": "p", "namespace": "d", "uid": "u", "resourceVersion": rv},
        }))
        .unwrap()
    }

    fn key(name: &str) -> ObjectKey {
        ObjectKey {
            group: "app.example.com".into(),
            kind: "PodReplica".into(),
            namespace: Some("d".into()),
            name: name.into(),
        }
    }

    fn pod_key() -> ObjectKey {
        ObjectKey {
            group: String::new(),
            kind: "Pod".into(),
            namespace: Some("d".into()),
            name: "p-pod-1".into(),
        }
    }

    fn written(rv: &str) -> Expect {
        Expect::Written {
            resource_version: rv.into(),
        }
    }

    fn news(
        filter: &mut impl FnMut(&watcher::Event<DynamicObject>) -> futures::future::Ready<bool>,
        event: watcher::Event<DynamicObject>,
    ) -> bool {
        futures::executor::block_on(filter(&event))
    }

    /// Fresh expectations (60 s), triggers and holds (1 s).
    fn fixture() -> (Arc<Expectations>, Arc<Triggers>, Arc<Holds>) {
        (
            Arc::new(Expectations::new(Duration::from_secs(60))),
            Arc::new(Triggers::default()),
            Arc::new(Holds::new(Duration::from_secs(1))),
        )
    }

    #[test]
    fn the_echo_of_an_own_write_is_no_news_unless_a_decision_is_owed() {
        let (expectations, triggers, holds) = fixture();
        let mut filter = primary_news(
            expectations.clone(),
            triggers.clone(),
            holds.clone(),
            kind(),
        );
        // Someone else's change: news.
        assert!(news(&mut filter, watcher::Event::Apply(primary("5"))));
        // The host wrote the status (rv 6): its echo is not.
        expectations.expect("u", key("p"), written("6"), || None);
        assert!(!news(&mut filter, watcher::Event::Apply(primary("6"))));
        assert!(!expectations.waits("u"), "the echo settled the write");
        // The initial list and relists always are.
        assert!(news(&mut filter, watcher::Event::InitApply(primary("6"))));
        assert!(news(&mut filter, watcher::Event::InitDone));

        // A related change asked while the primary waited for its status and a pod it
        // created: the status's echo is no news while the pod is unseen...
        expectations.expect("u", key("p"), written("8"), || None);
        expectations.expect("u", pod_key(), written("7"), || None);
        triggers.asked("d/p".into(), std::time::Instant::now());
        assert!(!news(&mut filter, watcher::Event::Apply(primary("8"))));
        // ...and once nothing is awaited, the echo that settles the last write owes the
        // decision the waiting change asked for.
        expectations.expect("u", key("p"), written("9"), || None);
        expectations.observe(
            &pod_key(),
            crate::expect::Seen::Present(
                &serde_json::from_value(serde_json::json!({
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": "p-pod-1", "namespace": "d", "resourceVersion": "7"},
                }))
                .unwrap(),
            ),
        );
        assert!(news(&mut filter, watcher::Event::Apply(primary("9"))));

        // What asked is only the progress of its pods, held back for their siblings: the
        // echo waits with it; once news asks too, the echo owes the decision.
        expectations.expect("u", key("p"), written("10"), || None);
        assert!(matches!(
            holds.hold("d/p", std::time::Instant::now()),
            Hold::Started(_)
        ));
        assert!(!news(&mut filter, watcher::Event::Apply(primary("10"))));
        holds.owe("d/p");
        expectations.expect("u", key("p"), written("11"), || None);
        assert!(news(&mut filter, watcher::Event::Apply(primary("11"))));
    }

    #[test]
    fn a_reconcile_that_parks_after_its_echo_came_decides_again_itself() {
        // A first decision owed after the host's own write (the finalizer added, or a
        // reconcile parked at the gate): the echo of the write may come on the watch
        // before the reconcile notes that a decision is owed. Then the echo asks for
        // nothing (no decision was owed yet), and the parking reconcile must see it.
        let (expectations, triggers, holds) = fixture();
        let mut filter = primary_news(
            expectations.clone(),
            triggers.clone(),
            holds.clone(),
            kind(),
        );
        // The echo first: no news, and nothing awaited any more.
        expectations.expect("u", key("p"), written("6"), || None);
        assert!(!news(&mut filter, watcher::Event::Apply(primary("6"))));
        assert!(
            expectations.park(&triggers, "d/p".into(), "u"),
            "parked after its echo: the reconcile must decide again itself"
        );
        assert!(triggers.take("d/p").is_some());
        // Parked first: the echo queues it, the reconcile does not.
        expectations.expect("u", key("p"), written("7"), || None);
        assert!(!expectations.park(&triggers, "d/p".into(), "u"));
        assert!(news(&mut filter, watcher::Event::Apply(primary("7"))));
    }

    fn named(name: &str, namespace: &str, owner: Option<&str>) -> DynamicObject {
        let owners: Vec<_> = owner
            .map(|o| {
                serde_json::json!({"apiVersion": "app.example.com/v1alpha1",
                    "kind": "PodReplica", "name": o, "uid": format!("uid-{o}"),
                    "controller": true})
            })
            .into_iter()
            .collect();
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "ownerReferences": owners},
        }))
        .unwrap()
    }

    fn names(events: &[watcher::Event<DynamicObject>]) -> Vec<String> {
        events
            .iter()
            .map(|e| match e {
                watcher::Event::Init => "Init".to_string(),
                watcher::Event::InitDone => "InitDone".to_string(),
                watcher::Event::InitApply(o) => {
                    format!("InitApply {}", o.metadata.name.clone().unwrap())
                }
                watcher::Event::Apply(o) => format!("Apply {}", o.metadata.name.clone().unwrap()),
                watcher::Event::Delete(o) => format!("Delete {}", o.metadata.name.clone().unwrap()),
            })
            .collect()
    }

    /// A decision queued by an object of a list would read the store before the list is
    /// swapped in (`InitDone`): the objects come after the end of their list, each list on
    /// its own, and changes pass at once.
    #[test]
    fn the_objects_of_a_list_queue_decisions_only_once_the_list_is_swapped_in() {
        let events = vec![
            watcher::Event::Init,
            watcher::Event::InitApply(named("a", "d", None)),
            watcher::Event::InitApply(named("b", "d", None)),
            watcher::Event::InitDone,
            watcher::Event::Apply(named("a", "d", None)),
            watcher::Event::Delete(named("b", "d", None)),
            // A relist that is started again before its end drops what it had.
            watcher::Event::Init,
            watcher::Event::InitApply(named("c", "d", None)),
            watcher::Event::Init,
            watcher::Event::InitApply(named("a", "d", None)),
            watcher::Event::InitDone,
        ];
        let out: Vec<_> = futures::executor::block_on(
            once_swapped_in(futures::stream::iter(events.into_iter().map(Ok))).collect::<Vec<_>>(),
        )
        .into_iter()
        .map(Result::unwrap)
        .collect();
        assert_eq!(
            names(&out),
            [
                "Init",
                "InitApply a",
                "InitApply b",
                "InitDone",
                "Apply a",
                "Delete b",
                "Init",
                "Init",
                "InitApply a",
                "InitDone"
            ]
        );
        // Errors pass through, in their place.
        let events = vec![
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(named("a", "d", None))),
            Err(watcher::Error::NoResourceVersion),
            Ok(watcher::Event::InitDone),
        ];
        let out = futures::executor::block_on(
            once_swapped_in(futures::stream::iter(events)).collect::<Vec<_>>(),
        );
        assert!(matches!(out[0], Ok(watcher::Event::Init)));
        assert!(out[1].is_err());
        assert!(
            matches!(&out[2], Ok(watcher::Event::InitApply(o)) if o.metadata.name.as_deref() == Some("a"))
        );
        assert!(matches!(out[3], Ok(watcher::Event::InitDone)));
    }

    /// The primaries a related list concerns: each owner once, however many of its
    /// objects the list holds; for a namespace-wide relation, every primary of each
    /// namespace the list touched.
    #[test]
    fn a_related_list_queues_each_primary_it_concerns_once() {
        let ar = ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("app.example.com", "v1alpha1", "PodReplica"),
            "podreplicas",
        );
        let mut writer = reflector::store::Writer::new(ar.clone());
        for (name, ns) in [("p", "d"), ("q", "d"), ("r", "e")] {
            let mut o = primary("1");
            o.metadata.name = Some(name.into());
            o.metadata.namespace = Some(ns.into());
            writer.apply_watcher_event(&watcher::Event::Apply(o));
        }
        let route = |selection| Route {
            selection,
            primaries: writer.as_reader(),
            primary: ar.clone(),
            named: None,
        };
        let sorted = |mut v: Vec<ObjectRef<DynamicObject>>| {
            v.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
            v.into_iter()
                .map(|r| format!("{}/{}", r.namespace.unwrap_or_default(), r.name))
                .collect::<Vec<_>>()
        };
        let owned = route(Selection::Owned);
        let mut listed = Listed::default();
        for (pod, owner) in [
            ("p-1", Some("p")),
            ("p-2", Some("p")),
            ("x", None),
            ("q-1", Some("q")),
        ] {
            owned.note(&mut listed, &named(pod, "d", owner));
        }
        assert_eq!(sorted(owned.listed(&mut listed)), ["d/p", "d/q"]);
        assert!(owned.listed(&mut listed).is_empty(), "emptied");
        let everyone = route(Selection::Namespace);
        for pod in ["a", "b", "c"] {
            everyone.note(&mut listed, &named(pod, "e", None));
        }
        assert_eq!(sorted(everyone.listed(&mut listed)), ["e/r"]);
    }
}
