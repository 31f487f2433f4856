//! Between the caches and the [`Expectations`]: every watch event of a related kind is
//! shown to them ([`tap`]), every completed write of a plan is recorded as an expectation
//! of the caches that will see it ([`record`]), and the primary's own writes (status,
//! finalizers, conditions) are expected of the primary's cache ([`record_primary`]).

use std::sync::Arc;

use kube::api::{ApiResource, DynamicObject};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;

use crate::expect::{Expect, Expectations, ObjectKey, Seen};
use crate::reconcile::context::Context;
use crate::reconcile::execute::Written;
use crate::runtime::KindRef;

/// The expectation key of an object of `kind`.
pub fn key_of(kind: &KindRef, obj: &DynamicObject) -> ObjectKey {
    ObjectKey {
        group: kind.group.clone(),
        kind: kind.kind.clone(),
        namespace: obj.metadata.namespace.clone(),
        name: obj.metadata.name.clone().unwrap_or_default(),
    }
}

/// An observer for a relation's watch events (after its cache and owner index have taken
/// each in): shows every object event to the expectations. A relist's objects
/// (`InitApply`) are not shown one by one, since the cache swaps them in only at `InitDone`:
/// an expectation settled by them early would let a primary decide on the old cache, which
/// misses the very write it waited for. At `InitDone` the whole new cache is shown.
pub fn tap(
    expectations: Arc<Expectations>,
    kind: KindRef,
    resource: ApiResource,
    store: Store<DynamicObject>,
) -> impl FnMut(&watcher::Event<DynamicObject>) + Send + 'static {
    move |event| match event {
        watcher::Event::Apply(o) => {
            expectations.observe(&key_of(&kind, o), Seen::Present(o));
        }
        watcher::Event::Delete(o) => expectations.observe(&key_of(&kind, o), Seen::Gone),
        watcher::Event::InitDone => {
            expectations.relisted(&kind.group, &kind.kind, |key| {
                store.get(&object_ref(&resource, key.namespace.as_deref(), &key.name))
            });
        }
        watcher::Event::Init | watcher::Event::InitApply(_) => {}
    }
}

fn object_ref(ar: &ApiResource, namespace: Option<&str>, name: &str) -> ObjectRef<DynamicObject> {
    let r = ObjectRef::new_with(name, ar.clone());
    match namespace {
        Some(ns) => r.within(ns),
        None => r,
    }
}

/// Records what a completed write of `primary_uid`'s plan must show in the caches. A
/// written object that no cache will show (a kind no relation watches, or labels outside
/// every selector of its kind) is not expected.
pub fn record(ctx: &Context, primary_uid: &str, written: Written) {
    match written {
        Written::Object { kind, object } => {
            let labels = object.metadata.labels.clone().unwrap_or_default();
            let cache = ctx.related.iter().find(|c| {
                c.relation.kind == kind && c.selector.as_ref().is_ok_and(|s| s.matches(&labels))
            });
            let (Some(cache), Some(rv)) = (cache, object.metadata.resource_version.clone()) else {
                return;
            };
            let key = key_of(&kind, &object);
            let oref = object_ref(&cache.resource, key.namespace.as_deref(), &key.name);
            // Already seen only once the owner index shows it too: decisions read the
            // index, which the watch updates a moment after the cache. Under the cache's
            // gate: an object the store holds has been shown to the subscribers too.
            cache.gate.settled(|| {
                ctx.expectations.expect(
                    primary_uid,
                    key,
                    Expect::Written {
                        resource_version: rv,
                    },
                    || cache.store.get(&oref).filter(|o| cache.owners.shows(o)),
                )
            });
        }
        Written::Unanswered(step) => unanswered(ctx, primary_uid, step),
        Written::Deleted {
            kind,
            namespace,
            name,
            uid,
        } => {
            let Some(cache) = ctx.related.iter().find(|c| c.relation.kind == kind) else {
                return;
            };
            let oref = object_ref(&cache.resource, namespace.as_deref(), &name);
            let key = ObjectKey {
                group: kind.group,
                kind: kind.kind,
                namespace,
                name,
            };
            cache.gate.settled(|| {
                ctx.expectations
                    .expect(primary_uid, key, Expect::Deleted { uid }, || {
                        cache.store.get(&oref)
                    })
            });
        }
    }
}

