//! Expectations, as kube-controller-manager's ReplicaSet controller keeps them: what a
//! plan created, wrote or deleted (and the status it wrote on its primary) is remembered
//! per primary object until the watch shows it, and the primary is not decided again on a
//! view that misses its own writes.
//!
//! Contract:
//! - An expectation is recorded right after the write succeeded, with what the API server
//!   answered (the object's resourceVersion, or the deleted object's UID). Each step of a
//!   plan is recorded as it succeeds, so a plan that fails half-way still waits for the
//!   half that was done.
//! - It is satisfied by the watch: an event showing the object at that resourceVersion or
//!   a newer one (written), or without that UID, terminating or gone (deleted). A created
//!   object that is deleted before anyone saw it also satisfies its expectation.
//! - Recording looks at the cache under the same lock the watch events take, after the
//!   cache has applied them: an event that raced ahead of the recording is never missed.
//! - Nothing waits in a loop: [`Expectations::pending`] answers at once, and the watch
//!   events that satisfy an expectation trigger the primary again. An expectation the watch
//!   never satisfies (a lost event) expires after the TTL, with a warning.
//! - resourceVersions are compared as numbers when both are numbers (what the API server
//!   uses); otherwise any event of the object after the write counts.
//! - A write cut off before its answer ([`crate::k8s::fence`]: the leadership's deadline
//!   passed) may still be committed by the API server. It is expected all the same: a named
//!   write as a version newer than the cache held, a delete as one, and a create under a
//!   generated name, whose name nobody knows, as [`Expect::Unanswered`], which only its
//!   expiry settles (the ReplicaSet controller keeps the expectation of a create that timed
//!   out for the same reason). A primary is not decided again on a view that may miss it.

pub mod progress;
pub mod triggers;

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::api::DynamicObject;

/// Which object an expectation is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectKey {
    /// API group ("" for the core group).
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Namespace, for namespaced kinds.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

/// What the watch must show of the object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// The object at this resourceVersion or a newer one (a create, an apply, a status).
    Written {
        /// resourceVersion the write returned.
        resource_version: String,
    },
    /// The object with this UID terminating or gone (a delete).
    Deleted {
        /// UID of the deleted object.
        uid: String,
    },
    /// A create under a generated name cut off before its answer: what the watch shows
    /// cannot be told apart from other objects, so only the expiry settles it.
    Unanswered,
}

/// What a watch event showed of an object.
#[derive(Debug, Clone, Copy)]
pub enum Seen<'a> {
    /// The object exists in this state.
    Present(&'a DynamicObject),
    /// The object was deleted.
    Gone,
    /// A relisted cache does not hold the object: gone, or (for a write) not listed yet.
    Absent,
}

/// Whether a primary may be decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pending {
    /// Nothing outstanding: decide.
    Clear,
    /// Some writes are not seen yet: come back when the watch shows them (or at expiry).
    Waiting {
        /// Expectations outstanding.
        outstanding: usize,
        /// Time until they expire.
        expires_in: Duration,
    },
    /// They expired unseen and are dropped: decide (the caller warns).
    Expired {
        /// Expectations that were never seen.
        outstanding: usize,
    },
}

struct Waiting {
    items: Vec<(ObjectKey, Expect)>,
    deadline: Instant,
}

#[derive(Default)]
struct State {
    by_primary: HashMap<String, Waiting>,
    by_object: HashMap<ObjectKey, HashSet<String>>,
    /// When expired entries of primaries nobody asks about any more (deleted ones) are
    /// next swept away.
    next_sweep: Option<Instant>,
    /// Primaries whose plan is being carried out.
    carrying_out: HashMap<String, Carrying>,
}

impl State {
    fn drop_primary(&mut self, primary: &str) -> Option<Waiting> {
        let w = self.by_primary.remove(primary)?;
        for (key, _) in &w.items {
            if let Some(set) = self.by_object.get_mut(key) {
                set.remove(primary);
                if set.is_empty() {
                    self.by_object.remove(key);
                }
            }
        }
        Some(w)
    }

