//! How a shared cache holds a related object: its metadata typed (the owner index, label
//! selectors, routing and expectations read only that) and, in place of its body, the
//! object exactly as a guest sees it, as JSON text: trimmed as
//! [`crate::observe::trim_for_guest`] trims (without `managedFields` and kubectl's
//! last-applied annotation), with its `apiVersion` and `kind`, cut to the fields its
//! relations read ([`Fields`]). Packed once per version, at ingest:
//! - a decision sends the text as it is (`Observed::related_json`) instead of converting
//!   every related object to a `Value` and back to text on every reconcile;
//! - the text of a pod is a few KiB, its `Value` tree several times that (a map node, a
//!   `String` and a `Value` per field): the cache shrinks to a fraction.
//!
//! Nothing else in the host reads a related object's body; [`guest_json`] is the one way to.

use kube::api::{ApiResource, DynamicObject};
use serde_json::{Map, Value, json};

use crate::observe::{Fields, LAST_APPLIED};

/// Replaces `o`'s body with its guest view as JSON text, cut to `fields`, and drops from its
/// metadata what nothing reads: `managedFields` (most of a pod's size) and kubectl's
/// last-applied annotation.
pub fn pack(o: &mut DynamicObject, resource: &ApiResource, fields: &Fields) {
    o.metadata.managed_fields = None;
    if let Some(ann) = o.metadata.annotations.as_mut() {
        ann.remove(LAST_APPLIED);
        if ann.is_empty() {
            o.metadata.annotations = None;
        }
    }
    let metadata = match serde_json::to_value(&o.metadata) {
        Ok(v) => v,
        Err(_) => return, // cannot happen: metadata that came as JSON serialises again
    };
    // The body is moved into the view, not copied: only the metadata is serialised again.
    let mut whole = match std::mem::take(&mut o.data) {
        Value::Object(body) => body,
        _ => Map::new(),
    };
    whole.insert("metadata".into(), metadata);
    whole.insert("apiVersion".into(), json!(resource.api_version));
    whole.insert("kind".into(), json!(resource.kind));
    o.data = Value::String(fields.project(Value::Object(whole)).to_string());
}

/// The guest view of a packed object, as JSON text (`None` for an object never packed).
pub fn guest_json(o: &DynamicObject) -> Option<&str> {
    o.data.as_str()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guest_sees_the_object_trimmed_with_its_kind_and_the_metadata_stays_typed() {
        let mut o: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "a", "namespace": "ns", "labels": {"app": "x"},
                "managedFields": [{"manager": "kubectl"}],
                "annotations": {LAST_APPLIED: "{}"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            "status": {"phase": "Running"}}))
        .unwrap();
        let pods = ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&());
        pack(&mut o, &pods, &Fields::Whole);
        let seen: Value = serde_json::from_str(guest_json(&o).unwrap()).unwrap();
        assert_eq!(
            seen,
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "a", "namespace": "ns", "labels": {"app": "x"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                "status": {"phase": "Running"}})
        );
        assert_eq!(o.metadata.labels.unwrap()["app"], "x");
        assert!(o.metadata.managed_fields.is_none() && o.metadata.annotations.is_none());
    }
}
