//! Owned objects in progress, and the primaries whose decision waits for the last of them.
//!
//! A primary that creates three pods sees each of them change several times on its way to
//! Running (created, scheduled, started, ready); decided on each change, it makes one
//! decision per step per pod, and every one of them but the last only counts along the way
//! (1/3 ready, 2/3). So a change that is only *progress* of an owned object (the echo of the
//! host's own create or delete, a status step of an object not yet ready, the removal of an
//! object already terminating) does not queue its primary while another object the primary
//! controls is still in progress: the change that brings the last of them to rest queues
//! it at once, so the status saying "all ready" is written within milliseconds of the pod
//! that made it true. A hold ends on the objects' own progress, not on a fixed clock: each
//! step of any object the primary controls re-arms it, and it runs out only when none of
//! them moved for [`Holds`]' limit (a pod that never gets ready hides its siblings'
//! progress at most that long after the last step; an API server or node that is merely
//! slow keeps the hold, however long the whole way takes). An object that waits its turn
//! ([`waits_its_turn`]: on its way, no condition saying anything went wrong, like a pod in
//! the scheduler's queue behind thousands of others) makes no step of its own until its
//! turn comes: while it waits, a step of any other object re-arms its primary's hold too, up
//! to [`TURN_LIMITS`] times the limit. A decision that starts for any other reason answers
//! what was held.
//!
//! Anything else is news and queues the primary at once: an object that appears without
//! the host having created it, a change of labels or owners, an object that starts
//! terminating without the host having deleted it, an object at rest that changes (a Ready
//! pod turning unready), a deletion nobody announced.
//!
//! *In progress* ([`in_progress`]) is read from what the relation's cache keeps of the
//! object, the way kstatus and `kubectl wait` read it: terminating; or with a `Ready`
//! condition that is not `True` (and a phase that is not `Succeeded` or `Failed`); or, with
//! no `Ready` condition, in phase `Pending`. An object whose relation declares neither
//! `status.phase` nor `status.conditions` is never in progress: nothing is held for it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::api::DynamicObject;
use serde::Deserialize;

use crate::cache::guest_view::guest_json;

#[derive(Deserialize)]
struct View {
    status: Option<Status>,
}

#[derive(Deserialize)]
struct Status {
    phase: Option<String>,
    conditions: Option<Vec<Condition>>,
}

#[derive(Deserialize)]
struct Condition {
    #[serde(rename = "type")]
    kind: Option<String>,
    status: Option<String>,
}

/// The status of a cached (packed) object, as far as the relation keeps it.
fn status_of(o: &DynamicObject) -> Option<Status> {
    guest_json(o)
        .and_then(|text| serde_json::from_str::<View>(text).ok())
        .and_then(|v| v.status)
}

/// Whether a cached (packed) object is still starting or stopping (see the module docs).
pub fn in_progress(o: &DynamicObject) -> bool {
    if o.metadata.deletion_timestamp.is_some() {
        return true;
    }
    let Some(status) = status_of(o) else {
        return false;
    };
    on_its_way(&status)
}

/// Whether a cached (packed) object is on its way and waits its turn: starting (not
/// terminating), and no condition of it is `False` (none of the controllers that act on
/// it said anything went wrong: a pod not yet scheduled, or scheduled and not yet started
/// by its node). See [`Holds`] for what that changes.
pub fn waits_its_turn(o: &DynamicObject) -> bool {
    if o.metadata.deletion_timestamp.is_some() {
        return false;
    }
    status_of(o).is_some_and(|status| {
        on_its_way(&status)
            && !status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.status.as_deref() == Some("False"))
    })
}

fn on_its_way(status: &Status) -> bool {
    let phase = status.phase.as_deref();
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return false;
    }
    let ready = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.kind.as_deref() == Some("Ready"));
    match ready {
        Some(c) => c.status.as_deref() != Some("True"),
        None => phase == Some("Pending"),
    }
}

/// One owned relation's cache: its owner index, its store and its resource.
pub type OwnedCache<'a> = (
    &'a crate::cache::owners::OwnerIndex,
    &'a kube::runtime::reflector::Store<DynamicObject>,
    &'a kube::api::ApiResource,
);

