//! What the guest never needs to see: bookkeeping fields that only cost parsing time.

use serde_json::Value;

/// The annotation `kubectl apply` stores the last applied configuration in.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Removes `metadata.managedFields` and kubectl's last-applied annotation: server-side
/// apply bookkeeping a decision never depends on, often the largest part of an object.
pub fn trim_for_guest(mut object: Value) -> Value {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
        if let Some(ann) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            ann.remove(LAST_APPLIED);
            if ann.is_empty() {
                meta.remove("annotations");
            }
        }
    }
    object
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn drops_managed_fields_and_last_applied_only() {
        let obj = json!({"metadata": {"name": "a", "managedFields": [{"manager": "x"}],
            "annotations": {LAST_APPLIED: "{}", "keep": "me"}}, "spec": {"size": 1}});
        let t = trim_for_guest(obj);
        assert_eq!(
            t,
            json!({"metadata": {"name": "a", "annotations": {"keep": "me"}}, "spec": {"size": 1}})
        );
    }
}
