//! End to end: the kubebuilder book's CronJob (`guests/cronjob`, contract 0.4.0) on the
//! local control plane, every minute for three minutes and more. Its webhooks are served by
//! the host: a schedule that does not parse is refused in the API server's words, a CronJob
//! written without its policies reads back defaulted, one written as v2 (a structured
//! schedule) reads back as v1 (a cron line) and the other way. Three CronJobs run side by
//! side, and a watch of every Job sees each create and delete for the whole window: `Allow`
//! with a history of 2 starts a Job every minute and keeps only the last two that finished
//! (the simulated nodes complete a Job's pods at once); `Forbid`, whose Jobs never finish
//! (suspended), starts one and no other; `Replace` deletes the running Job when the next is
//! due, so one is left. Then a stricter version is pushed: a name it refuses, accepted
//! before, is refused at once, without a restart.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::runtime::watcher;
use serde_json::json;

use crate::support::uploads::push;
use crate::support::*;

fn cronjob_resource(version: &str) -> ApiResource {
    ApiResource {
        group: "batch.tutorial.kubebuilder.io".into(),
        version: version.into(),
        api_version: format!("batch.tutorial.kubebuilder.io/{version}"),
        kind: "CronJob".into(),
        plural: "cronjobs".into(),
    }
}

/// A CronJob every minute; its Jobs `suspended` (they never finish) or not.
fn cronjob(name: &str, policy: &str, suspended: bool, history: i64) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "batch.tutorial.kubebuilder.io/v1", "kind": "CronJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedule": "* * * * *", "concurrencyPolicy": policy,
            "successfulJobsHistoryLimit": history,
            "jobTemplate": {"spec": {"suspend": suspended, "template": {"spec": {
                "restartPolicy": "OnFailure",
                "containers": [{"name": "hello", "image": "busybox:1.36",
                    "command": ["sh", "-c", "date; echo Hello from the cron job"]}]}}}}}}))
    .unwrap()
}

/// What the watch of Jobs saw, per owning CronJob: Jobs created, Jobs deleted.
#[derive(Default, Debug)]
struct Seen {
    created: BTreeMap<String, BTreeSet<String>>,
    deleted: BTreeMap<String, BTreeSet<String>>,
}

fn owner(job: &Job) -> String {
    job.metadata
        .owner_references
        .as_ref()
        .and_then(|o| o.first())
        .map(|o| o.name.clone())
        .unwrap_or_default()
}

fn watch_jobs(client: &Client) -> (Arc<Mutex<Seen>>, tokio::task::JoinHandle<()>) {
    let seen: Arc<Mutex<Seen>> = Default::default();
    let api: Api<Job> = Api::namespaced(client.clone(), "default");
    let task = {
        let seen = seen.clone();
        tokio::spawn(async move {
            let mut events = watcher(api, watcher::Config::default()).boxed();
            while let Some(Ok(e)) = events.next().await {
                let mut s = seen.lock().unwrap();
                match e {
                    watcher::Event::Apply(j) | watcher::Event::InitApply(j) => {
                        let name = j.metadata.name.clone().unwrap_or_default();
                        s.created.entry(owner(&j)).or_default().insert(name);
                    }
                    watcher::Event::Delete(j) => {
                        let name = j.metadata.name.clone().unwrap_or_default();
                        s.deleted.entry(owner(&j)).or_default().insert(name);
                    }
                    _ => {}
                }
            }
        })
    };
    (seen, task)
}

