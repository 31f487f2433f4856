//! The CronJob decision, as the kubebuilder book's controller makes it: sort the owned Jobs
//! into active, successful and failed; report the active ones and the last scheduled time;
//! prune the oldest finished Jobs beyond the history limits; unless suspended, start the
//! most recent missed run (within `startingDeadlineSeconds`, as `concurrencyPolicy` allows)
//! and come back at the next one.

use serde::Deserialize;
use serde_json::{Value, json};
use wasmop_sdk::k8s::{
    Identity, ObjectView, delete_ref, is_controlled_by, is_terminating, parse_rfc3339, rfc3339,
};
use wasmop_sdk::{KindRef, Observed, Plan, ReconcileError};

use crate::cron::Schedule;
use crate::types::{ConcurrencyPolicy, CronJob, CronJobStatus, JobReference};

/// The relation of the owned Jobs.
pub const JOBS: &str = "jobs";
/// The annotation on each Job of the time it was scheduled for (RFC 3339).
pub const SCHEDULED_AT: &str = "batch.tutorial.kubebuilder.io/scheduled-at";
/// More missed runs than this since the last one (or the creation) is an error: the
/// schedule or the clock is wrong, or `startingDeadlineSeconds` should bound the search.
pub const MAX_MISSED: usize = 100;
/// Successful Jobs kept when `successfulJobsHistoryLimit` is absent.
pub const DEFAULT_SUCCESSFUL_LIMIT: i32 = 3;
/// Failed Jobs kept when `failedJobsHistoryLimit` is absent.
pub const DEFAULT_FAILED_LIMIT: i32 = 1;

/// What the decision reads of a Job besides its metadata, declared in its relation.
pub const READ_FIELDS: [&str; 2] = ["status.conditions", "status.startTime"];

/// The `batch/v1` Job kind.
pub fn job_kind() -> KindRef {
    KindRef {
        group: "batch".into(),
        version: "v1".into(),
        kind: "Job".into(),
        plural: "jobs".into(),
        namespaced: true,
    }
}

/// What the decision reads of a Job's status.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobStatus {
    /// The Job's conditions (`Complete`, `Failed`, ...).
    #[serde(default)]
    pub conditions: Vec<JobCondition>,
    /// When the Job started.
    pub start_time: Option<String>,
}

/// One condition of a Job, as far as the decision reads it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct JobCondition {
    /// `Complete`, `Failed`, ...
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
}

/// A Job as the decision reads it.
pub type Job = ObjectView<JobStatus>;

/// How a Job ended: `Complete` or `Failed`; `None` while it runs.
pub fn finished(job: &Job) -> Option<&str> {
    job.status.as_ref()?.conditions.iter().find_map(|c| {
        (matches!(c.type_.as_str(), "Complete" | "Failed") && c.status == "True")
            .then_some(c.type_.as_str())
    })
}

/// The time a Job was scheduled for, from its annotation.
pub fn scheduled_time(job: &Job) -> Option<i64> {
    job.metadata
        .annotations
        .as_ref()?
        .get(SCHEDULED_AT)
        .and_then(|t| parse_rfc3339(t))
}

/// The owned Jobs of one CronJob, sorted.
#[derive(Debug, Default)]
pub struct Children {
    /// Not finished yet (by name).
    pub active: Vec<Job>,
    /// Complete.
    pub successful: Vec<Job>,
    /// Failed.
    pub failed: Vec<Job>,
    /// The latest scheduled time among them all.
    pub most_recent: Option<i64>,
}

/// Sorts the Jobs controlled by the CronJob with `owner_uid`.
pub fn children(jobs: Vec<Job>, owner_uid: &str) -> Children {
    let mut out = Children::default();
    for job in jobs {
        if !is_controlled_by(&job.metadata, owner_uid) {
            continue;
        }
        if let Some(t) = scheduled_time(&job) {
            out.most_recent = out.most_recent.max(Some(t));
        }
        match finished(&job) {
            None => out.active.push(job),
            Some("Complete") => out.successful.push(job),
            Some(_) => out.failed.push(job),
        }
    }
    out.active
        .sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    out
}

