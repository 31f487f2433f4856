//! Checks of what a plugin declares in `info()`.

use std::collections::HashSet;

use serde_json::Value;

use crate::runtime::types::{KindRef, PluginInfo, Selection};

/// Whether `s` is a DNS-1123 label (lowercase alphanumerics and '-', at most 63).
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn check_kind(what: &str, k: &KindRef) -> Result<(), String> {
    if k.version.is_empty() || k.kind.is_empty() || k.plural.is_empty() {
        return Err(format!(
            "{what}: version, kind and plural must not be empty"
        ));
    }
    if k.plural != k.plural.to_lowercase() {
        return Err(format!("{what}: plural `{}` must be lowercase", k.plural));
    }
    Ok(())
}

/// Validates the declared info: names, kinds, relations, permissions and the CRD.
pub fn validate_info(info: &PluginInfo) -> Result<(), String> {
    if !is_dns_label(&info.name) {
        return Err(format!(
            "name `{}` is not a DNS-1123 label (lowercase letters, digits, '-')",
            info.name
        ));
    }
    if info.version.trim().is_empty() {
        return Err("version is empty".into());
    }
    check_kind("primary", &info.primary)?;
    let mut names = HashSet::new();
    for r in &info.relations {
        if r.name.is_empty() || !names.insert(r.name.as_str()) {
            return Err(format!("relation name `{}` is empty or repeated", r.name));
        }
        check_kind(&format!("relation `{}`", r.name), &r.kind)?;
        for path in r.fields.iter().flatten() {
            check_path(path).map_err(|e| format!("relation `{}`: {e}", r.name))?;
        }
        if let Selection::Referenced(to) = &r.selection {
            for path in std::iter::once(&to.name_path).chain(&to.namespace_path) {
                check_path(path).map_err(|e| format!("relation `{}`: reference: {e}", r.name))?;
            }
        }
    }
    for h in &info.outbound_hosts {
        crate::runtime::types::OriginPattern::parse(h).map_err(|e| format!("outbound host {e}"))?;
    }
    for p in &info.permissions {
        check_kind("permission", &p.kind)?;
        if p.verbs.is_empty() {
            return Err(format!("permission on {} lists no verbs", p.kind.kind));
        }
    }
    if let Some(f) = &info.finalizer
        && !f.contains('/')
    {
        return Err(format!(
            "finalizer `{f}` must be qualified, like `example.com/name`"
        ));
    }
    if let Some(crd) = &info.crd {
        validate_crd(crd, &info.primary)?;
    }
    Ok(())
}

/// Checks that the CRD defines exactly the declared primary kind.
pub fn validate_crd(crd: &Value, primary: &KindRef) -> Result<(), String> {
    let s = |p: &str| crd.pointer(p).and_then(Value::as_str).unwrap_or("");
    if s("/apiVersion") != "apiextensions.k8s.io/v1" || s("/kind") != "CustomResourceDefinition" {
        return Err("crd is not an apiextensions.k8s.io/v1 CustomResourceDefinition".into());
    }
    let expect_name = format!("{}.{}", primary.plural, primary.group);
    if s("/metadata/name") != expect_name {
        return Err(format!(
            "crd is named `{}`, expected `{expect_name}`",
            s("/metadata/name")
        ));
    }
    if s("/spec/group") != primary.group || s("/spec/names/kind") != primary.kind {
        return Err(format!(
            "crd defines {}/{}, but the primary kind is {}/{}",
            s("/spec/group"),
            s("/spec/names/kind"),
            primary.group,
            primary.kind
        ));
    }
    let scope = if primary.namespaced {
        "Namespaced"
    } else {
        "Cluster"
    };
    if s("/spec/scope") != scope {
        return Err(format!(
            "crd scope is `{}`, expected `{scope}`",
            s("/spec/scope")
        ));
    }
    let served = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .is_some_and(|vs| {
            vs.iter().any(|v| {
                v.get("name").and_then(Value::as_str) == Some(&primary.version)
                    && v.get("served").and_then(Value::as_bool) == Some(true)
            })
        });
    if !served {
        return Err(format!("crd does not serve version `{}`", primary.version));
    }
    Ok(())
}

/// Checks one declared path: dot-separated keys, none empty, no whitespace.
pub fn check_path(path: &str) -> Result<(), String> {
    if path.len() > 253 {
        return Err(format!("field path `{path}` is longer than 253 characters"));
    }
    if path.split('.').any(str::is_empty) || path.contains(char::is_whitespace) {
        return Err(format!(
            "field path `{path}` is not dot-separated keys like `status.phase`"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::types::{Permission, Verb};
    use serde_json::json;

    fn kind() -> KindRef {
        KindRef {
            group: "app.example.com".into(),
            version: "v1alpha1".into(),
            kind: "PodReplica".into(),
            plural: "podreplicas".into(),
            namespaced: true,
        }
    }

    fn crd() -> Value {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "podreplicas.app.example.com"},
            "spec": {"group": "app.example.com", "scope": "Namespaced",
                "names": {"kind": "PodReplica", "plural": "podreplicas"},
                "versions": [{"name": "v1alpha1", "served": true, "storage": true}]}})
    }

    fn info() -> PluginInfo {
        PluginInfo {
            name: "podreplica".into(),
            version: "1.0.0".into(),
            primary: kind(),
            crd: Some(crd()),
            relations: vec![],
            permissions: vec![Permission {
                kind: kind(),
                verbs: vec![Verb::Get],
            }],
            finalizer: None,
            webhooks: Default::default(),
            outbound_hosts: Vec::new(),
        }
    }

    #[test]
    fn accepts_a_consistent_declaration() {
        validate_info(&info()).unwrap();
    }

    #[test]
    fn rejects_bad_names_and_mismatched_crds() {
        let mut i = info();
        i.name = "Pod_Replica".into();
        assert!(validate_info(&i).unwrap_err().contains("DNS-1123"));
        let mut i = info();
        i.crd.as_mut().unwrap()["spec"]["names"]["kind"] = json!("Other");
        assert!(validate_info(&i).unwrap_err().contains("primary kind"));
        let mut i = info();
        i.crd.as_mut().unwrap()["spec"]["scope"] = json!("Cluster");
        assert!(validate_info(&i).unwrap_err().contains("scope"));
        let mut i = info();
        i.permissions[0].verbs.clear();
        assert!(validate_info(&i).unwrap_err().contains("no verbs"));
        let mut i = info();
        i.relations.push(crate::runtime::pod_relation(
            Selection::Referenced(crate::runtime::Reference {
                name_path: "spec..name".into(),
                namespace_path: None,
            }),
            None,
        ));
        assert!(
            validate_info(&i)
                .unwrap_err()
                .contains("relation `pods`: reference: field path `spec..name`")
        );
    }

    #[test]
    fn path_checks() {
        assert!(check_path("status.phase").is_ok());
        for bad in ["", ".a", "a.", "a..b", "a b", &"x".repeat(254)] {
            assert!(check_path(bad).is_err(), "{bad:?}");
        }
    }
}
