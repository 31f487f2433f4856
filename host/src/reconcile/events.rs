//! Kubernetes Events about a primary object, published through the plugin's recorder in
//! the background: a reconcile hands its Events over and goes on, as client-go's event
//! broadcaster does, so an Event never adds a round trip to the API server to a reconcile.

use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use kube::Resource;
use kube::api::DynamicObject;
use kube::runtime::events::{Event as KubeEvent, EventType as KubeEventType};
use tokio::sync::mpsc;

use crate::reconcile::context::Context;
use crate::reconcile::series::SeriesRecorder;
use crate::runtime::EventType;

/// Longest Event reason sent (the API server refuses longer ones).
pub const MAX_REASON_CHARS: usize = 128;
/// Longest Event note sent.
pub const MAX_NOTE_CHARS: usize = 1024;
/// Events waiting to be sent, per plugin, before new ones are dropped (and logged).
pub const QUEUE: usize = 4096;
/// Events of one plugin sent at once.
pub const SENDERS: usize = 4;

/// One Event to publish and the object it is about.
pub type Outgoing = (KubeEvent, k8s_openapi::api::core::v1::ObjectReference);

/// The queue of a plugin's Events; a task sends them while any handle lives and until the
/// queue is empty.
#[derive(Debug, Clone)]
pub struct EventSink {
    tx: mpsc::Sender<Outgoing>,
}

impl EventSink {
    /// Starts the task publishing through `recorder`.
    pub fn start(recorder: SeriesRecorder) -> Self {
        let recorder = Arc::new(recorder);
        Self::start_with(move |(ev, reference): Outgoing| {
            let recorder = recorder.clone();
            async move {
                if let Err(e) = recorder.publish(&ev, &reference).await {
                    tracing::warn!(error = %e, reason = %ev.reason, "could not publish event");
                }
            }
        })
    }

    /// Starts the task handing each Event to `send`, [`SENDERS`] at a time.
    pub fn start_with<F, Fut>(send: F) -> Self
    where
        F: Fn(Outgoing) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let (tx, mut rx) = mpsc::channel::<Outgoing>(QUEUE);
        let queued = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
        tokio::spawn(queued.for_each_concurrent(SENDERS, send));
        EventSink { tx }
    }

    /// Queues one Event; when the queue is full the Event is dropped and logged.
    pub fn send(&self, event: Outgoing) {
        match self.tx.try_send(event) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full((ev, _))) => {
                tracing::warn!(reason = %ev.reason, "event queue full: event dropped");
            }
            Err(mpsc::error::TrySendError::Closed((ev, _))) => {
                tracing::warn!(reason = %ev.reason, "event sender stopped: event dropped");
            }
        }
    }
}

/// Publishes one Event about `obj` (in the background); a failure to publish is logged,
/// never fatal.
pub fn publish(
    ctx: &Context,
    obj: &DynamicObject,
    event_type: EventType,
    reason: &str,
    note: String,
) {
    let ev = KubeEvent {
        type_: match event_type {
            EventType::Normal => KubeEventType::Normal,
            EventType::Warning => KubeEventType::Warning,
        },
        reason: reason.chars().take(MAX_REASON_CHARS).collect(),
        note: Some(note.chars().take(MAX_NOTE_CHARS).collect()),
        action: "Reconcile".into(),
        secondary: None,
    };
    ctx.events.send((ev, obj.object_ref(&ctx.primary)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    fn event(reason: &str) -> Outgoing {
        (
            KubeEvent {
                type_: KubeEventType::Normal,
                reason: reason.into(),
                note: None,
                action: "Reconcile".into(),
                secondary: None,
            },
            Default::default(),
        )
    }

    #[tokio::test]
    async fn every_event_is_sent_a_few_at_a_time_without_the_caller_waiting() {
        let at_once = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let sent = Arc::new(AtomicUsize::new(0));
        let (a, m, s) = (at_once.clone(), most.clone(), sent.clone());
        let sink = EventSink::start_with(move |_| {
            let (a, m, s) = (a.clone(), m.clone(), s.clone());
            async move {
                let now = a.fetch_add(1, Ordering::SeqCst) + 1;
                m.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
                a.fetch_sub(1, Ordering::SeqCst);
                s.fetch_add(1, Ordering::SeqCst);
            }
        });
        let started = std::time::Instant::now();
        for i in 0..200 {
            sink.send(event(&format!("E{i}")));
        }
        // 200 sends of 5 ms each: handing them over took far less than sending them.
        assert!(started.elapsed() < Duration::from_millis(200));
        drop(sink);
        for _ in 0..500 {
            if sent.load(Ordering::SeqCst) == 200 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(
            sent.load(Ordering::SeqCst),
            200,
            "every queued event is sent"
        );
        assert_eq!(most.load(Ordering::SeqCst), SENDERS);
    }

    #[tokio::test]
    async fn a_full_queue_drops_new_events_and_keeps_the_old() {
        let sent = Arc::new(AtomicUsize::new(0));
        let (gate_tx, gate_rx) = tokio::sync::watch::channel(false);
        let s = sent.clone();
        let sink = EventSink::start_with(move |_| {
            let (s, mut gate) = (s.clone(), gate_rx.clone());
            async move {
                let _ = gate.wait_for(|open| *open).await;
                s.fetch_add(1, Ordering::SeqCst);
            }
        });
        // SENDERS taken by the stuck senders, QUEUE queued, the rest dropped.
        for i in 0..QUEUE + SENDERS + 100 {
            sink.send(event(&format!("E{i}")));
            tokio::task::yield_now().await;
        }
        gate_tx.send(true).unwrap();
        drop(sink);
        for _ in 0..500 {
            if sent.load(Ordering::SeqCst) >= QUEUE + SENDERS {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        let n = sent.load(Ordering::SeqCst);
        assert!(
            (QUEUE..=QUEUE + SENDERS).contains(&n),
            "{n} sent: the queue's worth and those already taken, nothing beyond"
        );
    }
}
