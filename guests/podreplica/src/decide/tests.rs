//! Unit tests of the PodReplica decision. They run natively and, compiled to
//! `wasm32-wasip2`, under wasmtime through `wasmop wasi-run`.

use serde_json::{Value, json};
use wasmop_sdk::{Action, Observed, ReconcileError};

use super::reconcile;

const UID: &str = "uid-pr";
const NOW: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

fn primary(size: i64, status: Option<Value>) -> Value {
    let mut p = json!({
        "apiVersion": "app.example.com/v1alpha1", "kind": "PodReplica",
        "metadata": {"name": "example-podreplica", "namespace": "default", "uid": UID, "generation": 1},
        "spec": {"size": size}
    });
    if let Some(s) = status {
        p["status"] = s;
    }
    p
}

fn pod(name: &str, owner: Option<&str>, phase: &str, ready: bool, created: &str) -> Value {
    let mut p = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
            "creationTimestamp": created,
            "labels": {"app.example.com/podreplica": "example-podreplica"}},
        "spec": {"containers": [{"name": "busybox", "image": "busybox"}]},
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}
    });
    if let Some(uid) = owner {
        p["metadata"]["ownerReferences"] = json!([{"apiVersion": "app.example.com/v1alpha1",
            "kind": "PodReplica", "name": "example-podreplica", "uid": uid, "controller": true}]);
    }
    p
}

fn running(name: &str) -> Value {
    pod(name, Some(UID), "Running", true, "2026-01-01T00:00:00Z")
}

fn observe(primary: Value, pods: Vec<Value>) -> Observed {
    Observed::new(primary).with_related("pods", pods).at(NOW)
}

fn creates(plan: &wasmop_sdk::Plan) -> usize {
    plan.applied().count()
}

fn deleted_names(plan: &wasmop_sdk::Plan) -> Vec<String> {
    plan.deleted().map(|r| r.name.clone()).collect()
}

#[test]
fn first_reconcile_creates_all_pods_in_one_plan() {
    let plan = reconcile(&observe(primary(4, None), vec![])).unwrap();
    assert_eq!(creates(&plan), 4);
    let pod = plan.applied().next().unwrap();
    assert_eq!(pod["metadata"]["generateName"], "example-podreplica-pod-");
    assert_eq!(pod["metadata"]["ownerReferences"][0]["uid"], UID);
    assert_eq!(pod["metadata"]["ownerReferences"][0]["controller"], true);
    assert_eq!(
        pod["metadata"]["labels"]["app.example.com/podreplica"],
        "example-podreplica"
    );
    assert_eq!(pod["spec"]["containers"][0]["image"], "busybox");
    assert_eq!(
        pod["spec"]["containers"][0]["command"],
        json!(["sleep", "3600"])
    );
    assert!(
        plan.status.is_none(),
        "a plan creating pods leaves the status to the decision that sees them"
    );
}

#[test]
fn the_pods_once_seen_are_listed_in_the_status() {
    let pods = vec![
        pod("a", Some(UID), "Pending", false, "2026-01-01T00:00:01Z"),
        pod("b", Some(UID), "Pending", false, "2026-01-01T00:00:01Z"),
    ];
    let plan = reconcile(&observe(primary(2, None), pods)).unwrap();
    assert_eq!(creates(&plan), 0);
    let status = plan.status.as_ref().unwrap();
    assert_eq!(status["pods"], json!(["a", "b"]));
    assert_eq!(status["replicas"], 2);
    assert_eq!(status["readyReplicas"], 0);
    assert_eq!(status["conditions"][0]["reason"], "PodsNotReady");
    // One pod gone: the replacement is created, the status waits for it.
    let plan = reconcile(&observe(
        primary(2, Some(status.clone())),
        vec![running("a")],
    ))
    .unwrap();
    assert_eq!(creates(&plan), 1);
    assert!(plan.status.is_none());
}

