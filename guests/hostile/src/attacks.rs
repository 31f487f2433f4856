//! The attacks of the hostile plugin (`spec.mode: attack-*`): plans a multi-tenant host must
//! refuse, each one thing a plugin that declares only `pods: create` must not do. The
//! primary's spec names what they aim at: `target` (another namespace, or a ConfigMap to
//! adopt) and `ownerUid`/`ownerName` (an object of someone else).

use serde_json::{Value, json};

use crate::bindings::wasmop::plugin::types::Action;

/// A pod with a generated name (what `pods: create` allows) starting with `prefix`.
fn pod(prefix: &str, extra: Value) -> Value {
    let mut p = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": prefix},
        "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"]}]}});
    if let (Some(p), Some(e)) = (p.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            if k == "metadata" || k == "spec" {
                if let (Some(into), Some(from)) = (p[k].as_object_mut(), v.as_object()) {
                    into.extend(from.clone());
                }
            } else {
                p.insert(k.clone(), v.clone());
            }
        }
    }
    p
}

fn s<'a>(primary: &'a Value, field: &str) -> &'a str {
    primary
        .pointer(&format!("/spec/{field}"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The one action of attack `mode`, or `None` for a mode that is no attack.
pub fn plan(mode: &str, primary: &Value) -> Option<Action> {
    let object = match mode {
        // A pod in another namespace than the primary's.
        "attack-other-namespace" => pod(
            "hostile-elsewhere-",
            json!({"metadata": {"namespace": s(primary, "target")}}),
        ),
        // Cluster-admin for the plugin's own ServiceAccount.
        "attack-clusterrolebinding" => json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "hostile-escalation"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "Group", "name": "system:serviceaccounts"}]}),
        // A Secret.
        "attack-secret" => json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "hostile-secret"}, "stringData": {"stolen": "yes"}}),
        // Taking over a ConfigMap nobody controls (server-side apply with force).
        "attack-adopt" => json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": s(primary, "target")}, "data": {"owner": "hostile"}}),
        // A pod that names someone else's object as its controller (and blocks its deletion).
        "attack-owner" => pod(
            "hostile-owned-elsewhere-",
            json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
                "name": s(primary, "ownerName"), "uid": s(primary, "ownerUid"),
                "controller": true, "blockOwnerDeletion": true}]}}),
        ),
        // A privileged pod (Pod Security `baseline` forbids it).
        "attack-privileged" => pod(
            "hostile-privileged-",
            json!({"spec": {"containers": [{"name": "c", "image": "busybox",
                "securityContext": {"privileged": true}}]}}),
        ),
        // An upload of its own: a WasmPlugin in the host's namespace.
        "attack-wasmplugin" => json!({"apiVersion": "wasmop.dev/v1alpha1", "kind": "WasmPlugin",
            "metadata": {"name": "hostile-upload", "namespace": s(primary, "target")},
            "spec": {"configMap": {"name": "x"}, "sha256": "0".repeat(64)}}),
        _ => return None,
    };
    Some(Action::Apply(object.to_string()))
}
