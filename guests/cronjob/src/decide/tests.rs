//! Unit tests of the CronJob decision.

use serde_json::{Value, json};
use wasmop_sdk::k8s::parse_rfc3339;
use wasmop_sdk::{Observed, Plan};

use super::*;

const UID: &str = "uid-cj";

fn ms(t: &str) -> i64 {
    parse_rfc3339(t).unwrap()
}

fn cronjob(spec: Value, status: Option<Value>) -> Value {
    let mut base = json!({"schedule": "*/1 * * * *",
        "jobTemplate": {"metadata": {"labels": {"app": "sleeper"}},
            "spec": {"template": {"spec": {"restartPolicy": "OnFailure",
                "containers": [{"name": "hello", "image": "busybox", "args": ["date"]}]}}}}});
    for (k, v) in spec.as_object().unwrap() {
        base[k] = v.clone();
    }
    let mut c = json!({
        "apiVersion": "batch.tutorial.kubebuilder.io/v1", "kind": "CronJob",
        "metadata": {"name": "cronjob-sample", "namespace": "default", "uid": UID,
            "generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": base
    });
    if let Some(s) = status {
        c["status"] = s;
    }
    c
}

/// A Job of the CronJob scheduled at `at`; `state`: `Active`, `Complete` or `Failed`.
fn job(at: &str, state: &str, started: Option<&str>) -> Value {
    let secs = ms(at) / 1000;
    let mut j = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": format!("cronjob-sample-{secs}"), "namespace": "default",
            "uid": format!("uid-{secs}"),
            "annotations": {SCHEDULED_AT: at},
            "ownerReferences": [{"apiVersion": "batch.tutorial.kubebuilder.io/v1",
                "kind": "CronJob", "name": "cronjob-sample", "uid": UID, "controller": true}]},
        "status": {}
    });
    if state != "Active" {
        j["status"]["conditions"] = json!([{"type": state, "status": "True"}]);
    }
    if let Some(s) = started {
        j["status"]["startTime"] = json!(s);
    }
    j
}

fn decide(primary: Value, jobs: Vec<Value>, now: &str) -> Plan {
    reconcile(&Observed::new(primary).with_related(JOBS, jobs).at(ms(now))).unwrap()
}

fn created(plan: &Plan) -> Vec<String> {
    plan.applied()
        .map(|j| j["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

fn deleted(plan: &Plan) -> Vec<String> {
    plan.deleted().map(|r| r.name.clone()).collect()
}

#[test]
fn a_due_run_creates_its_job_and_requeues_at_the_next() {
    let plan = decide(cronjob(json!({}), None), vec![], "2026-01-01T00:01:30Z");
    assert_eq!(created(&plan), ["cronjob-sample-1767225660"]);
    let j = plan.applied().next().unwrap();
    assert_eq!(
        j["metadata"]["annotations"][SCHEDULED_AT],
        "2026-01-01T00:01:00Z"
    );
    assert_eq!(j["metadata"]["labels"]["app"], "sleeper");
    assert_eq!(j["metadata"]["ownerReferences"][0]["uid"], UID);
    assert_eq!(j["metadata"]["ownerReferences"][0]["controller"], true);
    assert_eq!(j["spec"]["template"]["spec"]["restartPolicy"], "OnFailure");
    assert_eq!(plan.requeue_after_ms, Some(30_000));
    // No Job yet: the status has nothing to say.
    assert!(plan.status.is_none());
}

#[test]
fn only_the_most_recent_missed_run_starts() {
    let plan = decide(cronjob(json!({}), None), vec![], "2026-01-01T00:10:00Z");
    assert_eq!(created(&plan), ["cronjob-sample-1767226200"]);
    assert_eq!(plan.requeue_after_ms, Some(60_000));
}

#[test]
fn nothing_due_requeues_until_the_next_run() {
    let plan = decide(
        cronjob(json!({"schedule": "0 * * * *"}), None),
        vec![],
        "2026-01-01T00:20:00Z",
    );
    assert!(created(&plan).is_empty());
    assert_eq!(plan.requeue_after_ms, Some(40 * 60_000));
}

#[test]
fn the_status_lists_active_jobs_and_the_last_schedule_time() {
    let jobs = vec![
        job(
            "2026-01-01T00:01:00Z",
            "Complete",
            Some("2026-01-01T00:01:01Z"),
        ),
        job(
            "2026-01-01T00:02:00Z",
            "Active",
            Some("2026-01-01T00:02:01Z"),
        ),
    ];
    let plan = decide(cronjob(json!({}), None), jobs, "2026-01-01T00:02:30Z");
    let status = plan.status.as_ref().unwrap();
    assert_eq!(status["lastScheduleTime"], "2026-01-01T00:02:00Z");
    assert_eq!(
        status["active"],
        json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "cronjob-sample-1767225720",
            "namespace": "default", "uid": "uid-1767225720"}])
    );
    assert!(created(&plan).is_empty());
    // Seen again with that status: no write.
    let again = decide(
        cronjob(json!({}), Some(status.clone())),
        vec![job("2026-01-01T00:02:00Z", "Active", None)],
        "2026-01-01T00:02:30Z",
    );
    assert!(again.status.is_none());
}

