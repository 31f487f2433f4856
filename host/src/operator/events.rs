//! Kubernetes Events about a primary object, published through the plugin's recorder.

use kube::Resource;
use kube::api::DynamicObject;
use kube::runtime::events::{Event as KubeEvent, EventType as KubeEventType};

use super::context::Context;
use crate::runtime::EventType;

/// Longest Event reason sent (the API server refuses longer ones).
pub const MAX_REASON_CHARS: usize = 128;
/// Longest Event note sent.
pub const MAX_NOTE_CHARS: usize = 1024;

/// Publishes one Event about `obj`; a failure to publish is logged, never fatal.
pub async fn publish(
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
    let reference = obj.object_ref(&ctx.primary);
    if let Err(e) = ctx.recorder.publish(&ev, &reference).await {
        tracing::warn!(error = %e, reason, "could not publish event");
    }
}
