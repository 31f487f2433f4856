//! End to end: two host replicas with leader election; one acts; kill it and the other
//! takes over within the lease duration.

mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::*;

fn podreplica(size: i64) -> serde_json::Value {
    json!({"apiVersion": "app.example.com/v1alpha1", "kind": "PodReplica",
           "metadata": {"name": "ha", "namespace": "default"}, "spec": {"size": size}})
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

    // A graceful stop releases the lease at once.
    assert!(
        b.terminate(Duration::from_secs(20)),
        "SIGTERM did not stop the host"
    );

    // An elector that ends without leading (here: timings that cannot work) stops the
    // host; nothing runs as if it led.
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
    assert!(
        log.contains("leader election ended before this replica led"),
        "{log}"
    );
    assert!(
        !log.contains("caches synced"),
        "a controller started: {log}"
    );
}
