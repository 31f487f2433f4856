//! AdmissionReview (`admission.k8s.io/v1`) in and out: what the API server asks of a
//! webhook, and the plugin's answer worded for it. Pure functions, no I/O.

use base64::Engine;
use serde_json::{Value, json};

use crate::runtime::types::{AdmissionRequest, Operation, Verdict};

/// What one AdmissionReview asks: its `uid` (the answer must carry it), the request for the
/// plugin, and the object's `namespace/name` (for the guest's log lines and the refusal).
#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    /// The review's uid.
    pub uid: String,
    /// The request as `validate` sees it.
    pub request: AdmissionRequest,
    /// `namespace/name` of the object (`name` alone when cluster-scoped).
    pub object: String,
    /// The object's name.
    pub name: String,
}

/// Reads an AdmissionReview; an error says what is missing.
pub fn asked(review: &Value) -> Result<Asked, String> {
    let r = review
        .get("request")
        .ok_or("an AdmissionReview without a request")?;
    let s = |p: &str| r.pointer(p).and_then(Value::as_str).unwrap_or_default();
    let uid = s("/uid");
    if uid.is_empty() {
        return Err("an AdmissionReview request without a uid".into());
    }
    let operation = match s("/operation") {
        "CREATE" => Operation::Create,
        "UPDATE" => Operation::Update,
        "DELETE" => Operation::Delete,
        other => return Err(format!("operation `{other}` is not one a plugin decides")),
    };
    let present = |p: &str| r.pointer(p).filter(|v| !v.is_null()).cloned();
    let object = present("/object");
    let old_object = present("/oldObject");
    let name = match s("/name") {
        "" => object
            .as_ref()
            .and_then(|o| o.pointer("/metadata/name").and_then(Value::as_str))
            .unwrap_or_default()
            .to_string(),
        n => n.to_string(),
    };
    let object_key = match s("/namespace") {
        "" => name.clone(),
        ns => format!("{ns}/{name}"),
    };
    Ok(Asked {
        uid: uid.to_string(),
        request: AdmissionRequest {
            operation,
            object,
            old_object,
            user: s("/userInfo/username").to_string(),
            dry_run: r.get("dryRun").and_then(Value::as_bool).unwrap_or(false),
        },
        object: object_key,
        name,
    })
}

fn review(response: Value) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}

/// The answer to a review: allowed or not, the verdict's warnings; a refusal worded as the
/// API server words an invalid object of `kind` in `group`.
pub fn answer(uid: &str, verdict: &Verdict, (kind, group, name): (&str, &str, &str)) -> Value {
    let mut response = json!({"uid": uid, "allowed": verdict.allowed});
    if !verdict.allowed {
        response["status"] = json!({
            "code": 422,
            "reason": "Invalid",
            "message": verdict.message_for(kind, group, name),
        });
    }
    if !verdict.warnings.is_empty() {
        response["warnings"] = json!(verdict.warnings);
    }
    review(response)
}

/// A refusal of the host's own: the plugin failed, or the request made no sense.
pub fn refused(uid: &str, message: &str) -> Value {
    review(json!({"uid": uid, "allowed": false,
        "status": {"code": 403, "reason": "Forbidden", "message": message}}))
}

/// Allowed, with the JSON patch that turns `before` into `after` (none when equal).
pub fn patched(uid: &str, before: &Value, after: &Value) -> Value {
    let patch = json_patch::diff(before, after);
    let mut response = json!({"uid": uid, "allowed": true});
    if !patch.0.is_empty() {
        let bytes = serde_json::to_vec(&patch).unwrap_or_default();
        response["patchType"] = json!("JSONPatch");
        response["patch"] = json!(base64::engine::general_purpose::STANDARD.encode(bytes));
    }
    review(response)
}

/// What one ConversionReview (`apiextensions.k8s.io/v1`) asks: its uid, the version the
/// objects are wanted in (`group/version`), the objects.
pub fn conversion(review: &Value) -> Result<(String, String, Vec<Value>), String> {
    let r = review
        .get("request")
        .ok_or("a ConversionReview without a request")?;
    let uid = r.get("uid").and_then(Value::as_str).unwrap_or_default();
    let desired = r
        .get("desiredAPIVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if uid.is_empty() || desired.is_empty() {
        return Err("a ConversionReview request without a uid or a desiredAPIVersion".into());
    }
    let objects = r
        .get("objects")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    Ok((uid.to_string(), desired.to_string(), objects))
}

