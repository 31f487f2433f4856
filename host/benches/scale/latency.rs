//! Event to action: delete one pod of a converged PodReplica and time until the watch shows
//! its replacement; samples spread over the PodReplicas, one at a time. When the host sent
//! the replacement's create comes from the API server's audit log ([`crate::audit`]).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DeleteParams};

use crate::tracker::Tracker;

/// The samples of one run.
#[derive(Debug, Default)]
pub struct Samples {
    /// Delete sent → replacement seen by the benchmark's watch, ms, sorted.
    pub replacement_ms: Vec<f64>,
    /// The deleted pods, in the order they were deleted.
    pub victims: Vec<String>,
}

/// `samples` delete → replacement times.
pub async fn replacement_ms(
    client: &Client,
    tracker: &Tracker,
    names: &[String],
    size: usize,
    samples: usize,
) -> Samples {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut out = Vec::with_capacity(samples);
    let mut victims = Vec::with_capacity(samples);
    for k in 0..samples {
        let owner = &names[k * names.len() / samples.max(1) % names.len()];
        settle(tracker, owner, size).await;
        let victim = tracker.live(owner).into_iter().next().expect("a live pod");
        let mut created = tracker.created();
        let started = Instant::now();
        pods.delete(&victim, &DeleteParams::default())
            .await
            .unwrap();
        let took = tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                match created.recv().await {
                    Ok((o, at)) if &o == owner => return at.duration_since(started),
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(e) => panic!("pod watch ended: {e}"),
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no replacement for {owner} within 30 s"));
        out.push(took.as_secs_f64() * 1000.0);
        victims.push(victim);
    }
    out.sort_by(f64::total_cmp);
    Samples {
        replacement_ms: out,
        victims,
    }
}

/// Waits until `owner` has `size` live Running pods again.
async fn settle(tracker: &Tracker, owner: &str, size: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !tracker.all_at(&[owner.to_string()], size) {
        assert!(
            Instant::now() < deadline,
            "{owner} did not settle at {size}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The `q` quantile (0..=1) of sorted values.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i]
}
