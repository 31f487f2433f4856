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
            (Expect::Written { .. }, None) => false,
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