/// The answer to a ConversionReview: the converted objects, or the failure.
pub fn converted(uid: &str, objects: Result<Vec<Value>, String>) -> Value {
    let response = match objects {
        Ok(objects) => json!({"uid": uid, "convertedObjects": objects,
            "result": {"status": "Success"}}),
        Err(message) => json!({"uid": uid, "convertedObjects": [],
            "result": {"status": "Failure", "message": message}}),
    };
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "response": response})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::types::FieldError;

    fn create(object: Value) -> Value {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u-1", "operation": "CREATE", "namespace": "team", "name": "",
            "userInfo": {"username": "alice"}, "object": object, "oldObject": null,
            "dryRun": true}})
    }

    #[test]
    fn a_review_is_read_with_the_name_of_a_generated_object() {
        let a = asked(&create(json!({"metadata": {"name": "web"}}))).unwrap();
        assert_eq!((a.uid.as_str(), a.object.as_str()), ("u-1", "team/web"));
        assert_eq!(a.request.operation, Operation::Create);
        assert_eq!(a.request.user, "alice");
        assert!(a.request.dry_run && a.request.old_object.is_none());
        let mut connect = create(json!({}));
        connect["request"]["operation"] = json!("CONNECT");
        assert!(asked(&connect).unwrap_err().contains("CONNECT"));
        assert!(asked(&json!({"request": {}})).unwrap_err().contains("uid"));
    }

    #[test]
    fn a_refusal_is_worded_as_the_api_server_words_an_invalid_object() {
        let v = Verdict::invalid(vec![FieldError {
            path: "spec.size".into(),
            value: Some(json!(7)),
            detail: "must be even".into(),
        }])
        .warn("odd sizes are deprecated");
        let a = answer("u-1", &v, ("PodReplica", "app.example.com", "web"));
        assert_eq!(a["response"]["allowed"], false);
        assert_eq!(
            a["response"]["status"]["message"],
            "PodReplica.app.example.com \"web\" is invalid: spec.size: Invalid value: 7: must be even"
        );
        assert_eq!(a["response"]["warnings"][0], "odd sizes are deprecated");
        let ok = answer(
            "u-2",
            &Verdict::allow(),
            ("PodReplica", "app.example.com", "web"),
        );
        assert_eq!(ok["response"], json!({"uid": "u-2", "allowed": true}));
    }

    #[test]
    fn a_conversion_review_is_read_and_answered() {
        let review = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "c-1", "desiredAPIVersion": "app.example.com/v1beta1",
                "objects": [{"apiVersion": "app.example.com/v1alpha1"}]}});
        let (uid, desired, objects) = conversion(&review).unwrap();
        assert_eq!(
            (uid.as_str(), desired.as_str(), objects.len()),
            ("c-1", "app.example.com/v1beta1", 1)
        );
        assert_eq!(
            converted("c-1", Ok(vec![json!({})]))["response"]["result"]["status"],
            "Success"
        );
        let failed = converted("c-1", Err("no".into()));
        assert_eq!(
            failed["response"]["result"],
            json!({"status": "Failure", "message": "no"})
        );
        assert!(conversion(&json!({"request": {"uid": "c"}})).is_err());
    }

    #[test]
    fn the_patch_turns_the_object_into_the_defaulted_one() {
        let before = json!({"spec": {"size": 1}});
        let after = json!({"spec": {"size": 1, "image": "busybox"}});
        let a = patched("u-1", &before, &after);
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(a["response"]["patch"].as_str().unwrap())
            .unwrap();
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).unwrap();
        let mut applied = before.clone();
        json_patch::patch(&mut applied, &patch).unwrap();
        assert_eq!(applied, after);
        assert!(
            patched("u-1", &before, &before)["response"]
                .get("patch")
                .is_none()
        );
    }
}
