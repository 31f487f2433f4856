//! Admission (the `admitted` build): an image tagged `latest` is refused, more than 50 pods
//! are warned about, and `spec.image` is filled in.

use serde_json::{Value, json};
use wasmop_sdk::{AdmissionRequest, FieldError, Verdict};

use crate::types::DEFAULT_IMAGE;

/// Above this size a create or update is warned about.
pub const WARN_ABOVE: i64 = 50;

/// Refuses an image tagged `latest`; warns about sizes above [`WARN_ABOVE`].
pub fn validate(request: &AdmissionRequest) -> Verdict {
    let Some(object) = &request.object else {
        return Verdict::allow();
    };
    if let Some(image) = object.pointer("/spec/image").and_then(Value::as_str)
        && image.ends_with(":latest")
    {
        return Verdict::invalid(vec![FieldError {
            path: "spec.image".into(),
            value: Some(json!(image)),
            detail: "an image tagged `latest` is not reproducible: name a version".into(),
        }]);
    }
    let size = object.pointer("/spec/size").and_then(Value::as_i64);
    match size {
        Some(n) if n > WARN_ABOVE => {
            Verdict::allow().warn(format!("{n} pods is more than {WARN_ABOVE}"))
        }
        _ => Verdict::allow(),
    }
}

/// Fills in `spec.image` when absent.
pub fn default(mut object: Value) -> Value {
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
        spec.entry("image").or_insert_with(|| json!(DEFAULT_IMAGE));
    }
    object
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmop_sdk::Operation;

    fn create(spec: Value) -> AdmissionRequest {
        AdmissionRequest {
            operation: Operation::Create,
            object: Some(json!({"spec": spec})),
            old_object: None,
            user: "alice".into(),
            dry_run: false,
        }
    }

    #[test]
    fn latest_is_refused_big_is_warned_the_image_defaulted() {
        let v = validate(&create(json!({"size": 1, "image": "busybox:latest"})));
        assert!(!v.allowed);
        assert_eq!(v.fields[0].path, "spec.image");
        let v = validate(&create(json!({"size": 60})));
        assert!(v.allowed && v.warnings.len() == 1);
        assert!(validate(&create(json!({"size": 3}))).warnings.is_empty());
        assert_eq!(
            default(json!({"spec": {"size": 1}}))["spec"]["image"],
            DEFAULT_IMAGE
        );
        let set = json!({"spec": {"size": 1, "image": "nginx:1"}});
        assert_eq!(default(set.clone()), set);
    }
}
