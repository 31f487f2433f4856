//! End to end: two host replicas with leader election; one acts while the other keeps warm
//! caches; kill it and the other takes over within the lease duration. A leader whose lease
//! is taken writes nothing more and leads again once that lease expires.

use std::time::{Duration, Instant};

use crate::support::*;
use serde_json::json;

fn podreplica(size: i64) -> serde_json::Value {
    json!({"apiVersion": "app.example.com/v1alpha1", "kind": "PodReplica",
           "metadata": {"name": "ha", "namespace": "default"}, "spec": {"size": size}})
}

/// Writes the host's Lease as held by `holder`, renewed now (retried on conflict).
async fn steal_lease(client: &kube::Client, holder: &str, seconds: i32) {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    let api: kube::Api<Lease> = kube::Api::namespaced(client.clone(), "default");
    for _ in 0..20 {
        let mut lease = api.get("wasmop-leader").await.unwrap();
        let spec = lease.spec.get_or_insert_default();
        spec.holder_identity = Some(holder.into());
        spec.lease_duration_seconds = Some(seconds);
        spec.renew_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
        if api
            .replace("wasmop-leader", &Default::default(), &lease)
            .await
            .is_ok()
        {
            return;
        }
    }
    panic!("could not take the lease");
}

fn reconciled(host: &Host) -> bool {
    host.http_get("/metrics")
        .is_some_and(|(_, m)| m.contains("wasmop_reconciles_total{plugin=\"podreplica\""))
}

#[tokio::test(flavor = "multi_thread")]
async fn standby_takes_over_within_the_lease() {
    let cluster = Cluster::start("leader");
    let mut a = Host::start_replica(&cluster, &["podreplica.wasm"], "replica-a", 4);
    let client = cluster.client().await;
    let ar = podreplica_resource();
    wait_for_crd(&client, &ar).await;
    eventually(Duration::from_secs(60), "replica a leads", || async {
        a.leads().then_some(())
    })
    .await;
    let mut b = Host::start_replica(&cluster, &["podreplica.wasm"], "replica-b", 4);
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
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!b.leads(), "both replicas lead");
    assert!(!reconciled(&b), "the standby reconciled");

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
    println!("standby converged {takeover:?} after the leader was killed (lease 4s)");
    assert!(b.leads());
    assert!(
        takeover < Duration::from_secs(4 + 6),
        "takeover took {takeover:?}"
    );

    // Someone else takes the lease: b stands by (writes refused), keeps running, and leads
    // again once that lease expires.
    steal_lease(&client, "thief", 10).await;
    eventually(Duration::from_secs(10), "b steps down", || async {
        (!b.leads()).then_some(())
    })
    .await;
    // Nothing the API server received from a host in the next 3 s was a write (the audit
    // log has every write, with the client's User-Agent; Leases are left out of it).
    let by_host = |e: &&serde_json::Value| {
        e["userAgent"]
            .as_str()
            .is_some_and(|a| a.starts_with("wasmop/"))
    };
    let (before, from) = cluster.audit_since(0);
    assert!(
        before.iter().any(|e| by_host(&e)),
        "the hosts' earlier writes carry their User-Agent in the audit log"
    );
    apply(&client, &ar, "default", &podreplica(4))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (events, _) = cluster.audit_since(from);
    let by_hosts: Vec<String> = events
        .iter()
        .filter(by_host)
        .map(|e| format!("{} {}", e["verb"], e["requestURI"]))
        .collect();
    println!(
        "while another held the lease: {} writes audited, {} of them by a host",
        events.len(),
        by_hosts.len()
    );
    assert!(
        !events.is_empty(),
        "the audit log shows the test's own write"
    );
    assert!(
        by_hosts.is_empty(),
        "a replica that does not lead wrote: {by_hosts:?}"
    );
    assert_eq!(live_owned_pods(&client, "default", &uid).await.len(), 3);
    eventually(
        Duration::from_secs(30),
        "b leads again and converges",
        || converged(&client, &uid, 4),
    )
    .await;
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
    let log = broken.log_text();
    assert!(log.contains("invalid leader election settings"), "{log}");
    assert!(
        !log.contains("caches synced"),
        "a controller started: {log}"
    );
}
