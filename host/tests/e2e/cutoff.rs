//! End to end: writes cut off before their answer (issue 48, "A timed-out write may still
//! land"). A host with leader election writes through a proxy that sends every pod create
//! on to the API server only 5 s after it came: the fence cuts each create off at the
//! leadership's deadline (2.7 s with a 4 s lease), and the API server commits it 2.3 s later
//! all the same. The host expects what it could not see answered, so no PodReplica is
//! decided again on a view that may miss those pods: a watch of every pod, for the whole
//! test, sees none get a pod while it had its size live, and each ends with exactly its
//! size.

use std::time::{Duration, Instant};

use crate::support::fleet::{Phase, Sampler, all_converged_at, apply_replicas};
use crate::support::storm::Storm;
use crate::support::*;

/// Within the three kwok nodes' room (110 pods each).
const REPLICAS: usize = 150;
const SIZE: usize = 2;
const DELAY: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread")]
async fn creates_cut_off_before_their_answer_are_expected_and_never_doubled() {
    let cluster = Cluster::start("cutoff");
    cluster.grant(&["podreplica.wasm"]);
    let client = cluster.client().await;
    let storm = Storm::start(&cluster, 0).await;
    storm.delay_posts(Some(("/pods", DELAY)));
    let host = Host::start_with(
        &storm.kubeconfig,
        &["podreplica.wasm"],
        &[
            "--leader-election",
            "--lease-seconds",
            "4",
            "--lease-namespace",
            "default",
            "--identity",
            "only",
        ],
        &[],
    );
    wait_for_crd(&client, &podreplica_resource()).await;
    eventually(Duration::from_secs(120), "the host leads", || async {
        host.leads().then_some(())
    })
    .await;
    let phase = Phase::default();
    phase.set("creates delayed past the fence's deadline");
    let sampler = Sampler::start(client.clone(), phase.clone(), SIZE);
    let started = Instant::now();
    let uids = apply_replicas(&client, REPLICAS, SIZE).await;
    all_converged_at(
        &client,
        &uids,
        SIZE,
        &format!("{REPLICAS} PodReplicas x {SIZE}, every pod create cut off"),
    )
    .await;
    let took = started.elapsed();
    let log = host.log_text();
    let cut = log.matches("a write was cut off before its answer").count();
    println!(
        "{REPLICAS} x {SIZE} converged in {took:.1?}; {} pod creates delayed by {DELAY:?}, {cut} cut off and expected",
        storm.posts_delayed()
    );
    // Never a pod for a PodReplica that had its size live, for the whole test.
    sampler.held(&uids, SIZE, REPLICAS * SIZE).await;
    // The scenario happened (every create delayed past the deadline, cut off, expected),
    // and each pod was created once: a retry on a view missing the delayed pods would have
    // sent more.
    assert!(cut >= REPLICAS, "{cut} writes cut off and expected");
    assert_eq!(
        storm.posts_delayed(),
        (REPLICAS * SIZE) as u64,
        "pod creates sent, one per pod"
    );
}