/// The version after `cached`'s, as the watch must show it once a write of it landed: a
/// number one higher, or any version at all when the cache does not hold the object.
fn newer_than(cached: Option<&DynamicObject>) -> String {
    cached
        .and_then(|o| o.metadata.resource_version.as_deref()?.parse::<u64>().ok())
        .map_or_else(|| "1".to_string(), |rv| (rv + 1).to_string())
}

/// Records a step cut off before its answer, which the API server may still carry out
/// ([`crate::expect`]): a named write as a version newer than the cache holds, a delete as
/// one, a create under a generated name as [`Expect::Unanswered`] (its expiry settles it).
fn unanswered(ctx: &Context, primary_uid: &str, step: crate::plan::guard::Step) {
    use crate::plan::guard::Step;
    let (kind, namespace, name) = match &step {
        Step::Create { kind, object } | Step::Apply { kind, object } => {
            let s = |p: &str| object.pointer(p).and_then(serde_json::Value::as_str);
            let name = match step {
                Step::Create { .. } => s("/metadata/generateName").or(s("/metadata/name")),
                _ => s("/metadata/name"),
            };
            (
                kind,
                s("/metadata/namespace").map(String::from),
                name.unwrap_or_default().to_string(),
            )
        }
        Step::Delete { kind, target } => (kind, target.namespace.clone(), target.name.clone()),
    };
    let Some(cache) = ctx.related.iter().find(|c| c.relation.kind == *kind) else {
        return;
    };
    tracing::warn!(kind = %kind.kind, name, "a write was cut off before its answer: expected all the same");
    let oref = object_ref(&cache.resource, namespace.as_deref(), &name);
    let key = ObjectKey {
        group: kind.group.clone(),
        kind: kind.kind.clone(),
        namespace,
        name,
    };
    match step {
        Step::Create { .. } => {
            ctx.expectations
                .expect(primary_uid, key, Expect::Unanswered, || None)
        }
        Step::Apply { .. } => {
            let cached = cache.store.get(&oref);
            let expect = Expect::Written {
                resource_version: newer_than(cached.as_deref()),
            };
            cache.gate.settled(|| {
                ctx.expectations
                    .expect(primary_uid, key, expect, || cache.store.get(&oref))
            });
        }
        Step::Delete { target, .. } => {
            if let Some(uid) = target.uid {
                cache.gate.settled(|| {
                    ctx.expectations
                        .expect(primary_uid, key, Expect::Deleted { uid }, || {
                            cache.store.get(&oref)
                        })
                });
            }
        }
    }
}

/// Records a status write on `obj`, the primary as its cache holds it, that was cut off
/// before its answer: the watch must show a newer version before the primary is decided
/// again (or the expectation expires).
pub fn record_primary_unanswered(
    ctx: &Context,
    primary_uid: &str,
    kind: &KindRef,
    obj: &DynamicObject,
) {
    let key = key_of(kind, obj);
    let oref = object_ref(&ctx.primary, key.namespace.as_deref(), &key.name);
    ctx.primary_gate.settled(|| {
        let expect = Expect::Written {
            resource_version: newer_than(ctx.primary_store.get(&oref).as_deref()),
        };
        ctx.expectations
            .expect(primary_uid, key, expect, || ctx.primary_store.get(&oref))
    });
}

/// Records a write on the primary itself (`stored` is what the API server returned), so
/// the primary is not decided again before its cache shows that write.
pub fn record_primary(ctx: &Context, primary_uid: &str, kind: &KindRef, stored: &DynamicObject) {
    let Some(rv) = stored.metadata.resource_version.clone() else {
        return;
    };
    let key = key_of(kind, stored);
    let oref = object_ref(&ctx.primary, key.namespace.as_deref(), &key.name);
    // Under the primary's gate: an echo the store holds has been through the filter (and,
    // seen during the plan, waits in `raced` for this very write to claim it).
    ctx.primary_gate.settled(|| {
        ctx.expectations.wrote_primary(primary_uid, &rv);
        ctx.expectations.expect(
            primary_uid,
            key,
            Expect::Written {
                resource_version: rv,
            },
            || ctx.primary_store.get(&oref),
        );
    });
}