    fn sweep(&mut self, now: Instant, ttl: Duration) {
        if self.next_sweep.is_some_and(|t| now < t) {
            return;
        }
        self.next_sweep = Some(now + ttl);
        let expired: Vec<String> = self
            .by_primary
            .iter()
            .filter(|(_, w)| w.deadline <= now)
            .map(|(p, _)| p.clone())
            .collect();
        for p in expired {
            self.drop_primary(&p);
        }
    }
}

/// The expectations of one plugin's primaries, keyed by primary UID.
pub struct Expectations {
    ttl: Duration,
    state: Mutex<State>,
}

/// The plans of one primary being carried out.
#[derive(Debug, Default)]
struct Carrying {
    /// How many (a canary's and a retry's may overlap).
    plans: usize,
    /// resourceVersions of the primary's own events that came meanwhile, not (yet) known
    /// as the echo of one of its writes.
    raced: Vec<String>,
}

/// A plan being carried out ([`Expectations::carrying_out`]), until dropped.
pub struct CarryingOut {
    expectations: std::sync::Arc<Expectations>,
    primary: String,
    ended: bool,
}

impl CarryingOut {
    /// The plan is carried out: whether an event of the primary came meanwhile that was not
    /// the echo of one of its writes (someone else changed it: decide again).
    pub fn finish(mut self) -> bool {
        self.end()
    }

    fn end(&mut self) -> bool {
        if std::mem::replace(&mut self.ended, true) {
            return false;
        }
        let mut state = self
            .expectations
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let Some(c) = state.carrying_out.get_mut(&self.primary) else {
            return false;
        };
        let raced = !c.raced.is_empty();
        c.raced.clear();
        c.plans -= 1;
        if c.plans == 0 {
            state.carrying_out.remove(&self.primary);
        }
        raced
    }
}

impl Drop for CarryingOut {
    fn drop(&mut self) {
        // Unless `finish` ended it: the plan failed half-way (its error retries it).
        self.end();
    }
}

fn newer_or_same(seen: Option<&str>, expected: &str) -> bool {
    match (
        seen.and_then(|s| s.parse::<u64>().ok()),
        expected.parse::<u64>(),
    ) {
        (Some(s), Ok(e)) => s >= e,
        _ => true,
    }
}

fn satisfied(expect: &Expect, seen: Seen<'_>) -> bool {
    match (expect, seen) {
        (Expect::Written { resource_version }, Seen::Present(o)) => {
            newer_or_same(o.metadata.resource_version.as_deref(), resource_version)
        }
        (Expect::Written { .. }, Seen::Gone) => true,
        (Expect::Deleted { uid }, Seen::Present(o)) => {
            o.metadata.uid.as_deref() != Some(uid) || o.metadata.deletion_timestamp.is_some()
        }
        (Expect::Deleted { .. }, Seen::Gone | Seen::Absent) => true,
        (Expect::Written { .. }, Seen::Absent) => false,
        (Expect::Unanswered, _) => false,
    }
}

impl Expectations {
    /// Expectations that expire `ttl` after they were last raised.
    pub fn new(ttl: Duration) -> Self {
        Expectations {
            ttl,
            state: Mutex::default(),
        }
    }

    /// Records that `primary` waits until the watch shows `expect` of `object`, unless the
    /// cache already does: `cached` is called under the lock and returns the cached state
    /// of the object (`None` when the cache does not hold it).
    pub fn expect<F>(&self, primary: &str, object: ObjectKey, expect: Expect, cached: F)
    where
        F: FnOnce() -> Option<std::sync::Arc<DynamicObject>>,
    {
        let mut state = self.state.lock().expect("expectations lock");
        let already = match (&expect, cached()) {
            (_, Some(o)) => satisfied(&expect, Seen::Present(&o)),
            (Expect::Deleted { .. }, None) => true,
            (Expect::Written { .. } | Expect::Unanswered, None) => false,
        };
        if already {
            return;
        }
        let now = Instant::now();
        state.sweep(now, self.ttl);
        let deadline = now + self.ttl;
        let waiting = state
            .by_primary
            .entry(primary.to_string())
            .or_insert_with(|| Waiting {
                items: Vec::new(),
                deadline,
            });
        waiting.deadline = deadline;
        waiting.items.push((object.clone(), expect));
        state
            .by_object
            .entry(object)
            .or_default()
            .insert(primary.to_string());
    }