/// The finished Jobs beyond `limit`, oldest first (a Job that never started is the oldest),
/// leaving out those already being deleted.
fn beyond_limit(jobs: &[Job], limit: i32) -> Vec<&Job> {
    let mut kept: Vec<&Job> = jobs
        .iter()
        .filter(|j| !is_terminating(&j.metadata))
        .collect();
    let start = |j: &Job| {
        j.status
            .as_ref()
            .and_then(|s| s.start_time.as_deref())
            .and_then(parse_rfc3339)
    };
    kept.sort_by(|a, b| {
        start(a)
            .cmp(&start(b))
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
    let surplus = kept.len().saturating_sub(limit.max(0) as usize);
    kept.truncate(surplus);
    kept
}

fn reference(job: &Job) -> JobReference {
    JobReference {
        api_version: Some("batch/v1".into()),
        kind: Some("Job".into()),
        name: job.metadata.name.clone(),
        namespace: job.metadata.namespace.clone(),
        uid: job.metadata.uid.clone(),
    }
}

/// The status with its time written the way this plugin writes it (for comparison).
fn normalised(status: Option<&CronJobStatus>) -> CronJobStatus {
    let mut s = status.cloned().unwrap_or_default();
    s.last_schedule_time = s
        .last_schedule_time
        .as_deref()
        .and_then(parse_rfc3339)
        .map(rfc3339);
    s
}

/// The runs the schedule missed: the last one and the next one after `now`.
#[derive(Debug, PartialEq, Eq)]
pub struct Runs {
    /// The most recent scheduled time not later than `now` and after `earliest`.
    pub missed: Option<i64>,
    /// The first scheduled time after `now`.
    pub next: Option<i64>,
}

/// The runs after `earliest` (the last scheduled time or the creation), no earlier than
/// `now` less the starting deadline. More than [`MAX_MISSED`] missed runs is an error.
pub fn runs(
    schedule: &Schedule,
    earliest: i64,
    deadline_seconds: Option<i64>,
    now: i64,
) -> Result<Runs, String> {
    let mut earliest = earliest;
    if let Some(d) = deadline_seconds {
        earliest = earliest.max(now - d.saturating_mul(1000));
    }
    let next = schedule.next_after(now);
    if earliest > now {
        return Ok(Runs { missed: None, next });
    }
    let mut missed = None;
    let mut count = 0;
    let mut t = schedule.next_after(earliest);
    while let Some(run) = t.filter(|r| *r <= now) {
        missed = Some(run);
        count += 1;
        if count > MAX_MISSED {
            return Err(format!(
                "too many missed start times (> {MAX_MISSED}): set or decrease \
                 .spec.startingDeadlineSeconds or check clock skew"
            ));
        }
        t = schedule.next_after(run);
    }
    Ok(Runs { missed, next })
}

/// The Job of the run scheduled at `at_ms`: the template's metadata and spec, named after
/// the CronJob and the run's time, annotated with that time, controlled by the CronJob.
pub fn new_job(owner: &Identity, template: &Value, at_ms: i64) -> Value {
    let meta = template.get("metadata");
    let labels = meta
        .and_then(|m| m.get("labels"))
        .cloned()
        .unwrap_or_else(|| json!({}));
    let mut annotations = meta
        .and_then(|m| m.get("annotations"))
        .cloned()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    annotations[SCHEDULED_AT] = json!(rfc3339(at_ms));
    let mut job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": format!("{}-{}", owner.name, at_ms.div_euclid(1000)),
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner.controller_reference()],
        },
        "spec": template.get("spec").cloned().unwrap_or_else(|| json!({})),
    });
    if let Some(ns) = &owner.namespace {
        job["metadata"]["namespace"] = json!(ns);
    }
    job
}

