//! Unit tests of the ChaosPod decision, run natively and under wasmtime.

use serde_json::{Value, json};
use wasmop_sdk::{Observed, ReconcileError};

use super::reconcile;

const NOW: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

fn chaos(spec: Value, status: Option<Value>) -> Value {
    let mut c = json!({"apiVersion": "app.example.com/v1alpha1", "kind": "ChaosPod",
        "metadata": {"name": "chaos", "namespace": "default", "uid": "uid-chaos", "generation": 1},
        "spec": spec});
    if let Some(s) = status {
        c["status"] = s;
    }
    c
}

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")}})
}

fn terminating(name: &str) -> Value {
    let mut p = pod(name);
    p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    p
}

fn observe(primary: Value, pods: Vec<Value>, seed: u64) -> Observed {
    Observed::new(primary)
        .with_related("pods", pods)
        .at(NOW)
        .with_seed(seed)
}

fn victims(plan: &wasmop_sdk::Plan) -> Vec<String> {
    plan.deleted().map(|r| r.name.clone()).collect()
}

fn world() -> Vec<Value> {
    vec![
        pod("web-1"),
        pod("web-2"),
        pod("web-3"),
        pod("db-1"),
        pod("webby"),
    ]
}

#[test]
fn kills_only_prefix_matching_pods_with_uid_and_requeues() {
    for seed in 0..50 {
        let plan = reconcile(&observe(
            chaos(json!({"prefix": "web-", "maxKillsPerRun": 2}), None),
            world(),
            seed,
        ))
        .unwrap();
        let v = victims(&plan);
        assert_eq!(v.len(), 2);
        assert!(v.iter().all(|n| n.starts_with("web-")), "{v:?}");
        assert_eq!(
            plan.deleted().next().unwrap().uid.as_deref(),
            Some(format!("uid-{}", v[0]).as_str())
        );
        assert_eq!(plan.requeue_after_ms, Some(60_000));
        assert_eq!(plan.status.as_ref().unwrap()["totalKills"], 2);
    }
}

#[test]
fn same_seed_same_victims() {
    let spec = json!({"prefix": "web"});
    let a = victims(&reconcile(&observe(chaos(spec.clone(), None), world(), 9)).unwrap());
    let b = victims(&reconcile(&observe(chaos(spec, None), world(), 9)).unwrap());
    assert_eq!(a, b);
}

#[test]
fn no_match_and_all_terminating_kill_nothing() {
    let plan = reconcile(&observe(chaos(json!({"prefix": "nope"}), None), world(), 1)).unwrap();
    assert!(victims(&plan).is_empty());
    assert_eq!(
        plan.status.as_ref().unwrap()["lastRunTime"],
        "2026-01-01T00:00:00Z"
    );
    let plan = reconcile(&observe(
        chaos(json!({"prefix": "web"}), None),
        vec![terminating("web-1")],
        1,
    ))
    .unwrap();
    assert!(victims(&plan).is_empty());
}

#[test]
fn dry_run_reports_but_deletes_nothing() {
    let plan = reconcile(&observe(
        chaos(json!({"prefix": "web-", "dryRun": true}), None),
        world(),
        3,
    ))
    .unwrap();
    assert!(victims(&plan).is_empty());
    let status = plan.status.as_ref().unwrap();
    assert_eq!(status["totalKills"], 0);
    assert_eq!(status["history"][0]["dryRun"], true);
    assert_eq!(plan.events[0].reason, "DryRun");
}

#[test]
fn waits_for_the_interval() {
    let status = json!({"lastRunTime": "2025-12-31T23:59:30Z", "totalKills": 1, "history": []});
    let plan = reconcile(&observe(
        chaos(json!({"prefix": "web"}), Some(status)),
        world(),
        1,
    ))
    .unwrap();
    assert!(plan.is_empty());
    assert_eq!(plan.requeue_after_ms, Some(30_000));
}

#[test]
fn history_is_bounded_to_twenty() {
    let old: Vec<Value> = (0..20)
        .map(|i| json!({"name": format!("old-{i}"), "uid": "u", "time": "2025-01-01T00:00:00Z"}))
        .collect();
    let status = json!({"lastRunTime": "2025-01-01T00:00:00Z", "totalKills": 20, "history": old});
    let plan = reconcile(&observe(
        chaos(json!({"prefix": "web-", "maxKillsPerRun": 3}), Some(status)),
        world(),
        5,
    ))
    .unwrap();
    let s = plan.status.as_ref().unwrap();
    let history = s["history"].as_array().unwrap();
    assert_eq!(history.len(), 20);
    assert_eq!(history[0]["name"], "old-3");
    assert_eq!(s["totalKills"], 23);
}

#[test]
fn invalid_specs_are_reported() {
    let e = reconcile(&observe(chaos(json!({"prefix": ""}), None), vec![], 0)).unwrap_err();
    assert!(matches!(e, ReconcileError::InvalidSpec(m) if m.contains("prefix")));
    let e = reconcile(&observe(
        chaos(json!({"prefix": "a", "intervalSeconds": 0}), None),
        vec![],
        0,
    ))
    .unwrap_err();
    assert!(matches!(e, ReconcileError::InvalidSpec(m) if m.contains("intervalSeconds")));
}