    /// Notes what a watch event showed of `object`; drops what it satisfies.
    pub fn observe(&self, object: &ObjectKey, seen: Seen<'_>) {
        let mut guard = self.state.lock().expect("expectations lock");
        let state = &mut *guard;
        let Some(primaries) = state.by_object.get(object) else {
            return;
        };
        let mut settled = Vec::new();
        for primary in primaries {
            if let Some(w) = state.by_primary.get_mut(primary) {
                w.items
                    .retain(|(key, e)| key != object || !satisfied(e, seen));
                if !w.items.iter().any(|(key, _)| key == object) {
                    settled.push(primary.clone());
                }
                if w.items.is_empty() {
                    state.by_primary.remove(primary);
                }
            }
        }
        if let Some(primaries) = state.by_object.get_mut(object) {
            for p in settled {
                primaries.remove(&p);
            }
            if primaries.is_empty() {
                state.by_object.remove(object);
            }
        }
    }

    /// After a relist of `kind` (its cache replaced whole at `InitDone`): settles what the
    /// new cache shows. `cached` returns the cached state of an object (`None`: not held).
    /// A delete is settled by the object's absence too (a relist drops vanished objects
    /// without a Delete event); a write only by the object at that version or newer, since
    /// a relist may be served from a cache older than the write.
    pub fn relisted<F>(&self, group: &str, kind: &str, cached: F)
    where
        F: Fn(&ObjectKey) -> Option<std::sync::Arc<DynamicObject>>,
    {
        let keys: Vec<ObjectKey> = {
            let state = self.state.lock().expect("expectations lock");
            state
                .by_object
                .keys()
                .filter(|k| k.group == group && k.kind == kind)
                .cloned()
                .collect()
        };
        for key in keys {
            match cached(&key) {
                Some(o) => self.observe(&key, Seen::Present(&o)),
                None => self.observe(&key, Seen::Absent),
            }
        }
    }

    /// Whether `primary` may be decided now. Expired expectations are dropped here.
    pub fn pending(&self, primary: &str) -> Pending {
        let mut state = self.state.lock().expect("expectations lock");
        let Some(w) = state.by_primary.get(primary) else {
            return Pending::Clear;
        };
        let now = Instant::now();
        if now < w.deadline {
            return Pending::Waiting {
                outstanding: w.items.len(),
                expires_in: w.deadline - now,
            };
        }
        let outstanding = state.drop_primary(primary).map_or(0, |w| w.items.len());
        Pending::Expired { outstanding }
    }

    /// Whether `primary` still waits to see a write of its own on an object of `group`,
    /// `kind` (a pod it created, not yet in the pod cache, say).
    pub fn awaits_kind(&self, primary: &str, group: &str, kind: &str) -> bool {
        let state = self.state.lock().expect("expectations lock");
        state.by_primary.get(primary).is_some_and(|w| {
            Instant::now() < w.deadline
                && w.items
                    .iter()
                    .any(|(key, _)| key.group == group && key.kind == kind)
        })
    }

    /// Whether `primary` still waits for writes of its own that the watch has not shown
    /// (and that have not expired). Changes a waiting primary's caches see do not trigger
    /// it: the event that settles its last expectation does, and its decision reads all of
    /// them.
    pub fn waits(&self, primary: &str) -> bool {
        let state = self.state.lock().expect("expectations lock");
        state
            .by_primary
            .get(primary)
            .is_some_and(|w| Instant::now() < w.deadline)
    }

    /// Parks `primary` (`key` in `triggers`) until the watch shows its own writes: notes that
    /// a decision is owed, so that the echo settling the last of them queues it
    /// ([`crate::controller`]'s `primary_news`), then looks again. Returns `false` when the
    /// primary still waits (the echo will queue it), `true` when nothing is awaited any
    /// more: the echo came before the decision was owed, could not queue it, and the caller
    /// must decide again itself. Without the second look a reconcile that ends waiting for
    /// an echo already seen is never triggered again.
    pub fn park(&self, triggers: &triggers::Triggers, key: String, primary: &str) -> bool {
        triggers.asked(key, Instant::now());
        !self.waits(primary)
    }