/// Decides what to do about one CronJob.
pub fn reconcile(observed: &Observed) -> Result<Plan, ReconcileError> {
    let cj: CronJob = observed.primary_as()?;
    let owner = Identity::of(&observed.primary)?;
    if cj.metadata.deletion_timestamp.is_some() {
        // The garbage collector removes the Jobs with their owner.
        return Ok(Plan::new());
    }
    let now = observed.now_unix_ms;
    let jobs: Vec<Job> = observed.related_as(JOBS)?;
    let children = children(jobs, &owner.uid);
    let spec = &cj.spec;
    let mut plan = Plan::new();

    // The status: the active Jobs, and the last scheduled time (never going back: a Job
    // pruned from the history still ran).
    let stored = normalised(cj.status.as_ref());
    let last = children
        .most_recent
        .max(stored.last_schedule_time.as_deref().and_then(parse_rfc3339));
    let status = CronJobStatus {
        active: children.active.iter().map(reference).collect(),
        last_schedule_time: last.map(rfc3339),
    };
    if status != stored {
        plan = plan.status(&status);
    }

    // The history: the oldest finished Jobs beyond the limits go.
    let failed_limit = spec
        .failed_jobs_history_limit
        .unwrap_or(DEFAULT_FAILED_LIMIT);
    let successful_limit = spec
        .successful_jobs_history_limit
        .unwrap_or(DEFAULT_SUCCESSFUL_LIMIT);
    for (jobs, limit, what) in [
        (&children.failed, failed_limit, "failed"),
        (&children.successful, successful_limit, "successful"),
    ] {
        for job in beyond_limit(jobs, limit) {
            let r = delete_ref("batch/v1", "Job", &job.metadata);
            plan = plan.normal(
                "SuccessfulDelete",
                format!("deleted old {what} job {}", r.name),
            );
            plan = plan.delete(r);
        }
    }

    if spec.suspend == Some(true) {
        return Ok(plan);
    }

    let schedule = match Schedule::parse(&spec.schedule) {
        Ok(s) => s,
        // Nothing to retry until the schedule is fixed (an update brings a new decision).
        Err(e) => return Ok(plan.warning("InvalidSchedule", format!("spec.schedule: {e}"))),
    };
    let created = cj
        .metadata
        .creation_timestamp
        .as_ref()
        .map(wasmop_sdk::k8s::ms_of);
    let earliest = last.or(created).unwrap_or(now);
    let runs = match runs(&schedule, earliest, spec.starting_deadline_seconds, now) {
        Ok(r) => r,
        Err(e) => return Ok(plan.warning("FailedNeedsStart", e)),
    };
    if let Some(next) = runs.next {
        plan = plan.requeue_after_ms((next - now).max(1) as u64);
    }
    let Some(missed) = runs.missed else {
        return Ok(plan);
    };
    if let Some(d) = spec.starting_deadline_seconds
        && missed + d.saturating_mul(1000) < now
    {
        return Ok(plan);
    }
    let policy = spec.concurrency_policy.unwrap_or_default();
    if policy == ConcurrencyPolicy::Forbid && !children.active.is_empty() {
        return Ok(plan);
    }
    if policy == ConcurrencyPolicy::Replace {
        for job in children
            .active
            .iter()
            .filter(|j| !is_terminating(&j.metadata))
        {
            let r = delete_ref("batch/v1", "Job", &job.metadata);
            plan = plan.normal("SuccessfulDelete", format!("deleted active job {}", r.name));
            plan = plan.delete(r);
        }
    }
    let job = new_job(&owner, &spec.job_template, missed);
    let name = job["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let exists = [&children.active, &children.successful, &children.failed]
        .into_iter()
        .flatten()
        .any(|j| j.metadata.name.as_deref() == Some(name.as_str()));
    if !exists {
        plan = plan
            .normal(
                "SuccessfulCreate",
                format!("created job {name} for {}", rfc3339(missed)),
            )
            .apply(&job);
    }
    Ok(plan)
}

#[cfg(test)]
mod tests;