/// Whether objects of one owned relation (`kind`, cached in `store`, indexed by `owners`)
/// that the primary `owner_uid` controls are still on their way: one in progress as cached
/// now, or written by its plan and not yet in the cache (a create not seen yet).
pub fn on_the_way(
    expectations: &crate::expect::Expectations,
    kind: (&str, &str),
    cache: OwnedCache<'_>,
    owner_uid: &str,
) -> bool {
    expectations.awaits_kind(owner_uid, kind.0, kind.1)
        || any_controlled(cache, owner_uid, in_progress)
}

/// Whether one of the objects of that relation that `owner_uid` controls waits its turn
/// ([`waits_its_turn`]), or is written and not yet in the cache.
pub fn waiting_turn(
    expectations: &crate::expect::Expectations,
    kind: (&str, &str),
    cache: OwnedCache<'_>,
    owner_uid: &str,
) -> bool {
    expectations.awaits_kind(owner_uid, kind.0, kind.1)
        || any_controlled(cache, owner_uid, waits_its_turn)
}

fn any_controlled(
    cache: OwnedCache<'_>,
    owner_uid: &str,
    test: fn(&DynamicObject) -> bool,
) -> bool {
    let (owners, store, resource) = cache;
    owners
        .controlled_by(owner_uid)
        .into_iter()
        .any(|(ns, name)| {
            let mut r = kube::runtime::reflector::ObjectRef::new_with(&name, resource.clone());
            if let Some(ns) = ns {
                r = r.within(&ns);
            }
            store.get(&r).is_some_and(|o| test(&o))
        })
}

/// What one watch event of an owned object is to the primaries that control it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Progress of an object on its way to rest: may wait for its siblings.
    Progress,
    /// An object that appears, or begins to terminate, and no expectation awaited it:
    /// progress if its primary's plan is being carried out (the echo of a create or a
    /// delete that came before the request's answer was recorded), news otherwise.
    Unmatched,
    /// Anything else: the primary is queued at once.
    News,
}

/// Sorts an event of an owned object: `before` is the object as the cache held it before
/// the event (`None`: not held), `own` whether the host's expectations were waiting for
/// this very event (the echo of its own create, write or delete).
pub fn change_of(
    event: &kube::runtime::watcher::Event<DynamicObject>,
    before: Option<&DynamicObject>,
    own: bool,
) -> Change {
    use kube::runtime::watcher::Event;
    let progress = match event {
        Event::Apply(_) if before.is_none() && !own => return Change::Unmatched,
        Event::Apply(o)
            if !own
                && o.metadata.deletion_timestamp.is_some()
                && before.is_some_and(|b| b.metadata.deletion_timestamp.is_none()) =>
        {
            return Change::Unmatched;
        }
        Event::Apply(o) => {
            own || before.is_some_and(|b| in_progress(b) && same_standing(b, o) && !regressed(b, o))
        }
        // Gone after it was seen terminating.
        Event::Delete(_) => before.is_some_and(|b| b.metadata.deletion_timestamp.is_some()),
        _ => false,
    };
    if progress {
        Change::Progress
    } else {
        Change::News
    }
}

/// The same labels, owners and terminating state: only its status moved.
fn same_standing(a: &DynamicObject, b: &DynamicObject) -> bool {
    a.metadata.labels == b.metadata.labels
        && a.metadata.owner_references == b.metadata.owner_references
        && a.metadata.deletion_timestamp.is_some() == b.metadata.deletion_timestamp.is_some()
}

/// A running object that fell back (a `Ready` pod unready again is news, not progress;
/// an object still on its way that stays on its way is progress).
fn regressed(before: &DynamicObject, after: &DynamicObject) -> bool {
    !in_progress(before) && in_progress(after)
}

/// The primaries held back, keyed `namespace/name`: each hold numbered (a timer ends only
/// the hold it was started for) with the instant of its last step, and the primaries owed a
/// decision for news (none of them is held until that decision starts).
#[derive(Debug)]
pub struct Holds {
    limit: Duration,
    state: Mutex<State>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Entry {
    Held {
        hold: u64,
        last: Instant,
        since: Instant,
    },
    Owed,
}

#[derive(Debug, Default)]
struct State {
    primaries: HashMap<String, Entry>,
    next: u64,
    /// The last step of any object the controller's primaries control.
    last_step: Option<Instant>,
}

/// How many times its limit a hold lasts at most while an object of its primary waits its
/// turn and the others keep moving ([`Holds::expire`]).
pub const TURN_LIMITS: u32 = 10;

/// What the timer of a hold finds ([`Holds::expire`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// No step for the whole limit: the hold ended.
    Ran,
    /// Re-armed by a step: look again after this long.
    Later(Duration),
    /// Ended already (a decision began, or news came).
    Gone,
}

