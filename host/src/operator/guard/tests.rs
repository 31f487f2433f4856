use std::collections::HashSet;

use serde_json::json;

use super::*;
use crate::runtime::Permission;

fn pod_kind() -> KindRef {
    KindRef::pod()
}

fn info(verbs: Vec<Verb>) -> PluginInfo {
    PluginInfo {
        name: "p".into(),
        version: "1".into(),
        primary: KindRef {
            group: "app.example.com".into(),
            version: "v1alpha1".into(),
            kind: "PodReplica".into(),
            plural: "podreplicas".into(),
            namespaced: true,
        },
        crd: None,
        relations: vec![],
        permissions: vec![Permission {
            kind: pod_kind(),
            verbs,
        }],
        finalizer: None,
    }
}

fn primary() -> PrimaryRef {
    PrimaryRef {
        api_version: "app.example.com/v1alpha1".into(),
        kind: "PodReplica".into(),
        name: "pr".into(),
        namespace: Some("ns".into()),
        uid: "U".into(),
    }
}

fn new_pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "pr-pod-"}})
}

fn del(name: &str, uid: &str, ns: Option<&str>) -> ObjectRef {
    ObjectRef {
        api_version: "v1".into(),
        kind: "Pod".into(),
        namespace: ns.map(str::to_string),
        name: name.into(),
        uid: Some(uid.into()),
    }
}

fn guard(budget: usize) -> Guard {
    Guard::new(GuardConfig {
        max_actions: 3,
        foreign_deletes_per_minute: budget,
        own_pod: Some(("ns".into(), "host-pod".into())),
    })
}

#[test]
fn creates_get_namespace_and_controller_reference() {
    let steps = guard(5)
        .check(
            &info(vec![Verb::Create]),
            &primary(),
            &Plan::new().apply(&new_pod()),
            &HashSet::new(),
        )
        .unwrap();
    let Step::Create { object, .. } = &steps[0] else {
        panic!("{steps:?}")
    };
    assert_eq!(object["metadata"]["namespace"], "ns");
    assert_eq!(object["metadata"]["ownerReferences"][0]["uid"], "U");
    assert_eq!(object["metadata"]["ownerReferences"][0]["controller"], true);
}

#[test]
fn undeclared_kinds_and_verbs_are_refused() {
    let g = guard(5);
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}});
    let e = g
        .check(
            &info(vec![Verb::Create]),
            &primary(),
            &Plan::new().apply(&cm),
            &HashSet::new(),
        )
        .unwrap_err();
    assert_eq!(e.rule, "undeclared");
    let e = g
        .check(
            &info(vec![Verb::Create]),
            &primary(),
            &Plan::new().delete(del("a", "u", None)),
            &HashSet::new(),
        )
        .unwrap_err();
    assert_eq!(e.rule, "undeclared");
    assert!(e.detail.contains("delete"));
}

#[test]
fn other_namespaces_are_refused() {
    let mut pod = new_pod();
    pod["metadata"]["namespace"] = json!("kube-system");
    let e = guard(5)
        .check(
            &info(vec![Verb::Create]),
            &primary(),
            &Plan::new().apply(&pod),
            &HashSet::new(),
        )
        .unwrap_err();
    assert_eq!(e.rule, "namespace");
}

#[test]
fn the_hosts_own_pod_is_never_deleted() {
    let e = guard(5)
        .check(
            &info(vec![Verb::Delete]),
            &primary(),
            &Plan::new().delete(del("host-pod", "h", Some("ns"))),
            &HashSet::new(),
        )
        .unwrap_err();
    assert_eq!(e.rule, "own-pod");
}

#[test]
fn too_many_actions_are_refused() {
    let plan = (0..4).fold(Plan::new(), |p, _| p.apply(&new_pod()));
    let e = guard(5)
        .check(
            &info(vec![Verb::Create]),
            &primary(),
            &plan,
            &HashSet::new(),
        )
        .unwrap_err();
    assert_eq!(e.rule, "max-actions");
}

#[test]
fn foreign_deletes_spend_the_budget_owned_ones_do_not() {
    let g = guard(2);
    let i = info(vec![Verb::Delete]);
    let owned: HashSet<String> = ["mine".to_string()].into();
    for _ in 0..5 {
        g.check(
            &i,
            &primary(),
            &Plan::new().delete(del("m", "mine", None)),
            &owned,
        )
        .unwrap();
    }
    g.check(
        &i,
        &primary(),
        &Plan::new()
            .delete(del("a", "a", None))
            .delete(del("b", "b", None)),
        &owned,
    )
    .unwrap();
    let e = g
        .check(
            &i,
            &primary(),
            &Plan::new().delete(del("c", "c", None)),
            &owned,
        )
        .unwrap_err();
    assert_eq!(e.rule, "delete-budget");
}
