//! Admission and conversion (the `admitted` build): an image tagged `latest` is refused,
//! more than 50 pods are warned about, `spec.image` is filled in; the CRD serves a second
//! version, `v1beta1`, whose `spec.replicas` is v1alpha1's `spec.size` (stored as v1alpha1).

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

/// The second version of the CRD.
pub const BETA: &str = "v1beta1";

/// `crd` (serving v1alpha1, its storage version) serving v1beta1 too: the same schema with
/// `spec.size` named `spec.replicas`.
pub fn with_beta(mut crd: Value) -> Value {
    let Some(versions) = crd
        .pointer_mut("/spec/versions")
        .and_then(Value::as_array_mut)
    else {
        return crd;
    };
    let mut beta = versions[0].clone();
    beta["name"] = json!(BETA);
    beta["storage"] = json!(false);
    if let Some(props) = beta
        .pointer_mut("/schema/openAPIV3Schema/properties/spec/properties")
        .and_then(Value::as_object_mut)
        && let Some(size) = props.remove("size")
    {
        props.insert("replicas".into(), size);
    }
    if let Some(required) = beta
        .pointer_mut("/schema/openAPIV3Schema/properties/spec/required")
        .and_then(Value::as_array_mut)
    {
        for r in required.iter_mut().filter(|r| *r == "size") {
            *r = json!("replicas");
        }
    }
    for c in beta
        .get_mut("additionalPrinterColumns")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if c["jsonPath"] == ".spec.size" {
            c["jsonPath"] = json!(".spec.replicas");
        }
    }
    versions.push(beta);
    crd
}

/// Converts a PodReplica to `to_version` (`v1alpha1` or `v1beta1`).
pub fn convert(mut object: Value, to_version: &str) -> Result<Value, String> {
    let (from, to) = match to_version {
        BETA => ("size", "replicas"),
        "v1alpha1" => ("replicas", "size"),
        other => return Err(format!("PodReplica has no version {other}")),
    };
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut)
        && let Some(n) = spec.remove(from)
    {
        spec.insert(to.into(), n);
    }
    object["apiVersion"] = json!(format!("app.example.com/{to_version}"));
    Ok(object)
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

    #[test]
    fn beta_names_size_replicas_both_ways() {
        let alpha = json!({"apiVersion": "app.example.com/v1alpha1", "spec": {"size": 2}});
        let beta = convert(alpha.clone(), BETA).unwrap();
        assert_eq!(
            beta,
            json!({"apiVersion": "app.example.com/v1beta1", "spec": {"replicas": 2}})
        );
        assert_eq!(convert(beta, "v1alpha1").unwrap(), alpha);
        assert!(convert(alpha, "v2").is_err());
        let crd = with_beta(
            serde_json::to_value(<crate::PodReplica as kube_core::CustomResourceExt>::crd())
                .unwrap(),
        );
        let v = &crd["spec"]["versions"][1];
        assert_eq!(
            (v["name"].as_str(), v["storage"].as_bool()),
            (Some(BETA), Some(false))
        );
        assert!(
            v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["replicas"]
                .is_object()
        );
    }
}
