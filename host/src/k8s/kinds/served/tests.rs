use super::*;
use crate::runtime::{Permission, Relation, Selection, Verb};

fn resource(
    api_version: &str,
    kind: &str,
    plural: &str,
    namespaced: bool,
) -> (ApiResource, ApiCapabilities) {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let ar = ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: api_version.into(),
        kind: kind.into(),
        plural: plural.into(),
    };
    let caps = ApiCapabilities {
        scope: if namespaced {
            Scope::Namespaced
        } else {
            Scope::Cluster
        },
        subresources: vec![],
        operations: vec!["list".into(), "watch".into()],
    };
    (ar, caps)
}

/// What a control plane with the PodReplica CRD installed answers for core/v1 and the
/// plugin's group; `missing.example.com/v1` is not served.
fn served() -> Served {
    let mut s = Served::default();
    s.insert(
        "",
        "v1",
        Some(vec![
            resource("v1", "Pod", "pods", true),
            resource("v1", "Secret", "secrets", true),
            resource("v1", "ConfigMap", "configmaps", true),
            resource("v1", "Namespace", "namespaces", false),
        ]),
    );
    s.insert(
        "app.example.com",
        "v1alpha1",
        Some(vec![resource(
            "app.example.com/v1alpha1",
            "PodReplica",
            "podreplicas",
            true,
        )]),
    );
    s.insert("missing.example.com", "v1", None);
    s
}

fn kind(api_version: &str, kind: &str, plural: &str, namespaced: bool) -> KindRef {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    KindRef {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        plural: plural.into(),
        namespaced,
    }
}

fn relation(name: &str, kind: KindRef) -> Relation {
    Relation {
        name: name.into(),
        kind,
        selection: Selection::Namespace,
        label_selector: None,
        fields: None,
    }
}

/// PodReplica as it declares itself: its CRD, pods owned, pods created and deleted.
fn info() -> PluginInfo {
    PluginInfo {
        name: "podreplica".into(),
        version: "1".into(),
        primary: kind(
            "app.example.com/v1alpha1",
            "PodReplica",
            "podreplicas",
            true,
        ),
        crd: Some(serde_json::json!({})),
        relations: vec![relation("pods", KindRef::pod())],
        permissions: vec![Permission {
            kind: KindRef::pod(),
            verbs: vec![Verb::Create, Verb::Delete],
        }],
        finalizer: None,
        webhooks: Default::default(),
        outbound_hosts: Vec::new(),
    }
}

#[test]
fn real_kinds_pass() {
    check(&info(), &served()).unwrap();
}

#[test]
fn a_kind_named_after_another_resource_is_refused() {
    // The declaration: kind `Blob`, plural `secrets`, as a relation and as a
    // permission.
    let blob = kind("v1", "Blob", "secrets", true);
    let mut i = info();
    i.relations.push(relation("blobs", blob.clone()));
    let err = check(&i, &served()).unwrap_err();
    assert_eq!(reason(&err), "KindMismatch");
    assert_eq!(
        err.to_string(),
        "relation `blobs` declares v1 Blob (resource `secrets`, namespaced), but the API server serves v1 Secret (resource `secrets`, namespaced)"
    );
    let mut i = info();
    i.permissions.push(Permission {
        kind: blob,
        verbs: vec![Verb::Create],
    });
    let err = check(&i, &served()).unwrap_err();
    assert!(
        err.to_string().starts_with("a permission declares v1 Blob"),
        "{err}"
    );
    // A real kind under another plural, and a real kind with the wrong scope.
    for k in [
        kind("v1", "Secret", "blobs", true),
        kind("v1", "Namespace", "namespaces", true),
    ] {
        let mut i = info();
        i.relations.push(relation("x", k.clone()));
        assert_eq!(
            reason(&check(&i, &served()).unwrap_err()),
            "KindMismatch",
            "{k:?}"
        );
    }
    // The primary too, CRD or not.
    let mut i = info();
    i.primary.plural = "secrets".into();
    i.primary.group = String::new();
    i.primary.version = "v1".into();
    assert_eq!(reason(&check(&i, &served()).unwrap_err()), "KindMismatch");
}

#[test]
fn a_relation_to_a_kind_not_served_is_refused() {
    let gadget = kind("missing.example.com/v1", "Gadget", "gadgets", true);
    let mut i = info();
    i.relations.push(relation("gadgets", gadget.clone()));
    let err = check(&i, &served()).unwrap_err();
    assert_eq!(reason(&err), "KindNotServed");
    assert!(
        err.to_string()
            .starts_with("relation `gadgets` declares missing.example.com/v1 Gadget (resource `gadgets`, namespaced), which the API server does not serve"),
        "{err}"
    );
    // A kind missing from a served group version is not served either.
    let mut i = info();
    i.relations
        .push(relation("widgets", kind("v1", "Widget", "widgets", true)));
    assert_eq!(reason(&check(&i, &served()).unwrap_err()), "KindNotServed");
    // A permission may name it (its requests would find nothing to alias).
    let mut i = info();
    i.permissions.push(Permission {
        kind: gadget,
        verbs: vec![Verb::Create],
    });
    check(&i, &served()).unwrap();
}

#[test]
fn a_primary_not_served_is_refused_even_with_its_crd() {
    // Accepting it would leave a Ready plugin that reconciles nothing; the registry
    // installs the CRD first when the host installs CRDs.
    let mut i = info();
    i.primary = kind("missing.example.com/v1", "Gadget", "gadgets", true);
    assert_eq!(reason(&check(&i, &served()).unwrap_err()), "KindNotServed");
    i.crd = None;
    assert_eq!(reason(&check(&i, &served()).unwrap_err()), "KindNotServed");
}

/// The refusal's reason, as the registry names it.
fn reason(e: &KindError) -> &'static str {
    match e {
        KindError::Mismatch { .. } => "KindMismatch",
        KindError::NotServed { .. } => "KindNotServed",
    }
}
