//! Publishing Events as `events.k8s.io/v1`, with series as `kubectl get events` readers
//! expect them: an Event repeated about the same object with the same type, reason, action
//! and note within [`SERIES_TTL`] is one Event whose `series` counts the repeats; a repeat
//! with another note is an Event of its own, so the note shown is always the one that
//! happened (client-go's recorder keys its series the same way, note included). kube's
//! `Recorder` keys a series without the note: a one-pod replacement after a three-pod
//! scale-up would show as "creating 3 pod(s)" again.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as K8sEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Reporter};
use serde_json::json;

/// How long after its last repeat an Event still gathers repeats into its series (kube's
/// and client-go's recorders use 6 minutes too).
pub const SERIES_TTL: Duration = Duration::from_secs(6 * 60);

/// What makes two Events the same one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    regarding: (
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
    ),
    warning: bool,
    reason: String,
    action: String,
    note: Option<String>,
}

impl Key {
    fn of(ev: &Event, reference: &ObjectReference) -> Key {
        Key {
            regarding: (
                reference.uid.clone(),
                reference.kind.clone(),
                reference.namespace.clone(),
                reference.name.clone(),
            ),
            warning: matches!(ev.type_, EventType::Warning),
            reason: ev.reason.clone(),
            action: ev.action.clone(),
            note: ev.note.clone(),
        }
    }
}

/// An Event already published: its object name, how often it happened, when last.
#[derive(Debug, Clone)]
struct Published {
    name: String,
    count: i32,
    last: Instant,
}

/// The Events published, and the size at which the next sweep drops those past the TTL.
#[derive(Debug)]
struct Series {
    published: HashMap<Key, Published>,
    sweep_at: usize,
}

/// The fewest Events remembered before a sweep.
const SWEEP_FROM: usize = 1024;

impl Default for Series {
    fn default() -> Self {
        Series {
            published: HashMap::new(),
            sweep_at: SWEEP_FROM,
        }
    }
}

impl Series {
    /// The series of `key` if it was published within the TTL, its count raised. Those past
    /// the TTL are swept out whenever the map has doubled since the last sweep: amortised
    /// constant time per Event (a sweep on every Event cost a pass over every Event of the
    /// last six minutes, 30,000 of them at 30,000 PodReplicas).
    fn repeat(&mut self, key: &Key, now: Instant) -> Option<Published> {
        let fresh = |p: &Published| now.saturating_duration_since(p.last) < SERIES_TTL;
        if self.published.len() >= self.sweep_at {
            self.published.retain(|_, p| fresh(p));
            self.sweep_at = (self.published.len() * 2).max(SWEEP_FROM);
        }
        match self.published.get_mut(key) {
            Some(p) if fresh(p) => {
                p.count = p.count.saturating_add(1);
                p.last = now;
                Some(p.clone())
            }
            Some(_) => {
                self.published.remove(key);
                None
            }
            None => None,
        }
    }
}

/// Publishes Events for one reporting controller (see the module docs).
pub struct SeriesRecorder {
    client: kube::Client,
    reporter: Reporter,
    series: Mutex<Series>,
    made: AtomicU64,
}

impl SeriesRecorder {
    /// A recorder that writes through `client` as `reporter`.
    pub fn new(client: kube::Client, reporter: Reporter) -> Self {
        SeriesRecorder {
            client,
            reporter,
            series: Mutex::default(),
            made: AtomicU64::new(0),
        }
    }

