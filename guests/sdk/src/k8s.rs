//! Helpers for Kubernetes objects that most plugins need: ownership, termination, time,
//! references for deletion.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::types::{KindRef, ObjectRef, ReconcileError};

pub use k8s_openapi;

/// The core `v1` Pod kind, as plugins declare it in relations and permissions.
pub fn pod_kind() -> KindRef {
    KindRef::pod()
}

/// A related object read for its metadata and the status fields `S` declares: everything
/// else in the object is skipped while parsing, and the plugin carries no code for it. A
/// decision that reads a pod's phase need not parse (nor compile in) the whole `Pod` type,
/// and a smaller component compiles faster when it is uploaded.
///
/// ```
/// use serde::Deserialize;
/// use wasmop_sdk::k8s::ObjectView;
///
/// #[derive(Deserialize)]
/// struct Phase {
///     phase: Option<String>,
/// }
///
/// let pod: ObjectView<Phase> = serde_json::from_str(
///     r#"{"metadata": {"name": "a"}, "spec": {"containers": []}, "status": {"phase": "Running"}}"#,
/// )
/// .unwrap();
/// assert_eq!(pod.metadata.name.as_deref(), Some("a"));
/// assert_eq!(pod.status.and_then(|s| s.phase).as_deref(), Some("Running"));
/// ```
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct ObjectView<S> {
    /// The object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The status fields `S` declares; `None` when the object has no status yet.
    pub status: Option<S>,
}

/// The UID of the object's controller, if it has one.
pub fn controller_uid(meta: &ObjectMeta) -> Option<&str> {
    meta.owner_references
        .as_deref()?
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.as_str())
}

/// Whether the object's controller ownerReference points at the object with `uid`.
pub fn is_controlled_by(meta: &ObjectMeta, uid: &str) -> bool {
    controller_uid(meta) == Some(uid)
}

/// Whether the object is being deleted (it has a deletion timestamp).
pub fn is_terminating(meta: &ObjectMeta) -> bool {
    meta.deletion_timestamp.is_some()
}

/// The identity of an object as JSON: apiVersion, kind, name, uid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`, if any.
    pub namespace: Option<String>,
    /// `metadata.uid`.
    pub uid: String,
}

impl Identity {
    /// Reads the identity of an object. The host always sends objects that have one.
    pub fn of(object: &Value) -> Result<Identity, ReconcileError> {
        let s = |p: &str| {
            object
                .pointer(p)
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let missing = |what: &str| ReconcileError::Other(format!("object has no {what}"));
        Ok(Identity {
            api_version: s("/apiVersion").ok_or_else(|| missing("apiVersion"))?,
            kind: s("/kind").ok_or_else(|| missing("kind"))?,
            name: s("/metadata/name").ok_or_else(|| missing("metadata.name"))?,
            namespace: s("/metadata/namespace"),
            uid: s("/metadata/uid").ok_or_else(|| missing("metadata.uid"))?,
        })
    }

    /// A controller ownerReference to this object (blocking owner deletion, so the
    /// garbage collector removes dependents in the foreground when asked).
    pub fn controller_reference(&self) -> OwnerReference {
        OwnerReference {
            api_version: self.api_version.clone(),
            kind: self.kind.clone(),
            name: self.name.clone(),
            uid: self.uid.clone(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }
}

/// A deletion reference with a UID precondition for an object of the given kind.
pub fn delete_ref(api_version: &str, kind: &str, meta: &ObjectMeta) -> ObjectRef {
    ObjectRef {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        namespace: meta.namespace.clone(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone(),
    }
}

/// The host's `now` as a Kubernetes time.
pub fn time_from_ms(now_unix_ms: i64) -> Time {
    Time(Timestamp::from_millisecond(now_unix_ms).unwrap_or(Timestamp::UNIX_EPOCH))
}

/// The host's `now` as an RFC 3339 string with second precision, the way Kubernetes
/// writes times.
pub fn rfc3339(now_unix_ms: i64) -> String {
    let secs = now_unix_ms.div_euclid(1000);
    Timestamp::from_second(secs)
        .unwrap_or(Timestamp::UNIX_EPOCH)
        .to_string()
}

/// Milliseconds since the Unix epoch of an RFC 3339 string, if it parses.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    text.parse::<Timestamp>().ok().map(|t| t.as_millisecond())
}

/// Milliseconds since the Unix epoch of a Kubernetes time.
pub fn ms_of(time: &Time) -> i64 {
    time.0.as_millisecond()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ownership_and_termination() {
        let meta: ObjectMeta = serde_json::from_value(json!({
            "name": "p", "uid": "u-p",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "X", "name": "x", "uid": "other"},
                {"apiVersion": "v1", "kind": "Y", "name": "y", "uid": "owner", "controller": true}
            ],
            "deletionTimestamp": "2026-01-01T00:00:00Z"
        }))
        .unwrap();
        assert!(is_controlled_by(&meta, "owner"));
        assert!(!is_controlled_by(&meta, "other"));
        assert!(is_terminating(&meta));
        let r = delete_ref("v1", "Pod", &meta);
        assert_eq!((r.name.as_str(), r.uid.as_deref()), ("p", Some("u-p")));
    }

    #[test]
    fn identity_and_time() {
        let obj = json!({"apiVersion": "app.example.com/v1alpha1", "kind": "PodReplica",
            "metadata": {"name": "a", "namespace": "ns", "uid": "u"}});
        let id = Identity::of(&obj).unwrap();
        assert_eq!(id.controller_reference().controller, Some(true));
        assert!(Identity::of(&json!({"kind": "X"})).is_err());
        let t = time_from_ms(1_700_000_000_123);
        assert_eq!(ms_of(&t), 1_700_000_000_123);
        assert_eq!(rfc3339(1_700_000_000_999), "2023-11-14T22:13:20Z");
        assert_eq!(
            parse_rfc3339("2023-11-14T22:13:20Z"),
            Some(1_700_000_000_000)
        );
        assert_eq!(parse_rfc3339("yesterday"), None);
        assert_eq!(
            serde_json::to_value(time_from_ms(0)).unwrap(),
            json!("1970-01-01T00:00:00Z")
        );
    }
}