/// The Jobs of CronJob `name` now, and how many of them completed.
async fn jobs_of(client: &Client, name: &str) -> (Vec<String>, usize) {
    let api: Api<Job> = Api::namespaced(client.clone(), "default");
    let list = api.list(&Default::default()).await.unwrap();
    let mine: Vec<&Job> = list.items.iter().filter(|j| owner(j) == name).collect();
    let complete = mine
        .iter()
        .filter(|j| {
            j.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| {
                    c.iter()
                        .any(|c| c.type_ == "Complete" && c.status == "True")
                })
        })
        .count();
    let names = mine
        .iter()
        .map(|j| j.metadata.name.clone().unwrap_or_default())
        .collect();
    (names, complete)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_kubebuilder_cronjob_schedules_forbids_replaces_keeps_history_and_admits() {
    let cluster = Cluster::start("cronjob");
    let (host, _url) = Host::start_with_webhooks(&cluster, &["cronjob.wasm"]);
    let client = cluster.client().await;
    let (v1, v2) = (cronjob_resource("v1"), cronjob_resource("v2"));
    wait_for_crd(&client, &v1).await;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &v1);
    let api2: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &v2);
    let pp = PostParams::default();

    // The validating webhook: until it is registered, the API server accepts anything.
    let mut bad = cronjob("bad-schedule", "Allow", false, 2);
    bad.data["spec"]["schedule"] = json!("every minute");
    let refused = eventually(
        Duration::from_secs(60),
        "a bad schedule refused",
        || async {
            match api.create(&pp, &bad).await {
                Err(e) => Some(e.to_string()),
                Ok(_) => {
                    let _ = api.delete("bad-schedule", &Default::default()).await;
                    None
                }
            }
        },
    )
    .await;
    println!("refused: {refused}");
    assert!(
        refused.contains("CronJob.batch.tutorial.kubebuilder.io \"bad-schedule\" is invalid: spec.schedule: Invalid value: \"every minute\""),
        "{refused}"
    );

    // The mutating webhook: the policies filled in.
    let mut bare = cronjob("defaulted", "Allow", false, 2);
    let spec = bare.data["spec"].as_object_mut().unwrap();
    spec.remove("concurrencyPolicy");
    spec.remove("successfulJobsHistoryLimit");
    spec.insert("suspend".into(), json!(true));
    let stored = api.create(&pp, &bare).await.unwrap();
    assert_eq!(stored.data["spec"]["concurrencyPolicy"], "Allow");
    assert_eq!(stored.data["spec"]["successfulJobsHistoryLimit"], 3);
    assert_eq!(stored.data["spec"]["failedJobsHistoryLimit"], 1);

    // Conversion: v2 in, v1 and v2 out.
    let structured: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "batch.tutorial.kubebuilder.io/v2", "kind": "CronJob",
        "metadata": {"name": "structured", "namespace": "default"},
        "spec": {"schedule": {"minute": "*/5", "hour": "9-17"}, "suspend": true,
            "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox:1.36"}]}}}}}}))
    .unwrap();
    api2.create(&pp, &structured).await.unwrap();
    let as_v1 = api.get("structured").await.unwrap();
    assert_eq!(as_v1.data["spec"]["schedule"], "*/5 9-17 * * *");
    let as_v2 = api2.get("structured").await.unwrap();
    assert_eq!(
        as_v2.data["spec"]["schedule"],
        json!({"minute": "*/5", "hour": "9-17", "dayOfMonth": "*", "month": "*", "dayOfWeek": "*"})
    );

    // Three CronJobs every minute, watched for three schedules and more.
    let (seen, watching) = watch_jobs(&client);
    for c in [
        cronjob("allow-history", "Allow", false, 2),
        cronjob("forbid", "Forbid", true, 3),
        cronjob("replace", "Replace", true, 3),
    ] {
        api.create(&pp, &c).await.unwrap();
    }
    let created = |name: &str| {
        seen.lock()
            .unwrap()
            .created
            .get(name)
            .map_or(0, BTreeSet::len)
    };
    eventually(
        Duration::from_secs(330),
        "four runs of allow-history and three of replace",
        || async { (created("allow-history") >= 4 && created("replace") >= 3).then_some(()) },
    )
    .await;
    // Past the last run's own decisions (its history pruned, its status written).
    let settled = eventually(
        Duration::from_secs(30),
        "allow-history keeps two finished Jobs",
        || async {
            let (names, complete) = jobs_of(&client, "allow-history").await;
            (complete <= 2 && names.len() <= 3 && complete >= 2).then_some(names)
        },
    )
    .await;
    let (made, gone) = {
        let s = seen.lock().unwrap();
        (s.created.clone(), s.deleted.clone())
    };
    println!("jobs created: {made:?}\njobs deleted: {gone:?}");
    // Allow: one Job per minute, the oldest finished ones deleted.
    assert!(
        gone.get("allow-history").map_or(0, BTreeSet::len) >= 1,
        "history pruned"
    );
    assert!(settled.len() <= 3);
    // Forbid: the first Job never finishes, so no other starts.
    assert_eq!(
        made.get("forbid").map_or(0, BTreeSet::len),
        1,
        "Forbid started another Job: {:?}",
        made.get("forbid")
    );
    // Replace: each run deletes the one before; every Job but the last is gone.
    let replaced = &made["replace"];
    let deleted = gone.get("replace").cloned().unwrap_or_default();
    let left: Vec<&String> = replaced.difference(&deleted).collect();
    assert_eq!(left.len(), 1, "Replace left {left:?} of {replaced:?}");
    let (names, _) = jobs_of(&client, "replace").await;
    assert_eq!(names.len(), 1, "{names:?}");
    let status = api.get("allow-history").await.unwrap().data["status"].clone();
    assert!(status["lastScheduleTime"].is_string(), "{status}");
    watching.abort();

    // A stricter version, pushed: a 30-character name, fine for the first, is refused at once.
    let long = "a-name-of-thirty-characters-xy";
    assert_eq!(long.len(), 30);
    let mut first = cronjob(long, "Allow", true, 1);
    first.data["spec"]["suspend"] = json!(true);
    api.create(&pp, &first).await.unwrap();
    let (ok, text) = push(&cluster, "cronjob", "cronjob_strict.wasm");
    assert!(ok, "{text}");
    let mut second = first.clone();
    second.metadata.name = Some(format!("{}z", &long[..29]));
    let second_name = second.metadata.name.clone().unwrap();
    let refused = eventually(
        Duration::from_secs(60),
        "the stricter version judges",
        || async {
            match api.create(&pp, &second).await {
                Err(e) => Some(e.to_string()),
                Ok(_) => {
                    let _ = api.delete(&second_name, &Default::default()).await;
                    None
                }
            }
        },
    )
    .await;
    assert!(refused.contains("metadata.name"), "{refused}");
    assert!(
        refused.contains("must be no more than 20 characters"),
        "{refused}"
    );
    drop(host);
}