    /// Shows the expectations an event of `object` (as cached now) and says whether it is
    /// the echo of a write of the host's own: an outstanding write expectation at exactly
    /// its resourceVersion. Settles what it satisfies, as [`Expectations::observe`] does.
    /// An echo that raced ahead of its recording is not recognised (it then counts as a
    /// change, as any other event).
    pub fn observe_echo(&self, object: &ObjectKey, obj: &DynamicObject) -> bool {
        let rv = obj.metadata.resource_version.as_deref();
        let echo = {
            let state = self.state.lock().expect("expectations lock");
            state.by_object.get(object).is_some_and(|primaries| {
                primaries.iter().any(|p| {
                    state.by_primary.get(p).is_some_and(|w| {
                        w.items.iter().any(|(key, e)| {
                            key == object
                                && matches!(e, Expect::Written { resource_version }
                                    if Some(resource_version.as_str()) == rv)
                        })
                    })
                })
            })
        };
        self.observe(object, Seen::Present(obj));
        echo
    }

    /// Whether `seen` settles an outstanding expectation of `object`: the event is the echo
    /// of the host's own write or delete. Settles nothing (see [`Expectations::observe`]).
    pub fn settled_by(&self, object: &ObjectKey, seen: Seen<'_>) -> bool {
        let state = self.state.lock().expect("expectations lock");
        state.by_object.get(object).is_some_and(|primaries| {
            primaries.iter().any(|p| {
                state.by_primary.get(p).is_some_and(|w| {
                    w.items
                        .iter()
                        .any(|(key, e)| key == object && satisfied(e, seen))
                })
            })
        })
    }

    /// Marks `primary`'s plan as being carried out until the returned guard drops or
    /// finishes. An object of the primary that appears meanwhile is taken for one of its
    /// writes, and an event of the primary itself waits to be matched with the plan's own
    /// write of it ([`Expectations::raced`]): the watch may show a write before its answer
    /// is recorded as an expectation.
    pub fn carrying_out(self: &std::sync::Arc<Self>, primary: &str) -> CarryingOut {
        self.state
            .lock()
            .expect("expectations lock")
            .carrying_out
            .entry(primary.to_string())
            .or_default()
            .plans += 1;
        CarryingOut {
            expectations: self.clone(),
            primary: primary.to_string(),
            ended: false,
        }
    }

    /// Whether a plan of `primary` is being carried out now.
    pub fn carries_out(&self, primary: &str) -> bool {
        self.state
            .lock()
            .expect("expectations lock")
            .carrying_out
            .contains_key(primary)
    }

    /// An event of `primary` itself at `resource_version` that no expectation awaited: if
    /// a plan of its is being carried out, it is noted (and `true` returned): the plan's
    /// own write of the primary, answered after the watch showed it, settles it
    /// ([`Expectations::wrote_primary`]); one left unsettled when the plan finishes asks
    /// for another decision ([`CarryingOut::finish`]).
    pub fn raced(&self, primary: &str, resource_version: Option<&str>) -> bool {
        let mut state = self.state.lock().expect("expectations lock");
        match state.carrying_out.get_mut(primary) {
            Some(c) => {
                c.raced
                    .push(resource_version.unwrap_or_default().to_string());
                true
            }
            None => false,
        }
    }

    /// The plan of `primary` wrote it, at `resource_version`: an event of it that raced
    /// ahead at that version was its echo.
    pub fn wrote_primary(&self, primary: &str, resource_version: &str) {
        let mut state = self.state.lock().expect("expectations lock");
        if let Some(c) = state.carrying_out.get_mut(primary) {
            c.raced.retain(|rv| rv != resource_version);
        }
    }

    /// Forgets everything `primary` waits for (it is gone).
    pub fn forget(&self, primary: &str) {
        self.state
            .lock()
            .expect("expectations lock")
            .drop_primary(primary);
    }

    /// Number of expectations outstanding, over all primaries (what the tests look at).
    #[cfg(test)]
    pub fn outstanding(&self) -> usize {
        let state = self.state.lock().expect("expectations lock");
        state.by_primary.values().map(|w| w.items.len()).sum()
    }
}

#[cfg(test)]
mod tests;