/// What [`Holds::hold`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// A new hold: ask [`Holds::expire`] after [`Holds::limit`] whether it ran out.
    Started(u64),
    /// Held already: this step re-armed it.
    Already,
    /// Not held: news asked for a decision not yet begun, or holding is off.
    Refused,
}

impl Holds {
    /// Holds of at most `limit` each (zero: nothing is held).
    pub fn new(limit: Duration) -> Self {
        Holds {
            limit,
            state: Mutex::default(),
        }
    }

    /// How long a hold lasts at most; zero when holding is off.
    pub fn limit(&self) -> Duration {
        self.limit
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Holds `key` back for a step of its objects made at `now`, unless news is owed to
    /// it: a new hold, or the one in force re-armed from `now`.
    pub fn hold(&self, key: &str, now: Instant) -> Hold {
        if self.limit.is_zero() {
            return Hold::Refused;
        }
        let mut s = self.lock();
        s.last_step = s.last_step.max(Some(now));
        match s.primaries.get_mut(key) {
            Some(Entry::Held { last, .. }) => {
                *last = (*last).max(now);
                Hold::Already
            }
            Some(Entry::Owed) => Hold::Refused,
            None => {
                s.next += 1;
                let hold = s.next;
                s.primaries.insert(
                    key.to_string(),
                    Entry::Held {
                        hold,
                        last: now,
                        since: now,
                    },
                );
                Hold::Started(hold)
            }
        }
    }

    /// An object of some primary made a step at `now` (also one that ends a hold, or of a
    /// primary not held): the controllers acting on them are at work.
    pub fn stepped(&self, now: Instant) {
        let mut s = self.lock();
        s.last_step = s.last_step.max(Some(now));
    }

    /// A decision of `key` is owed (news asked for it, or what was held came to rest): it
    /// is not held (any hold ends) until that decision begins ([`Holds::answered`]).
    pub fn owe(&self, key: &str) {
        if !self.limit.is_zero() {
            self.lock().primaries.insert(key.to_string(), Entry::Owed);
        }
    }

    /// Whether `key` is held back now.
    pub fn holds(&self, key: &str) -> bool {
        matches!(self.lock().primaries.get(key), Some(Entry::Held { .. }))
    }

    /// A decision of `key` begins: it answers whatever was held or owed.
    pub fn answered(&self, key: &str) {
        self.lock().primaries.remove(key);
    }

    /// The timer of hold `hold` woke at `now`: [`Expiry::Ran`] ends it (no step for the
    /// whole limit: the caller queues the primary), [`Expiry::Later`] says how much longer
    /// to wait (a step re-armed it), [`Expiry::Gone`] that it is not in force any more.
    ///
    /// `waiting_turn`: an object of the primary waits its turn (not yet scheduled, say, or
    /// not yet started by its node, with nothing gone wrong): then a step of *any* object
    /// re-arms the hold too, up to [`TURN_LIMITS`] times the limit from its start. On a
    /// cluster working through a queue (thousands of pods created at once) an object's own
    /// next step may come minutes later while the queue moves; a pod stuck (unschedulable,
    /// its image failing) says so in a condition and holds only for the limit, as does one
    /// waiting while nothing moves at all.
    pub fn expire(&self, key: &str, hold: u64, now: Instant, waiting_turn: bool) -> Expiry {
        let mut s = self.lock();
        let last_step = s.last_step;
        match s.primaries.get(key) {
            Some(&Entry::Held {
                hold: h,
                last,
                since,
            }) if h == hold => {
                let own = last + self.limit;
                let ends = match last_step {
                    Some(any) if waiting_turn => {
                        own.max((any + self.limit).min(since + self.limit * TURN_LIMITS))
                    }
                    _ => own,
                };
                if now >= ends {
                    s.primaries.remove(key);
                    Expiry::Ran
                } else {
                    Expiry::Later(ends - now)
                }
            }
            _ => Expiry::Gone,
        }
    }

    /// Primaries held or owed now (what the tests look at).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().primaries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ApiResource;
    use kube::runtime::watcher::Event;
    use serde_json::json;

    use crate::cache::guest_view::pack;
    use crate::observe::Fields;

    fn pod(status: serde_json::Value) -> DynamicObject {
        let mut o: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "d", "labels": {"app": "x"}},
            "spec": {"nodeName": "n"},
            "status": status}))
        .unwrap();
        let pods = ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&());
        let fields = Fields::declared(Some(&["status.phase".into(), "status.conditions".into()]));
        pack(&mut o, &pods, &fields);
        o
    }

    fn terminating(mut o: DynamicObject) -> DynamicObject {
        o.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::now(),
        ));
        o
    }

    fn ready(s: &str) -> serde_json::Value {
        json!({"phase": "Running", "conditions": [{"type": "Ready", "status": s}]})
    }

    #[test]
    fn in_progress_reads_ready_then_phase_then_terminating() {
        assert!(in_progress(&pod(json!({"phase": "Pending"}))));
        assert!(in_progress(&pod(ready("False"))));
        assert!(!in_progress(&pod(ready("True"))));
        // Finished pods are at rest, whatever Ready says.
        assert!(!in_progress(&pod(json!({"phase": "Succeeded",
            "conditions": [{"type": "Ready", "status": "False"}]}))));
        // Running without a Ready condition (a kind without one): at rest.
        assert!(!in_progress(&pod(json!({"phase": "Running"}))));
        // No status kept at all: never held.
        assert!(!in_progress(&pod(json!(null))));
        let stopping = terminating(pod(ready("True")));
        assert!(in_progress(&stopping));
    }

    #[test]
    fn progress_is_own_echoes_steps_on_the_way_and_removal_after_terminating() {
        let pending = pod(json!({"phase": "Pending"}));
        let running = pod(ready("True"));
        let unready = pod(ready("False"));
        // The echo of the host's own create: progress, whatever it shows.
        assert_eq!(
            change_of(&Event::Apply(pending.clone()), None, true),
            Change::Progress
        );
        // A new pod nobody awaited: news unless its primary is carrying out a plan.
        assert_eq!(
            change_of(&Event::Apply(pending.clone()), None, false),
            Change::Unmatched
        );
        // A step on the way to Ready: progress; a Ready pod falling back: news.
        assert_eq!(
            change_of(&Event::Apply(running.clone()), Some(&pending), false),
            Change::Progress
        );
        assert_eq!(
            change_of(&Event::Apply(unready.clone()), Some(&running), false),
            Change::News
        );
        // A change of labels on the way: news.
        let mut relabelled = running.clone();
        relabelled.metadata.labels = None;
        assert_eq!(
            change_of(&Event::Apply(relabelled), Some(&pending), false),
            Change::News
        );
        // Removed after it was seen terminating: progress; removed without: news.
        let stopping = terminating(running.clone());
        assert_eq!(
            change_of(&Event::Delete(stopping.clone()), Some(&stopping), false),
            Change::Progress
        );
        assert_eq!(
            change_of(&Event::Delete(stopping), Some(&running), false),
            Change::News
        );
        // Starting to terminate, no delete of the host's awaited: news unless its primary
        // is carrying out a plan; awaited: progress.
        let killed = terminating(running.clone());
        assert_eq!(
            change_of(&Event::Apply(killed.clone()), Some(&running), false),
            Change::Unmatched
        );
        assert_eq!(
            change_of(&Event::Apply(killed), Some(&running), true),
            Change::Progress
        );
    }

    /// A new hold of `key` at `at`, its number.
    fn started(h: &Holds, key: &str, at: Instant) -> u64 {
        match h.hold(key, at) {
            Hold::Started(n) => n,
            other => panic!("a new hold of {key}: {other:?}"),
        }
    }

    #[test]
    fn a_hold_runs_out_only_after_a_quiet_limit_and_news_refuses_it() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let h = Holds::new(s(5));
        let first = started(&h, "d/a", t0);
        // Steps of its objects re-arm it: on a slow API server a pod's way to Ready may take
        // many times the limit, and the hold lasts as long as the steps keep coming.
        for i in 1..=6 {
            assert_eq!(h.hold("d/a", t0 + s(4 * i)), Hold::Already);
            assert_eq!(
                h.expire("d/a", first, t0 + s(4 * i + 1), false),
                Expiry::Later(s(4)),
                "step {i}: re-armed"
            );
        }
        assert!(h.holds("d/a"));
        // No step for the whole limit after the last one (t0 + 24 s): it runs out.
        assert_eq!(
            h.expire("d/a", first, t0 + s(28), false),
            Expiry::Later(s(1))
        );
        assert_eq!(h.expire("d/a", first, t0 + s(29), false), Expiry::Ran);
        assert!(!h.holds("d/a"));
        // News: the hold ends and none starts until the decision begins.
        let second = started(&h, "d/a", t0 + s(30));
        h.owe("d/a");
        assert!(!h.holds("d/a"));
        assert_eq!(h.hold("d/a", t0 + s(31)), Hold::Refused);
        assert_eq!(h.expire("d/a", second, t0 + s(40), false), Expiry::Gone);
        h.answered("d/a");
        let third = started(&h, "d/a", t0 + s(41));
        assert_eq!(
            h.expire("d/a", second, t0 + s(50), false),
            Expiry::Gone,
            "an old timer does not end a newer hold"
        );
        assert_eq!(h.expire("d/a", third, t0 + s(50), false), Expiry::Ran);
        assert_eq!(h.len(), 0);
        let off = Holds::new(Duration::ZERO);
        assert_eq!(off.hold("d/a", t0), Hold::Refused, "off");
        off.owe("d/a");
        assert_eq!(off.len(), 0, "off: nothing remembered");
    }

    #[test]
    fn a_hold_of_objects_waiting_their_turn_lasts_while_others_move() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let h = Holds::new(s(5));
        let a = started(&h, "d/a", t0);
        // Its pod waits in the scheduler's queue (no step of its own) while the others'
        // pods are scheduled and started, one step a second.
        for i in 1..=20 {
            h.stepped(t0 + s(i));
        }
        assert_eq!(
            h.expire("d/a", a, t0 + s(21), true),
            Expiry::Later(s(4)),
            "re-armed by the others' steps"
        );
        // The same without waiting its turn (a condition said something went wrong): the
        // limit after its own last step.
        assert_eq!(h.expire("d/a", a, t0 + s(21), false), Expiry::Ran);
        let b = started(&h, "d/b", t0 + s(30));
        // Nothing moves any more: the limit after the last step anywhere.
        assert_eq!(h.expire("d/b", b, t0 + s(35), true), Expiry::Ran);
        // Others moving without end: at most TURN_LIMITS times the limit from its start.
        let c = started(&h, "d/c", t0 + s(40));
        let cap = t0 + s(40) + s(5) * TURN_LIMITS;
        h.stepped(cap - s(1));
        assert_eq!(h.expire("d/c", c, cap - s(1), true), Expiry::Later(s(1)));
        h.stepped(cap);
        assert_eq!(h.expire("d/c", c, cap, true), Expiry::Ran);
        // Its own steps still re-arm it past that (the whole way may take longer).
        let d = started(&h, "d/d", t0 + s(100));
        let later = t0 + s(100) + s(5) * TURN_LIMITS + s(10);
        assert_eq!(h.hold("d/d", later), Hold::Already);
        assert_eq!(h.expire("d/d", d, later + s(1), true), Expiry::Later(s(4)));
    }

    #[test]
    fn an_object_waits_its_turn_while_on_its_way_and_nothing_went_wrong() {
        // Not yet scheduled; scheduled and not yet started.
        assert!(waits_its_turn(&pod(json!({"phase": "Pending"}))));
        assert!(waits_its_turn(&pod(json!({"phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "True"}]}))));
        // Unschedulable, or its containers not ready: a controller said what is wrong.
        assert!(!waits_its_turn(&pod(json!({"phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False"}]}))));
        assert!(!waits_its_turn(&pod(ready("False"))));
        // At rest, or stopping.
        assert!(!waits_its_turn(&pod(ready("True"))));
        assert!(!waits_its_turn(&terminating(pod(
            json!({"phase": "Pending"})
        ))));
    }
}
