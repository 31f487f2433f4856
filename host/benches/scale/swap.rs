//! Hot swap under load: `wasmop push` of PodReplica v2 while every PodReplica exists, the
//! time to the verdict, then until each PodReplica's status was written by v2.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};

use crate::support::uploads::push;
use crate::support::{Cluster, podreplica_resource};

/// (push → verdict s, verdict → all reconciled by v2 s, p99 per object s).
pub async fn swap(cluster: &Cluster, client: &Client, n: usize) -> (f64, f64, f64) {
    let started = Instant::now();
    let (ok, out) = push(cluster, "podreplica", "podreplica_v2.wasm");
    assert!(ok, "push failed: {out}");
    let verdict = Instant::now();
    let push_s = verdict.duration_since(started).as_secs_f64();
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &podreplica_resource());
    let mut first: HashMap<String, f64> = HashMap::new();
    let deadline = verdict + Duration::from_secs(600);
    while first.len() < n {
        if let Ok(list) = api.list(&ListParams::default()).await {
            let at = verdict.elapsed().as_secs_f64();
            for pr in list.items {
                let by_v2 = pr.data["status"]["conditions"]
                    .as_array()
                    .is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c["message"].as_str().is_some_and(|m| m.ends_with("(v2)")))
                    });
                if by_v2 {
                    first
                        .entry(pr.metadata.name.unwrap_or_default())
                        .or_insert(at);
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "v2 never reconciled every object"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut times: Vec<f64> = first.into_values().collect();
    times.sort_by(f64::total_cmp);
    let all = times.last().copied().unwrap_or(0.0);
    (push_s, all, crate::latency::quantile(&times, 0.99))
}