#[test]
fn policies_when_a_run_is_due_while_one_is_active() {
    let active = || vec![job("2026-01-01T00:01:00Z", "Active", None)];
    // (policy, created, deleted)
    let table: [(&str, &[&str], &[&str]); 3] = [
        ("Allow", &["cronjob-sample-1767225720"], &[]),
        ("Forbid", &[], &[]),
        (
            "Replace",
            &["cronjob-sample-1767225720"],
            &["cronjob-sample-1767225660"],
        ),
    ];
    for (policy, want_created, want_deleted) in table {
        let plan = decide(
            cronjob(json!({"concurrencyPolicy": policy}), None),
            active(),
            "2026-01-01T00:02:00Z",
        );
        assert_eq!(created(&plan), want_created, "{policy}");
        assert_eq!(deleted(&plan), want_deleted, "{policy}");
        assert_eq!(plan.requeue_after_ms, Some(60_000), "{policy}");
    }
    // Replace deletes before it creates, with the Job's UID as precondition.
    let plan = decide(
        cronjob(json!({"concurrencyPolicy": "Replace"}), None),
        active(),
        "2026-01-01T00:02:00Z",
    );
    assert!(matches!(plan.actions[0], wasmop_sdk::Action::Delete(_)));
    assert_eq!(
        plan.deleted().next().unwrap().uid.as_deref(),
        Some("uid-1767225660")
    );
    // Forbid starts the run once the active Job has finished.
    let plan = decide(
        cronjob(json!({"concurrencyPolicy": "Forbid"}), None),
        vec![job("2026-01-01T00:01:00Z", "Complete", None)],
        "2026-01-01T00:02:00Z",
    );
    assert_eq!(created(&plan), ["cronjob-sample-1767225720"]);
}

#[test]
fn suspended_creates_nothing_and_does_not_requeue_but_still_prunes() {
    let jobs = vec![
        job(
            "2026-01-01T00:01:00Z",
            "Failed",
            Some("2026-01-01T00:01:01Z"),
        ),
        job(
            "2026-01-01T00:02:00Z",
            "Failed",
            Some("2026-01-01T00:02:01Z"),
        ),
    ];
    let plan = decide(
        cronjob(json!({"suspend": true}), None),
        jobs,
        "2026-01-01T00:10:00Z",
    );
    assert!(created(&plan).is_empty());
    assert_eq!(deleted(&plan), ["cronjob-sample-1767225660"]);
    assert_eq!(plan.requeue_after_ms, None);
}

#[test]
fn starting_deadline_bounds_the_missed_runs() {
    // Hourly, last run at 00:00, now 01:00:30: the 01:00 run is 30 s late. As in the
    // tutorial, runs are searched strictly after `now` less the deadline.
    let status = json!({"lastScheduleTime": "2026-01-01T00:00:00Z"});
    let table = [
        (None, true),
        (Some(60), true),
        (Some(31), true),
        (Some(30), false),
        (Some(29), false),
        (Some(0), false),
    ];
    for (deadline, runs) in table {
        let mut spec = json!({"schedule": "0 * * * *"});
        if let Some(d) = deadline {
            spec["startingDeadlineSeconds"] = json!(d);
        }
        let plan = decide(
            cronjob(spec, Some(status.clone())),
            vec![],
            "2026-01-01T01:00:30Z",
        );
        let want: &[&str] = if runs {
            &["cronjob-sample-1767229200"]
        } else {
            &[]
        };
        assert_eq!(created(&plan), want, "deadline {deadline:?}");
        assert_eq!(plan.requeue_after_ms, Some(3_570_000), "{deadline:?}");
    }
}

#[test]
fn too_many_missed_runs_is_a_warning_without_requeue() {
    // Every minute, created two hours ago, never run: 120 missed.
    let plan = decide(cronjob(json!({}), None), vec![], "2026-01-01T02:00:00Z");
    assert!(created(&plan).is_empty());
    assert_eq!(plan.events[0].reason, "FailedNeedsStart");
    assert_eq!(plan.requeue_after_ms, None);
    // A deadline bounds the search: the last minute's run starts.
    let plan = decide(
        cronjob(json!({"startingDeadlineSeconds": 200}), None),
        vec![],
        "2026-01-01T02:00:00Z",
    );
    assert_eq!(created(&plan), ["cronjob-sample-1767232800"]);
}