    /// Publishes `ev` about `reference`: a new Event, or one more in the series of the same
    /// Event (same note) published within [`SERIES_TTL`].
    pub async fn publish(&self, ev: &Event, reference: &ObjectReference) -> kube::Result<()> {
        let key = Key::of(ev, reference);
        let repeat = self.repeat(&key, Instant::now());
        let namespace = reference.namespace.as_deref().unwrap_or("default");
        let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), namespace);
        if let Some(p) = &repeat {
            let series = json!({"series": EventSeries {
                count: p.count,
                last_observed_time: MicroTime(Timestamp::now()),
            }});
            match api
                .patch(&p.name, &PatchParams::default(), &Patch::Merge(&series))
                .await
            {
                Ok(_) => return Ok(()),
                // Gone (expired, deleted): published anew below.
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        let event = self.event(ev, reference);
        let name = event.metadata.name.clone().unwrap_or_default();
        api.create(&PostParams::default(), &event).await?;
        self.lock().published.insert(
            key,
            Published {
                name,
                count: 1,
                last: Instant::now(),
            },
        );
        Ok(())
    }

    /// The series entry of `key` if it was published within the TTL, its count raised.
    fn repeat(&self, key: &Key, now: Instant) -> Option<Published> {
        self.lock().repeat(key, now)
    }

    fn event(&self, ev: &Event, reference: &ObjectReference) -> K8sEvent {
        let now = Timestamp::now();
        let n = self.made.fetch_add(1, Ordering::Relaxed);
        let object = reference.name.as_deref().unwrap_or("object");
        K8sEvent {
            metadata: ObjectMeta {
                name: Some(format!(
                    "{object}.{:x}{n:x}",
                    now.as_nanosecond().unsigned_abs()
                )),
                namespace: reference.namespace.clone(),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(now)),
            action: Some(ev.action.clone()),
            reason: Some(ev.reason.clone()),
            note: ev.note.clone(),
            type_: Some(
                match ev.type_ {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .to_string(),
            ),
            regarding: Some(reference.clone()),
            related: None,
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(
                self.reporter
                    .instance
                    .clone()
                    .unwrap_or_else(|| self.reporter.controller.clone()),
            ),
            ..K8sEvent::default()
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Series> {
        self.series.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scaled_up(note: &str) -> Event {
        Event {
            type_: EventType::Normal,
            reason: "ScaledUp".into(),
            note: Some(note.into()),
            action: "Reconcile".into(),
            secondary: None,
        }
    }

    fn reference(uid: &str) -> ObjectReference {
        ObjectReference {
            uid: Some(uid.into()),
            name: Some("p".into()),
            namespace: Some("d".into()),
            ..ObjectReference::default()
        }
    }

    #[test]
    fn the_note_is_part_of_what_makes_a_repeat() {
        let a = Key::of(&scaled_up("creating 3 pod(s)"), &reference("u"));
        assert_eq!(a, Key::of(&scaled_up("creating 3 pod(s)"), &reference("u")));
        assert_ne!(a, Key::of(&scaled_up("creating 1 pod(s)"), &reference("u")));
        assert_ne!(a, Key::of(&scaled_up("creating 3 pod(s)"), &reference("v")));
    }

    fn published(name: &str, last: Instant) -> Published {
        Published {
            name: name.into(),
            count: 1,
            last,
        }
    }

    #[test]
    fn a_repeat_within_the_ttl_counts_and_old_series_are_swept_as_the_map_doubles() {
        let t0 = Instant::now();
        let mut s = Series::default();
        let key = |uid: &str| Key::of(&scaled_up("creating 1 pod(s)"), &reference(uid));
        s.published.insert(key("a"), published("ev-a", t0));
        let again = s.repeat(&key("a"), t0 + Duration::from_secs(60)).unwrap();
        assert_eq!((again.name.as_str(), again.count), ("ev-a", 2));
        // Past the TTL after its last repeat: a new Event, and forgotten.
        let late = t0 + Duration::from_secs(60) + SERIES_TTL;
        assert!(s.repeat(&key("a"), late).is_none());
        assert!(s.published.is_empty());
        // Thousands of old series are not looked at on every Event, only once the map has
        // reached the size of the next sweep; then all of them go at once.
        for i in 0..SWEEP_FROM - 1 {
            s.published
                .insert(key(&format!("old-{i}")), published("old", t0));
        }
        assert!(s.repeat(&key("b"), late).is_none());
        assert_eq!(s.published.len(), SWEEP_FROM - 1, "no sweep below its size");
        s.published.insert(key("b"), published("ev-b", late));
        assert_eq!(s.repeat(&key("b"), late).map(|p| p.count), Some(2));
        assert_eq!(s.published.len(), 1, "swept: only the fresh one left");
        assert_eq!(s.sweep_at, SWEEP_FROM);
    }
}
