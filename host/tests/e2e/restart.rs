//! End to end: the host recovers when the API server restarts mid-run, and a host killed
//! with SIGKILL mid-run and started again converges with no more pods than desired.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use crate::support::*;
use serde_json::json;

fn podreplica(name: &str, size: i64) -> serde_json::Value {
    json!({"apiVersion": "app.example.com/v1alpha1", "kind": "PodReplica",
           "metadata": {"name": name, "namespace": "default"}, "spec": {"size": size}})
}

/// Samples the number of live owned pods until stopped; remembers the largest count.
fn watch_max(
    client: kube::Client,
    uid: String,
) -> (
    Arc<AtomicBool>,
    Arc<AtomicUsize>,
    tokio::task::JoinHandle<()>,
) {
    let stop = Arc::new(AtomicBool::new(false));
    let max = Arc::new(AtomicUsize::new(0));
    let (s, m) = (stop.clone(), max.clone());
    let task = tokio::spawn(async move {
        while !s.load(Ordering::SeqCst) {
            let n = live_owned_pods(&client, "default", &uid).await.len();
            m.fetch_max(n, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    (stop, max, task)
}

#[tokio::test(flavor = "multi_thread")]
async fn recovers_from_apiserver_restart_and_host_sigkill() {
    let cluster = Cluster::start("restart");
    let mut host = Host::start(&cluster, &["podreplica.wasm"], &[], &[]);
    let client = cluster.client().await;
    let ar = podreplica_resource();
    wait_for_crd(&client, &ar).await;
    let pr = apply(&client, &ar, "default", &podreplica("survivor", 2))
        .await
        .unwrap();
    let uid = pr.metadata.uid.unwrap();
    eventually(Duration::from_secs(60), "2 pods", || {
        converged(&client, &uid, 2)
    })
    .await;

    // Restart the API server; change the size while the host's watches reconnect.
    cluster.restart("apiserver");
    let client = cluster.client().await;
    apply(&client, &ar, "default", &podreplica("survivor", 4))
        .await
        .unwrap();
    eventually(
        Duration::from_secs(90),
        "4 pods after the API server restart",
        || converged(&client, &uid, 4),
    )
    .await;
    println!("converged to 4 pods after an API server restart");

    // Kill the host with SIGKILL right after asking for more pods, then start it again.
    let (stop, max, sampler) = watch_max(client.clone(), uid.clone());
    apply(&client, &ar, "default", &podreplica("survivor", 7))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    host.kill();
    let host = Host::start(&cluster, &["podreplica.wasm"], &[], &[]);
    eventually(
        Duration::from_secs(90),
        "7 pods after the host restart",
        || converged(&client, &uid, 7),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::SeqCst);
    sampler.await.unwrap();
    let most = max.load(Ordering::SeqCst);
    println!("most live pods seen across the SIGKILL: {most} (desired 7)");
    assert!(
        most <= 7,
        "{most} pods at some point, more than the desired 7"
    );
    assert_eq!(live_owned_pods(&client, "default", &uid).await.len(), 7);
    assert_eq!(host.http_get("/healthz").unwrap().0, 200);
}