#[test]
fn history_limits_prune_the_oldest_finished_jobs() {
    let jobs = || {
        vec![
            job(
                "2026-01-01T00:03:00Z",
                "Complete",
                Some("2026-01-01T00:03:01Z"),
            ),
            job(
                "2026-01-01T00:01:00Z",
                "Complete",
                Some("2026-01-01T00:01:01Z"),
            ),
            job("2026-01-01T00:02:00Z", "Complete", None),
            job(
                "2026-01-01T00:04:00Z",
                "Complete",
                Some("2026-01-01T00:04:01Z"),
            ),
            job(
                "2026-01-01T00:05:00Z",
                "Failed",
                Some("2026-01-01T00:05:01Z"),
            ),
            job(
                "2026-01-01T00:06:00Z",
                "Failed",
                Some("2026-01-01T00:06:01Z"),
            ),
        ]
    };
    // (successful limit, failed limit, deleted): a Job that never started is the oldest.
    let table: [(Option<i32>, Option<i32>, &[&str]); 3] = [
        (
            None,
            None,
            &["cronjob-sample-1767225900", "cronjob-sample-1767225720"],
        ),
        (
            Some(0),
            Some(0),
            &[
                "cronjob-sample-1767225900",
                "cronjob-sample-1767225960",
                "cronjob-sample-1767225720",
                "cronjob-sample-1767225660",
                "cronjob-sample-1767225780",
                "cronjob-sample-1767225840",
            ],
        ),
        (Some(10), Some(2), &[]),
    ];
    for (successful, failed, want) in table {
        let mut spec = json!({"suspend": true});
        if let Some(s) = successful {
            spec["successfulJobsHistoryLimit"] = json!(s);
        }
        if let Some(f) = failed {
            spec["failedJobsHistoryLimit"] = json!(f);
        }
        let plan = decide(cronjob(spec, None), jobs(), "2026-01-01T00:06:30Z");
        assert_eq!(deleted(&plan), want, "{successful:?} {failed:?}");
    }
}

#[test]
fn pruned_history_keeps_the_last_schedule_time() {
    // All Jobs gone (history limit 0), the status remembers the last run: nothing is due.
    let status = json!({"lastScheduleTime": "2026-01-01T00:05:00Z"});
    let plan = decide(
        cronjob(json!({}), Some(status)),
        vec![],
        "2026-01-01T00:05:30Z",
    );
    assert!(created(&plan).is_empty());
    assert!(plan.status.is_none());
    assert_eq!(plan.requeue_after_ms, Some(30_000));
}

#[test]
fn foreign_and_terminating_jobs() {
    let mut foreign = job("2026-01-01T00:01:00Z", "Active", None);
    foreign["metadata"]["ownerReferences"][0]["uid"] = json!("someone-else");
    let plan = decide(
        cronjob(json!({"concurrencyPolicy": "Forbid"}), None),
        vec![foreign],
        "2026-01-01T00:02:00Z",
    );
    assert_eq!(created(&plan), ["cronjob-sample-1767225720"]);
    // A Job already being deleted is not deleted again.
    let mut going = job("2026-01-01T00:01:00Z", "Active", None);
    going["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:01:59Z");
    let plan = decide(
        cronjob(json!({"concurrencyPolicy": "Replace"}), None),
        vec![going],
        "2026-01-01T00:02:00Z",
    );
    assert!(deleted(&plan).is_empty());
    assert_eq!(created(&plan), ["cronjob-sample-1767225720"]);
}

#[test]
fn an_invalid_schedule_warns_and_waits_for_a_fix() {
    let plan = decide(
        cronjob(json!({"schedule": "every minute"}), None),
        vec![],
        "2026-01-01T00:02:00Z",
    );
    assert!(created(&plan).is_empty());
    assert_eq!(plan.events[0].reason, "InvalidSchedule");
    assert_eq!(plan.requeue_after_ms, None);
}

#[test]
fn a_cronjob_being_deleted_is_left_alone() {
    let mut c = cronjob(json!({}), None);
    c["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:30Z");
    assert!(decide(c, vec![], "2026-01-01T00:05:00Z").is_empty());
}

#[test]
fn runs_finds_the_last_missed_and_the_next() {
    let s = Schedule::parse("*/10 * * * *").unwrap();
    let r = runs(
        &s,
        ms("2026-01-01T00:00:00Z"),
        None,
        ms("2026-01-01T00:35:00Z"),
    )
    .unwrap();
    assert_eq!(r.missed, Some(ms("2026-01-01T00:30:00Z")));
    assert_eq!(r.next, Some(ms("2026-01-01T00:40:00Z")));
    // Created in the future (clock skew): nothing missed.
    let r = runs(
        &s,
        ms("2026-01-01T01:00:00Z"),
        None,
        ms("2026-01-01T00:35:00Z"),
    )
    .unwrap();
    assert_eq!(r.missed, None);
}