#[test]
fn scale_down_deletes_not_ready_then_newest_with_uid() {
    let pods = vec![
        pod("a", Some(UID), "Running", true, "2026-01-01T00:00:01Z"),
        pod("b", Some(UID), "Running", true, "2026-01-01T00:00:03Z"),
        pod("c", Some(UID), "Pending", false, "2026-01-01T00:00:00Z"),
        pod("d", Some(UID), "Running", true, "2026-01-01T00:00:02Z"),
    ];
    let plan = reconcile(&observe(primary(2, None), pods)).unwrap();
    assert_eq!(deleted_names(&plan), ["c", "b"]);
    assert_eq!(plan.deleted().next().unwrap().uid.as_deref(), Some("uid-c"));
    assert_eq!(plan.status.as_ref().unwrap()["pods"], json!(["a", "d"]));
    assert_eq!(creates(&plan), 0);
}

#[test]
fn size_zero_deletes_everything_owned() {
    let plan = reconcile(&observe(primary(0, None), vec![running("a"), running("b")])).unwrap();
    assert_eq!(deleted_names(&plan).len(), 2);
    assert_eq!(
        plan.status.as_ref().unwrap()["conditions"][0]["status"],
        "True"
    );
}

#[test]
fn terminating_pods_are_neither_counted_nor_deleted_again() {
    let mut t = running("t");
    t["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    let plan = reconcile(&observe(primary(2, None), vec![running("a"), t])).unwrap();
    assert_eq!(creates(&plan), 1);
    assert!(deleted_names(&plan).is_empty());
}

#[test]
fn finished_pods_are_replaced() {
    let failed = pod("f", Some(UID), "Failed", false, "2026-01-01T00:00:00Z");
    let done = pod("s", Some(UID), "Succeeded", false, "2026-01-01T00:00:00Z");
    let plan = reconcile(&observe(primary(2, None), vec![failed, done])).unwrap();
    assert_eq!(creates(&plan), 2);
    assert_eq!(deleted_names(&plan), ["f", "s"]);
}

#[test]
fn foreign_pods_with_the_same_labels_are_ignored() {
    let foreign = pod("x", None, "Running", true, "2026-01-01T00:00:00Z");
    let other_owner = pod(
        "y",
        Some("someone-else"),
        "Running",
        true,
        "2026-01-01T00:00:00Z",
    );
    let plan = reconcile(&observe(primary(1, None), vec![foreign, other_owner])).unwrap();
    assert_eq!(creates(&plan), 1);
    assert!(deleted_names(&plan).is_empty());
}

#[test]
fn unchanged_world_gives_an_empty_plan() {
    let world = vec![running("a"), running("b")];
    let first = reconcile(&observe(primary(2, None), world.clone())).unwrap();
    let status = first.status.clone().unwrap();
    let again = reconcile(&observe(primary(2, Some(status)), world).at(NOW + 60_000)).unwrap();
    assert!(again.is_empty(), "{again:?}");
}

#[test]
fn invalid_size_is_an_invalid_spec() {
    let err = reconcile(&observe(primary(101, None), vec![])).unwrap_err();
    assert!(matches!(err, ReconcileError::InvalidSpec(m) if m.contains("101")));
    let err = reconcile(&observe(primary(-1, None), vec![])).unwrap_err();
    assert!(matches!(err, ReconcileError::InvalidSpec(_)));
}

#[test]
fn custom_image_and_command_are_used() {
    let mut p = primary(1, None);
    p["spec"]["image"] = json!("alpine:3");
    p["spec"]["command"] = json!(["sh", "-c", "sleep 10"]);
    let plan = reconcile(&observe(p, vec![])).unwrap();
    let Action::Apply(pod) = &plan.actions[0] else {
        panic!("expected an apply")
    };
    assert_eq!(pod["spec"]["containers"][0]["image"], "alpine:3");
    assert_eq!(pod["spec"]["containers"][0]["command"][2], "sleep 10");
}

#[test]
fn a_deleted_podreplica_gets_an_empty_plan() {
    let mut p = primary(3, None);
    p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    assert!(reconcile(&observe(p, vec![])).unwrap().is_empty());
}
