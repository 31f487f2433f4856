//! The scale row: the same PodReplicas converged by 1, 2, 3 … sharded replicas
//! (`--sharding`), each on a fresh control plane: seconds to converge at size 3, and each
//! replica's share (primaries it holds) and memory at rest.

use std::time::Duration;

use crate::converge;
use crate::cost::memory_mib;
use crate::support::{Cluster, Host, eventually, podreplica_resource, wait_for_crd};
use crate::tracker::Tracker;

/// One replica count.
pub struct Sharded {
    /// Replicas.
    pub replicas: usize,
    /// Seconds until every PodReplica converged at size 3.
    pub secs: f64,
    /// Per replica: (primaries held, RSS at rest MiB).
    pub each: Vec<(usize, f64)>,
}

fn gauge(host: &Host, prefix: &str) -> Option<f64> {
    let (_, m) = host.http_get("/metrics")?;
    m.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// Converges `n` PodReplicas at size 3 with `replicas` sharded hosts.
pub async fn sharded(n: usize, replicas: usize) -> Sharded {
    let cluster =
        Cluster::start_with_node_pods(&format!("scale-{n}-x{replicas}"), (n * 5 / 3 + 200) as u32);
    let client = cluster.client().await;
    let tracker = Tracker::start(client.clone());
    let hosts: Vec<Host> = (0..replicas)
        .map(|i| {
            let args = crate::versus::replica_args(i);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            Host::start(&cluster, &["podreplica.wasm"], &args, &[])
        })
        .collect();
    wait_for_crd(&client, &podreplica_resource()).await;
    eventually(Duration::from_secs(120), "every shard ready", || async {
        hosts
            .iter()
            .all(|h| {
                h.http_get("/readyz").is_some_and(|(c, _)| c == 200)
                    && gauge(h, "wasmop_shard_member") == Some(1.0)
            })
            .then_some(())
    })
    .await;
    let names = converge::names(n);
    let secs = converge::apply_and_converge(&client, &tracker, &names, 3).await;
    let most = tracker.take_most();
    assert!(most <= 3, "a PodReplica had {most} live pods (size 3)");
    tokio::time::sleep(Duration::from_secs(5)).await;
    let each = hosts
        .iter()
        .map(|h| {
            let held = gauge(h, "wasmop_shard_objects{plugin=\"podreplica\"}").unwrap_or(0.0);
            (held as usize, memory_mib(h).0)
        })
        .collect();
    println!("{n}: {replicas} sharded replicas converged at 3 in {secs:.1} s");
    Sharded {
        replicas,
        secs,
        each,
    }
}
