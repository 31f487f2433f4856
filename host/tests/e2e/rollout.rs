//! End to end: safe rollout. Decisions of PodReplica v1 in the article's scenario are
//! recorded and replayed (same against v1, the differences listed against v2); v2 in shadow
//! is compared on every reconcile without touching a pod, then promoted; a candidate that
//! traps is counted as faults and aborted by the host; a 50% canary over 100 PodReplicas
//! splits them by UID, each consistently on one side; a shadow of the active code itself
//! agrees and is promoted by the host.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use crate::support::uploads::*;
use crate::support::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use wasmop::rollout::canary::in_canary;

const V2_LABEL: &str = "app.example.com/plugin-version=v2";

fn pr(name: &str, size: i64) -> Value {
    json!({"apiVersion": "app.example.com/v1alpha1", "kind": "PodReplica",
           "metadata": {"name": name, "namespace": "default"}, "spec": {"size": size}})
}

fn ready_message(o: &DynamicObject) -> String {
    o.data["status"]["conditions"][0]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The WasmPlugin `podreplica` as stored.
async fn wasmplugin(client: &kube::Client) -> DynamicObject {
    Api::<DynamicObject>::namespaced_with(client.clone(), "default", &wasmplugin_resource())
        .get("podreplica")
        .await
        .unwrap()
}

/// Waits until the host ended the rollout by itself (the spec names no candidate).
async fn rollout_ended(client: &kube::Client, what: &str) {
    eventually(Duration::from_secs(60), what, || async {
        let wp = wasmplugin(client).await;
        wp.data["spec"].get("rollout").is_none().then_some(())
    })
    .await;
}

/// Names of the live pods, and how many carry v2's label.
async fn pod_names(pods: &Api<Pod>) -> (BTreeSet<String>, usize) {
    let all = pods.list(&Default::default()).await.unwrap().items;
    let live = all
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none());
    let names = live
        .clone()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    let v2 = pods
        .list(&ListParams::default().labels(V2_LABEL))
        .await
        .unwrap()
        .items
        .len();
    (names, v2)
}

