//! Convenience constructors for plans, used by plugins and tests.

use serde::Serialize;
use serde_json::Value;

use crate::{Action, Event, EventType, ObjectRef, OutboundRequest, Plan, Requirement};

impl Plan {
    /// An empty plan: nothing to do, status untouched.
    pub fn new() -> Self {
        Plan::default()
    }

    /// Whether the plan changes nothing (no actions, no status, no events, no request
    /// outside the cluster).
    pub fn is_empty(&self) -> bool {
        self.actions.is_empty()
            && self.status.is_none()
            && self.events.is_empty()
            && self.requests.is_empty()
    }

    /// Asks for objects no relation selects; the host reads them and decides again.
    pub fn require(mut self, requirement: Requirement) -> Self {
        self.requires.push(requirement);
        self
    }

    /// Sends a request outside the cluster after the writes; its answer comes back under
    /// its key.
    pub fn request(mut self, request: OutboundRequest) -> Self {
        self.requests.push(request);
        self
    }

    /// Adds an object to create or update. Panics only if `object` cannot be represented
    /// as JSON (a map with non-string keys), which Kubernetes types never are.
    pub fn apply(mut self, object: &impl Serialize) -> Self {
        let v = serde_json::to_value(object).expect("object serialises to JSON");
        self.actions.push(Action::Apply(v));
        self
    }

    /// Adds a deletion.
    pub fn delete(mut self, object: ObjectRef) -> Self {
        self.actions.push(Action::Delete(object));
        self
    }

    /// Sets the desired status of the primary object.
    pub fn status(mut self, status: &impl Serialize) -> Self {
        self.status = Some(serde_json::to_value(status).expect("status serialises to JSON"));
        self
    }

    /// Sets the desired status from a JSON value.
    pub fn status_value(mut self, status: Value) -> Self {
        self.status = Some(status);
        self
    }

    /// Records a Normal event.
    pub fn normal(self, reason: &str, message: impl Into<String>) -> Self {
        self.event(EventType::Normal, reason, message)
    }

    /// Records a Warning event.
    pub fn warning(self, reason: &str, message: impl Into<String>) -> Self {
        self.event(EventType::Warning, reason, message)
    }

    /// Records an event.
    pub fn event(
        mut self,
        event_type: EventType,
        reason: &str,
        message: impl Into<String>,
    ) -> Self {
        self.events.push(Event {
            event_type,
            reason: reason.to_string(),
            message: message.into(),
        });
        self
    }

    /// Asks to be reconciled again after `ms` milliseconds.
    pub fn requeue_after_ms(mut self, ms: u64) -> Self {
        self.requeue_after_ms = Some(ms);
        self
    }

    /// The objects this plan applies.
    pub fn applied(&self) -> impl Iterator<Item = &Value> {
        self.actions.iter().filter_map(|a| match a {
            Action::Apply(v) => Some(v),
            Action::Delete(_) => None,
        })
    }

    /// The objects this plan deletes.
    pub fn deleted(&self) -> impl Iterator<Item = &ObjectRef> {
        self.actions.iter().filter_map(|a| match a {
            Action::Delete(r) => Some(r),
            Action::Apply(_) => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn builder_collects_actions_status_and_events() {
        let plan = Plan::new()
            .apply(&json!({"kind": "Pod"}))
            .delete(ObjectRef {
                api_version: "v1".into(),
                kind: "Pod".into(),
                namespace: Some("default".into()),
                name: "a".into(),
                uid: Some("u1".into()),
            })
            .status(&json!({"replicas": 1}))
            .normal("Scaled", "one pod")
            .requeue_after_ms(500);
        assert_eq!(plan.applied().count(), 1);
        assert_eq!(plan.deleted().next().unwrap().name, "a");
        assert_eq!(plan.status, Some(json!({"replicas": 1})));
        assert_eq!(plan.events[0].reason, "Scaled");
        assert_eq!(plan.requeue_after_ms, Some(500));
        assert!(!plan.is_empty());
        assert!(Plan::new().is_empty());
    }

    #[test]
    fn plan_round_trips_through_yaml_shape() {
        let plan = Plan::new().apply(&json!({"kind": "Pod"})).normal("R", "m");
        let text = serde_json::to_string(&plan).unwrap();
        assert!(
            text.contains(r#""actions":[{"apply":{"kind":"Pod"}}]"#),
            "{text}"
        );
        let back: Plan = serde_json::from_str(&text).unwrap();
        assert_eq!(back, plan);
    }
}
