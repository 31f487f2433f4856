//! End to end: two host replicas with leader election; one acts while the other keeps warm
//! caches for a whole Lease duration (a watch of the Lease sees the leader renew throughout,
//! the standby never holds it and reconciles nothing); kill the leader and the other takes
//! over within the lease duration. A leader whose lease is taken writes nothing from then
//! until that lease has expired and it holds the Lease again (the audit log of the whole
//! window), then writes at once.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::*;
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

/// The Lease the replicas share.
const LEASE: &str = "wasmop-leader";
/// The replicas' `--lease-seconds`.
const LEASE_SECONDS: u32 = 4;

fn podreplica(size: i64) -> serde_json::Value {
    json!({"apiVersion": "app.example.com/v1alpha1", "kind": "PodReplica",
           "metadata": {"name": "ha", "namespace": "default"}, "spec": {"size": size}})
}

/// Writes the host's Lease as held by `holder`, renewed now (retried on conflict).
async fn steal_lease(client: &kube::Client, holder: &str, seconds: i32) {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    let api: kube::Api<Lease> = kube::Api::namespaced(client.clone(), "default");
    for _ in 0..20 {
        let mut lease = api.get(LEASE).await.unwrap();
        let spec = lease.spec.get_or_insert_default();
        spec.holder_identity = Some(holder.into());
        spec.lease_duration_seconds = Some(seconds);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        if api
            .replace(LEASE, &Default::default(), &lease)
            .await
            .is_ok()
        {
            return;
        }
    }
    panic!("could not take the lease");
}

/// One state of the Lease as the watch saw it.
#[derive(Debug, Clone)]
struct Seen {
    /// When the watch delivered it.
    at: Instant,
    holder: String,
    renewed: Option<Timestamp>,
    acquired: Option<Timestamp>,
}

