//! End to end: how the caches list. They list with a consistent streaming list (a watch that
//! sends the current objects first); behind an API server that refuses those (the storm
//! proxy answers them as one without the `WatchList` feature does), they list in pages
//! instead. Both ways, at 300 PodReplicas of size 2: they converge with never more than 2
//! live pods each, and a second host, started after the first was killed mid-way (SIGKILL,
//! its last creates unseen by any expectation), sees every pod the first one made: the
//! list is a consistent read.

use std::time::{Duration, Instant};

use crate::support::fleet::*;
use crate::support::storm::Storm;
use crate::support::*;

const N: usize = 300;

async fn lists_consistently(refuse_streaming: bool) {
    let tag = if refuse_streaming {
        "paged"
    } else {
        "streamed"
    };
    let cluster = Cluster::start_with_node_pods(&format!("lists-{tag}"), 1000);
    cluster.grant(&["podreplica.wasm"]);
    let storm = Storm::start(&cluster, 0).await;
    if refuse_streaming {
        storm.refuse_streaming_lists();
    }
    let client = cluster.client().await;
    let mut first = Host::start_with(&storm.kubeconfig, &["podreplica.wasm"], &[], &[]);
    wait_for_crd(&client, &podreplica_resource()).await;
    let phase = Phase::default();
    let sampler = Sampler::start(client.clone(), phase.clone(), 2);

    phase.set("the first host converges half");
    let started = Instant::now();
    let uids = apply_replicas(&client, N, 2).await;
    // Killed while it still creates: some PodReplicas have their pods, some only one.
    eventually(Duration::from_secs(120), "half the pods made", || async {
        let live = live_by_owner(&client).await?;
        (live.values().map(|(n, _)| n).sum::<usize>() >= N).then_some(())
    })
    .await;
    first.kill();
    println!("{tag}: first host killed after {:?}", started.elapsed());

    phase.set("a second host takes over");
    let second = Host::start_with(&storm.kubeconfig, &["podreplica.wasm"], &[], &[]);
    all_converged_at(&client, &uids, 2, &format!("{tag}: {N} PodReplicas x 2")).await;
    println!("{tag}: converged after {:?}", started.elapsed());
    sampler.held(&uids, 2, 2 * N).await;

    // The caches' lists: of the PodReplicas and of their pods, by each host.
    for kind in ["/pods", "/podreplicas"] {
        let (refused, pages) = storm.lists(kind);
        println!("{tag}: {kind}: streaming lists refused {refused}, pages asked for {pages}");
        if refuse_streaming {
            assert!(
                refused >= 2 && pages >= 2,
                "{kind}: each host's streaming list refused, and pages asked for instead"
            );
        } else {
            assert_eq!(
                (refused, pages),
                (0, 0),
                "{kind}: listed by streaming lists only"
            );
        }
    }
    drop(second);
}

#[tokio::test(flavor = "multi_thread")]
async fn caches_list_consistently_by_streaming_lists() {
    lists_consistently(false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn caches_list_in_pages_where_the_api_server_cannot_stream_lists() {
    lists_consistently(true).await;
}