/// `wasmop replay FILE DIR [extra]`: success and output.
fn replay(file: &str, dir: &std::path::Path, extra: &[&str]) -> (bool, String) {
    let file = plugin_dir().join(file);
    let mut args = vec!["replay", file.to_str().unwrap(), dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    wasmop(&args)
}

/// Waits (10 s at most) for an Event of `reason` whose note contains `needle`: the host
/// publishes it right after the spec patch that ends the rollout, so it may trail the
/// patch a test saw.
async fn event_note(client: &kube::Client, reason: &str, needle: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let notes = event_notes(client, reason).await;
        if notes.iter().any(|n| n.contains(needle)) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {reason} Event containing {needle:?} within 10 s: {notes:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The decisions of candidate v2 as the host counts them, however they went.
fn shadow_decisions(host: &Host) -> u64 {
    let (_, metrics) = host.http_get("/metrics").unwrap_or_default();
    metrics
        .lines()
        .filter(|l| {
            l.starts_with(
                "wasmop_rollout_decisions_total{plugin=\"podreplica\",candidate=\"0.1.0-v2\",",
            )
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// PodReplica's reconciles in flight (`wasmop_queue_depth`), as the host says now.
fn in_flight(host: &Host) -> Option<f64> {
    let (_, metrics) = host.http_get("/metrics")?;
    metrics
        .lines()
        .find(|l| l.starts_with("wasmop_queue_depth{plugin=\"podreplica\"}"))?
        .rsplit(' ')
        .next()?
        .parse()
        .ok()
}

/// The audit log's events from byte `from` up to a marker the test writes now (a
/// ConfigMap `marker-NAME`): everything the API server logged before it received the
/// marker, once the log holds the marker's line.
async fn audit_window(
    cluster: &Cluster,
    client: &kube::Client,
    from: u64,
    name: &str,
) -> Vec<Value> {
    let marker = format!("marker-{name}");
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), "default");
    let cm = serde_json::from_value(json!({"metadata": {"name": marker}})).unwrap();
    cms.create(&Default::default(), &cm).await.unwrap();
    eventually(
        Duration::from_secs(30),
        &format!("the marker {marker} in the audit log"),
        || async {
            let events = cluster.audit_since(from).0;
            let at = events.iter().position(|e| {
                e["objectRef"]["resource"] == "configmaps" && e["objectRef"]["name"] == *marker
            })?;
            Some(events[..at].to_vec())
        },
    )
    .await
}

fn recorded(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir.join("podreplica"))
        .map(|d| d.count())
        .unwrap_or(0)
}

fn file_names(dir: &std::path::Path) -> BTreeSet<String> {
    std::fs::read_dir(dir.join("podreplica"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect()
}

/// Waits until every named PodReplica has `size` Running pods and a Ready message ending
/// with `tag` (`""`: v1's message, no version tag).
async fn all_converged(client: &kube::Client, names: &[String], size: usize, tag: &str) {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &podreplica_resource());
    eventually(
        Duration::from_secs(180),
        &format!(
            "{} PodReplicas with {size} pods, decided by {tag:?}",
            names.len()
        ),
        || async {
            for n in names {
                let o = api.get(n).await.ok()?;
                let msg = ready_message(&o);
                let by = if tag.is_empty() {
                    !msg.contains("(v")
                } else {
                    msg.ends_with(tag)
                };
                by.then_some(())?;
                converged(client, o.metadata.uid.as_deref()?, size).await?;
            }
            Some(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn shadow_promote_abort_canary_record_and_replay() {
    let cluster = Cluster::start("rollout");
    let records = Scratch::new("records");
    let records_dir = records.0.to_str().unwrap().to_string();
    let host = Host::start(
        &cluster,
        &["podreplica.wasm"],
        &["--record", &records_dir, "--record-max", "50"],
        &[],
    );
    let client = cluster.client().await;
    wait_for_crd(&client, &podreplica_resource()).await;
    wait_for_crd(&client, &wasmplugin_resource()).await;
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &podreplica_resource());
    let wps: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &wasmplugin_resource());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let (ok, text) = push(&cluster, "podreplica", "podreplica.wasm");
    assert!(ok, "{text}");

    // Record: the article's scenario under v1 until 50 decisions are on disk.
    let article: Vec<String> = (0..5).map(|i| format!("article-{i}")).collect();
    for size in [3, 5, 2, 3, 2, 3, 2] {
        if recorded(&records.0) >= 50 {
            break;
        }
        for n in &article {
            apply(&client, &podreplica_resource(), "default", &pr(n, size))
                .await
                .unwrap();
        }
        all_converged(&client, &article, size as usize, "").await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // The scenario ends at size 2 (the shadow phase scales up from there).
    for n in &article {
        apply(&client, &podreplica_resource(), "default", &pr(n, 2))
            .await
            .unwrap();
    }
    all_converged(&client, &article, 2, "").await;
    assert!(
        recorded(&records.0) >= 50,
        "only {} decisions recorded",
        recorded(&records.0)
    );
    // The plugin's own switch turns recording off; the last 50 stay. The WasmPlugin's
    // status shows the recording while it is on, and drops it once the host has the switch.
    // The status is written by the host's reporter a moment after the cases land on disk.
    eventually(
        Duration::from_secs(60),
        "status.recording counts the 50 cases on disk",
        || async {
            let cases = wasmplugin(&client).await.data["status"]["recording"]["cases"]
                .as_u64()
                .unwrap_or_default();
            (cases >= 50).then_some(())
        },
    )
    .await;
    wps.patch(
        "podreplica",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"record": false}})),
    )
    .await
    .unwrap();
    eventually(
        Duration::from_secs(30),
        "the recording gone from the status",
        || async {
            let wp = wasmplugin(&client).await;
            wp.data["status"].get("recording").is_none().then_some(())
        },
    )
    .await;
    let snapshot = Scratch::new("replay");
    std::fs::create_dir_all(snapshot.0.join("podreplica")).unwrap();
    for e in std::fs::read_dir(records.0.join("podreplica")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), snapshot.0.join("podreplica").join(e.file_name())).unwrap();
    }
    assert_eq!(recorded(&snapshot.0), 50, "the recorder keeps at most 50");
    let kept = file_names(&records.0);
    let (ok, text) = replay("podreplica.wasm", &snapshot.0, &[]);
    println!("{text}");
    assert!(ok, "v1 replays its own decisions: {text}");
    assert!(
        text.contains("on 50 recorded decisions: 50 same, 0 different, 0 failed"),
        "{text}"
    );
    let (ok, text) = replay("podreplica_v2.wasm", &snapshot.0, &[]);
    assert!(!ok, "v2 decides differently, replay must fail: {text}");
    assert!(text.contains("different - "), "{text}");
    assert!(
        text.contains("+      message:") && text.contains("(v2)"),
        "diff shows v2's message: {text}"
    );
    assert!(text.contains(", 0 failed"), "{text}");
    let (ok, _) = replay("podreplica_v2.wasm", &snapshot.0, &["--allow-diff"]);
    assert!(ok, "--allow-diff accepts differences");

    // Shadow: v2 decides beside v1 on every reconcile; no pod changes.
    let (before, v2_before) = pod_names(&pods).await;
    assert_eq!(v2_before, 0);
    let (ok, text) = push_with(&cluster, "podreplica", "podreplica_v2.wasm", &["--shadow"]);
    assert!(ok, "{text}");
    assert!(text.contains("candidate accepted"), "{text}");
    let rollout = eventually(
        Duration::from_secs(60),
        "shadow decisions counted",
        || async {
            let wp = wasmplugin(&client).await;
            let r = wp.data["status"]["rollout"].clone();
            (r["decisions"].as_u64()? >= article.len() as u64).then_some(r)
        },
    )
    .await;
    println!(
        "shadow status: {}",
        serde_json::to_string_pretty(&rollout).unwrap()
    );
    assert_eq!(
        rollout["agreements"], 0,
        "v2's status differs on every decision"
    );
    assert_eq!(rollout["divergences"], rollout["decisions"]);
    assert_eq!(rollout["faults"], 0);
    assert_eq!(rollout["agreement"], "0%");
    let diff = rollout["lastDivergences"][0]["diff"].as_str().unwrap();
    assert!(diff.contains("(v2)"), "a readable diff: {diff}");
    let wp = wasmplugin(&client).await;
    assert_eq!(wp.data["status"]["candidate"]["mode"], "Shadow");
    assert!(
        wp.data["status"]["candidate"]["version"]
            .as_str()
            .unwrap()
            .ends_with("-v2")
    );
    // Scaling under shadow: the active version's plan is the one carried out, and only it
    // (the audit log has every pod write of the window, with the host's User-Agent). The
    // window: from before the scale to after its last decision (the status saying 3/3) has
    // ended (no reconcile in flight), closed by a marker the test writes then: the audit
    // log's lines before the marker's.
    let (_, audit_from) = cluster.audit_since(0);
    let decisions_before = shadow_decisions(&host);
    apply(
        &client,
        &podreplica_resource(),
        "default",
        &pr("article-0", 3),
    )
    .await
    .unwrap();
    all_converged(&client, &article[..1], 3, "").await;
    eventually(
        Duration::from_secs(60),
        "article-0's status says 3/3 and no reconcile is in flight",
        || async {
            let o = api.get("article-0").await.ok()?;
            (ready_message(&o) == "3/3 pods ready" && in_flight(&host) == Some(0.0)).then_some(())
        },
    )
    .await;
    let (after, v2_after) = pod_names(&pods).await;
    assert_eq!(v2_after, 0, "a shadow candidate created pods");
    let window = audit_window(&cluster, &client, audit_from, "shadow-scale").await;
    // (A create names no pod in the audit log: the host's pods have generated names.)
    let host_pod_writes: Vec<String> = window
        .iter()
        .filter(|e| {
            e["objectRef"]["resource"] == "pods"
                && e["userAgent"]
                    .as_str()
                    .is_some_and(|a| a.starts_with("wasmop/"))
        })
        .map(|e| format!("{} {}", e["verb"], e["objectRef"]["name"]))
        .collect();
    let made: Vec<&String> = after.iter().filter(|p| !before.contains(*p)).collect();
    let decisions = shadow_decisions(&host);
    println!(
        "scaling 2 -> 3 under shadow: {} audited writes in the window, the hosts' pod writes {host_pod_writes:?}, {} shadow decisions",
        window.len(),
        decisions - decisions_before
    );
    // Positive first: the candidate decided in the window, and the active version's one
    // pod create is there, for the pod that is new; then nothing else written to a pod.
    assert!(
        decisions > decisions_before,
        "the shadow decided nothing in the window ({decisions_before} -> {decisions})"
    );
    assert_eq!(made.len(), 1, "one new pod: {made:?}");
    assert!(
        host_pod_writes.iter().any(|w| w.starts_with("\"create\"")),
        "the active version's pod create audited: {host_pod_writes:?}"
    );
    assert_eq!(
        host_pod_writes.len(),
        1,
        "scaling 2 -> 3 under shadow: one pod create, nothing else: {host_pod_writes:?}"
    );
    assert!(
        before.iter().all(|p| after.contains(p)),
        "a shadow candidate deleted pods"
    );
    assert_eq!(file_names(&records.0), kept, "recording was switched off");
    let (_, metrics) = host.http_get("/metrics").unwrap();
    assert!(metrics.contains("wasmop_rollout_decisions_total{plugin=\"podreplica\",candidate=\"0.1.0-v2\",result=\"diverge\"}"), "{metrics}");

    // Promote: v2 decides every object, and new pods carry its label.
    let (ok, text) = wasmop_on(&cluster, &["promote", "podreplica"]);
    assert!(ok, "{text}");
    all_converged(&client, &article[..1], 3, "(v2)").await;
    all_converged(&client, &article[1..], 2, "(v2)").await;
    apply(
        &client,
        &podreplica_resource(),
        "default",
        &pr("article-1", 3),
    )
    .await
    .unwrap();
    all_converged(&client, &article[1..2], 3, "(v2)").await;
    assert!(
        pod_names(&pods).await.1 >= 1,
        "v2 made no pod after promotion"
    );
    eventually(
        Duration::from_secs(30),
        "rollout gone from the status",
        || async {
            let wp = wasmplugin(&client).await;
            (wp.data["spec"].get("rollout").is_none()
                && wp.data["status"].get("candidate").is_none()
                && wp.data["status"].get("rollout").is_none())
            .then_some(())
        },
    )
    .await;

    // A candidate that traps: faults counted, the host aborts it, v2 keeps working.
    let (ok, text) = push_with(
        &cluster,
        "podreplica",
        "podreplica_broken.wasm",
        &[
            "--shadow",
            "--abort-fault-percent",
            "50",
            "--abort-min-decisions",
            "5",
        ],
    );
    assert!(ok, "{text}");
    rollout_ended(&client, "the broken candidate aborted").await;
    let (_, metrics) = host.http_get("/metrics").unwrap();
    let faults = metrics
        .lines()
        .find(|l| l.starts_with("wasmop_rollout_decisions_total{plugin=\"podreplica\",candidate=\"0.1.0-broken\",result=\"fault\"}"))
        .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .unwrap_or(0);
    assert!(faults >= 5, "faults counted: {faults}\n{metrics}");
    event_note(&client, "RolloutAborted", "candidate decisions were faults").await;
    // v2 decided all along (its reconciles counted by that name), none in error.
    assert!(
        metrics.contains("wasmop_reconciles_total{plugin=\"podreplica\",version=\"0.1.0-v2\"}"),
        "the active version's reconciles:\n{metrics}"
    );
    assert!(
        !metrics
            .contains("wasmop_reconcile_errors_total{plugin=\"podreplica\",version=\"0.1.0-v2\""),
        "the active version had errors:\n{metrics}"
    );
    apply(
        &client,
        &podreplica_resource(),
        "default",
        &pr("after-abort", 1),
    )
    .await
    .unwrap();
    all_converged(&client, &["after-abort".to_string()], 1, "(v2)").await;

    // Canary: v1 active, v2 decides for 50% of 100 new PodReplicas, by UID.
    let (ok, text) = push(&cluster, "podreplica", "podreplica.wasm");
    assert!(ok, "{text}");
    let (ok, text) = push_with(
        &cluster,
        "podreplica",
        "podreplica_v2.wasm",
        &["--canary", "50"],
    );
    assert!(ok, "{text}");
    let canary: Vec<String> = (0..100).map(|i| format!("canary-{i:03}")).collect();
    let mut uids = HashMap::new();
    for n in &canary {
        let o = apply(&client, &podreplica_resource(), "default", &pr(n, 1))
            .await
            .unwrap();
        uids.insert(n.clone(), o.metadata.uid.unwrap());
    }
    let in_share: Vec<&String> = canary.iter().filter(|n| in_canary(&uids[*n], 50)).collect();
    let (by_v2, by_v1): (Vec<String>, Vec<String>) = canary
        .iter()
        .cloned()
        .partition(|n| in_canary(&uids[n], 50));
    println!("canary share: {} of 100 by UID", in_share.len());
    assert!(
        (25..=75).contains(&in_share.len()),
        "a 50% share of 100: {}",
        in_share.len()
    );
    all_converged(&client, &by_v2, 1, "(v2)").await;
    all_converged(&client, &by_v1, 1, "").await;
    // Each object's pod was made by the version that decides it.
    for n in &canary {
        let labelled = pods
            .list(&ListParams::default().labels(&format!("app.example.com/podreplica={n}")))
            .await
            .unwrap()
            .items
            .iter()
            .all(|p| {
                p.metadata
                    .labels
                    .as_ref()
                    .unwrap()
                    .contains_key("app.example.com/plugin-version")
            });
        assert_eq!(
            labelled,
            by_v2.contains(n),
            "{n}: pod made by the other version"
        );
    }
    let total = api.list(&Default::default()).await.unwrap().items;
    let expect_candidate = total
        .iter()
        .filter(|o| in_canary(o.metadata.uid.as_deref().unwrap(), 50))
        .count() as u64;
    let rollout = eventually(
        Duration::from_secs(30),
        "canary counts in the status",
        || async {
            let r = wasmplugin(&client).await.data["status"]["rollout"].clone();
            (r["objectsCandidate"].as_u64()? == expect_candidate).then_some(r)
        },
    )
    .await;
    assert_eq!(
        rollout["objectsActive"].as_u64().unwrap() + expect_candidate,
        total.len() as u64
    );
    assert_eq!(rollout["faults"], 0);

    // Abort by command: the canary's objects go back to v1.
    let (ok, text) = wasmop_on(&cluster, &["abort", "podreplica"]);
    assert!(ok, "{text}");
    all_converged(&client, &by_v2, 1, "").await;

    // A shadow of the active code itself agrees on every decision: the host promotes it.
    let (ok, text) = push_with(
        &cluster,
        "podreplica",
        "podreplica.wasm",
        &["--shadow", "--promote-after", "20"],
    );
    assert!(ok, "{text}");
    rollout_ended(&client, "the agreeing candidate promoted").await;
    event_note(&client, "RolloutPromoted", "in a row without divergence").await;
    let (_, metrics) = host.http_get("/metrics").unwrap();
    // Positive first: the 20 agreeing decisions that promoted it, by the same metric.
    let agreed = metrics
        .lines()
        .find(|l| l.starts_with("wasmop_rollout_decisions_total{plugin=\"podreplica\",candidate=\"0.1.0\",result=\"agree\"}"))
        .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .unwrap_or(0);
    assert!(
        agreed >= 20,
        "agreeing decisions counted: {agreed}\n{metrics}"
    );
    assert!(
        !metrics.contains("candidate=\"0.1.0\",result=\"diverge\""),
        "the active code diverged from itself:\n{metrics}"
    );
}