/// A watch of the replicas' Lease for the whole test: every state it went through.
struct LeaseWatch {
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl LeaseWatch {
    fn start(client: &kube::Client) -> LeaseWatch {
        let api: kube::Api<Lease> = kube::Api::namespaced(client.clone(), "default");
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let log = seen.clone();
        let task = tokio::spawn(async move {
            let config = watcher::Config::default().fields(&format!("metadata.name={LEASE}"));
            let mut events = watcher(api, config)
                .default_backoff()
                .applied_objects()
                .boxed();
            while let Some(event) = events.next().await {
                let Ok(lease) = event else { continue };
                let spec = lease.spec.unwrap_or_default();
                log.lock().unwrap().push(Seen {
                    at: Instant::now(),
                    holder: spec.holder_identity.unwrap_or_default(),
                    renewed: spec.renew_time.map(|t| t.0),
                    acquired: spec.acquire_time.map(|t| t.0),
                });
            }
        });
        LeaseWatch { seen, task }
    }

    /// The states seen at or after `from`.
    fn since(&self, from: Instant) -> Vec<Seen> {
        let seen = self.seen.lock().unwrap();
        seen.iter().filter(|s| s.at >= from).cloned().collect()
    }

    /// Waits (`within`) for the first state at or after `from` that `pick` accepts.
    async fn first(
        &self,
        from: Instant,
        within: Duration,
        what: &str,
        pick: impl Fn(&Seen) -> bool,
    ) -> Seen {
        eventually(within, what, || {
            std::future::ready(self.since(from).into_iter().find(|s| pick(s)))
        })
        .await
    }
}

impl Drop for LeaseWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The host's metric lines starting with `prefix`, summed; `None` when there is none.
fn metric(host: &Host, prefix: &str) -> Option<f64> {
    let (_, text) = host.http_get("/metrics")?;
    let values: Vec<f64> = text
        .lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect();
    (!values.is_empty()).then(|| values.iter().sum())
}

const RECONCILES: &str = "wasmop_reconciles_total{plugin=\"podreplica\"";

/// Whether an audit event is a write (the audit policy also logs PodReplica lists).
fn is_write(e: &serde_json::Value) -> bool {
    ["create", "update", "patch", "delete", "deletecollection"]
        .iter()
        .any(|v| e["verb"] == *v)
}

fn by_a_host(e: &serde_json::Value) -> bool {
    e["userAgent"]
        .as_str()
        .is_some_and(|a| a.starts_with("wasmop/"))
}

fn received(e: &serde_json::Value) -> Timestamp {
    e["requestReceivedTimestamp"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("an audit event without its time: {e}"))
}

fn write_of(e: &serde_json::Value) -> String {
    format!(
        "{} {} {}",
        e["verb"], e["objectRef"]["resource"], e["objectRef"]["name"]
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn standby_takes_over_within_the_lease() {
    let cluster = Cluster::start("leader");
    let client = cluster.client().await;
    let lease = LeaseWatch::start(&client);
    let mut a = Host::start_replica(&cluster, &["podreplica.wasm"], "replica-a", LEASE_SECONDS);
    let ar = podreplica_resource();
    wait_for_crd(&client, &ar).await;
    eventually(Duration::from_secs(60), "replica a leads", || async {
        a.leads().then_some(())
    })
    .await;
    let mut b = Host::start_replica(&cluster, &["podreplica.wasm"], "replica-b", LEASE_SECONDS);
    let pr = apply(&client, &ar, "default", &podreplica(2))
        .await
        .unwrap();
    let uid = pr.metadata.uid.unwrap();
    eventually(Duration::from_secs(60), "2 pods by the leader", || {
        converged(&client, &uid, 2)
    })
    .await;
    // Warm standby: its caches are synced while it waits to lead. (The leader's two pods
    // can be there before the standby has even listed: wait for its sync, never assume it.)
    eventually(
        Duration::from_secs(60),
        "the standby's caches warm",
        || async { b.log_text().contains("caches synced").then_some(()) },
    )
    .await;
    // For a whole Lease duration from then, as the Lease itself says it: the watch sees a
    // renew it in every state, and a renewal delivered a whole duration after the window
    // opened ends it (a standby able to take the Lease had all that time to do it).
    let warm = Instant::now();
    let seconds = kube::Api::<Lease>::namespaced(client.clone(), "default")
        .get(LEASE)
        .await
        .unwrap()
        .spec
        .and_then(|s| s.lease_duration_seconds)
        .unwrap();
    assert_eq!(
        seconds, LEASE_SECONDS as i32,
        "the Lease as --lease-seconds wrote it"
    );
    let window = Duration::from_secs(seconds as u64);
    let mut samples = 0;
    let mut standby_led = 0;
    let end = loop {
        samples += 1;
        if b.leads() {
            standby_led += 1;
        }
        if let Some(end) = lease
            .since(warm)
            .into_iter()
            .find(|s| s.at >= warm + window)
        {
            break end;
        }
        assert!(
            warm.elapsed() < window * 5,
            "no Lease renewal seen {:?} after the window opened",
            warm.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let states = lease.since(warm);
    let renewals = states
        .iter()
        .filter(|s| s.at <= end.at)
        .map(|s| s.renewed)
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    println!(
        "standby window {:?}: {renewals} renewals by the leader, {samples} samples of the standby",
        end.at - warm
    );
    // Positive first: the leader renewed throughout and reconciled (the metric is there by
    // that name); then the standby, read by the same names, never held nor reconciled.
    assert!(
        renewals >= 2,
        "the leader renewed {renewals} times in the window: {states:?}"
    );
    assert!(
        metric(&a, RECONCILES).unwrap_or(0.0) >= 1.0,
        "the leader's reconciles counted"
    );
    let held_by: Vec<&str> = states
        .iter()
        .filter(|s| s.at <= end.at)
        .map(|s| s.holder.as_str())
        .filter(|h| *h != "replica-a")
        .collect();
    assert!(held_by.is_empty(), "the Lease left the leader: {held_by:?}");
    assert_eq!(
        metric(&b, "wasmop_leader"),
        Some(0.0),
        "the standby's leader gauge"
    );
    assert_eq!(
        standby_led, 0,
        "the standby said it led in {standby_led} of {samples} samples"
    );
    assert_eq!(metric(&b, RECONCILES), None, "the standby reconciled");

    // Kill the leader without a chance to release the lease; ask for more pods.
    a.kill();
    let killed = Instant::now();
    apply(&client, &ar, "default", &podreplica(3))
        .await
        .unwrap();
    eventually(
        Duration::from_secs(30),
        "replica b takes over and converges",
        || converged(&client, &uid, 3),
    )
    .await;
    let takeover = killed.elapsed();
    println!("standby converged {takeover:?} after the leader was killed (lease {LEASE_SECONDS}s)");
    assert!(b.leads());
    assert!(
        takeover < Duration::from_secs(LEASE_SECONDS as u64 + 6),
        "takeover took {takeover:?}"
    );

    // Someone else takes the lease: b stands by (writes refused), keeps running, and leads
    // again once that lease expires.
    const STOLEN: u64 = 10;
    let stolen = Instant::now();
    steal_lease(&client, "thief", STOLEN as i32).await;
    eventually(Duration::from_secs(10), "b steps down", || async {
        (!b.leads()).then_some(())
    })
    .await;
    // From b's step down to the moment it holds the Lease again (its `acquireTime`, on the
    // clock of this machine, as the audit log's), the API server received no write from a
    // host (the audit log has every write, with the client's User-Agent; Leases are left
    // out of it).
    let (before, from) = cluster.audit_since(0);
    assert!(
        before.iter().any(|e| by_a_host(e) && is_write(e)),
        "the hosts' earlier writes carry their User-Agent in the audit log"
    );
    apply(&client, &ar, "default", &podreplica(4))
        .await
        .unwrap();
    let back = lease
        .first(
            stolen,
            Duration::from_secs(STOLEN + 30),
            "b holds the Lease again",
            |s| s.holder == "replica-b",
        )
        .await;
    let acquired = back.acquired.expect("the Lease says when b acquired it");
    eventually(
        Duration::from_secs(30),
        "b leads again and converges",
        || converged(&client, &uid, 4),
    )
    .await;
    let (events, _) = cluster.audit_since(from);
    let (window, after): (Vec<_>, Vec<_>) = events
        .iter()
        .filter(|e| is_write(e))
        .partition(|e| received(e) < acquired);
    let mine: Vec<String> = window
        .iter()
        .filter(|e| !by_a_host(e))
        .map(|e| write_of(e))
        .collect();
    let by_hosts: Vec<String> = window
        .iter()
        .filter(|e| by_a_host(e))
        .map(|e| write_of(e))
        .collect();
    let creates_after: Vec<String> = after
        .iter()
        .filter(|e| by_a_host(e) && e["verb"] == "create" && e["objectRef"]["resource"] == "pods")
        .map(|e| write_of(e))
        .collect();
    println!(
        "while another held the lease ({:?} from the steal to b's return): {} writes audited, {} of them by a host; after: {} pod creates by b",
        back.at - stolen,
        window.len(),
        by_hosts.len(),
        creates_after.len()
    );
    // Positive first: the window holds the test's own write, and b, back, made the pod that
    // write asked for; then the hosts' writes in the window, read the same way: none.
    assert!(
        mine.iter()
            .any(|w| w.contains("podreplicas") && w.contains("\"ha\"")),
        "the audit log shows the test's own write in the window: {mine:?}"
    );
    assert_eq!(
        creates_after.len(),
        1,
        "b, leading again, made the 4th pod: {creates_after:?}"
    );
    assert!(
        by_hosts.is_empty(),
        "a replica that does not lead wrote: {by_hosts:?}"
    );
    assert!(
        back.at >= stolen + Duration::from_secs(STOLEN),
        "b took the Lease back {:?} after the steal, before the stolen lease of {STOLEN} s expired",
        back.at - stolen
    );
    assert!(b.leads());
    assert!(
        b.log_text().contains("standing by with warm caches"),
        "{}",
        b.log_text()
    );

    // A graceful stop releases the lease at once.
    assert!(
        b.terminate(Duration::from_secs(20)),
        "SIGTERM did not stop the host"
    );

    // Leader election settings that cannot work stop the host before it starts anything.
    let mut broken = Host::start(
        &cluster,
        &["podreplica.wasm"],
        &[
            "--leader-election",
            "--lease-seconds",
            "0",
            "--lease-namespace",
            "default",
        ],
        &[],
    );
    let status = broken
        .exited_within(Duration::from_secs(30))
        .expect("a host whose leader election ended kept running");
    assert!(!status.success(), "{status:?}");
    // The whole log of a process that ended: its lines up to the end. The line a started
    // controller writes is the one replica b wrote (positive first), and is not in it.
    let log = broken.log_text();
    assert!(log.contains("invalid leader election settings"), "{log}");
    assert!(
        b.log_text().contains("caches synced"),
        "a started controller's line"
    );
    assert!(
        !log.contains("caches synced"),
        "a controller started: {log}"
    );
}
