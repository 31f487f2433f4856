//! End to end, at size: 150 PodReplicas recover when the API server restarts mid-scale, and
//! when the host is killed with SIGKILL mid-scale and started again, its pods stripped of the
//! controller label meanwhile (as made by a host that did not label them); a watch of every
//! pod for the whole test sees no PodReplica get a pod while it had the size in force.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams};

use crate::support::fleet::{Phase, Sampler, all_converged_at, apply_replicas};
use crate::support::*;

const N: usize = 150;

#[tokio::test(flavor = "multi_thread")]
async fn recovers_from_apiserver_restart_and_host_sigkill() {
    let cluster = Cluster::start_with_node_pods("restart", 700);
    let mut host = Host::start(&cluster, &["podreplica.wasm"], &[], &[]);
    let client = cluster.client().await;
    wait_for_crd(&client, &podreplica_resource()).await;
    let phase = Phase::default();
    let sampler = Sampler::start(client.clone(), phase.clone(), 2);
    phase.set("150 PodReplicas x 2");
    let uids = apply_replicas(&client, N, 2).await;
    all_converged_at(&client, &uids, 2, "150 PodReplicas x 2").await;

    // Restart the API server; scale to 3 while the host's watches (and the sampler's)
    // reconnect.
    phase.set("scale to 3 across an API server restart");
    cluster.restart("apiserver");
    let client = cluster.client().await;
    sampler.set_bound(3);
    apply_replicas(&client, N, 3).await;
    all_converged_at(&client, &uids, 3, "x 3 after the API server restart").await;
    println!("150 PodReplicas converged to 3 pods across an API server restart");

    // Kill the host with SIGKILL right after asking for more pods, then start it again.
    phase.set("scale to 4 across a SIGKILL of the host");
    sampler.set_bound(4);
    apply_replicas(&client, N, 4).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    host.kill();
    // The host's owned cache selects on the controller label: pods without it (made by a
    // host that did not label) are labelled before the first decision, never made again.
    let stripped = strip_controller_labels(&client).await;
    let mut host = Host::start(&cluster, &["podreplica.wasm"], &[], &[]);
    all_converged_at(&client, &uids, 4, "x 4 after the host's SIGKILL").await;
    let said = format!(
        "owned objects made before labelled with their controller kind=Pod objects={stripped} "
    );
    assert!(
        host.log_text().contains(&said),
        "the host labels the {stripped} pods stripped of their label"
    );
    let pods = Api::<Pod>::default_namespaced(client.clone());
    let unlabelled = pods
        .list_metadata(&ListParams::default().labels(&format!("!{CONTROLLER}")))
        .await
        .unwrap();
    assert!(unlabelled.items.is_empty(), "every pod labelled again");
    tokio::time::sleep(Duration::from_secs(2)).await;
    println!("150 PodReplicas converged to 4 pods across a SIGKILL of the host");
    // Every pod made was watched: 150 x 4 creations at least (each a few events).
    sampler.held(&uids, 4, 4 * N).await;
    assert_eq!(host.http_get("/healthz").unwrap().0, 200);
    host.terminate(Duration::from_secs(15));
}

/// The label the host puts on what it makes of an owned kind.
const CONTROLLER: &str = "shard.wasmop.dev/controller";

/// Removes the controller label from every pod (all PodReplicas'); returns how many.
async fn strip_controller_labels(client: &kube::Client) -> usize {
    let pods = Api::<Pod>::default_namespaced(client.clone());
    let labelled = pods
        .list_metadata(&ListParams::default().labels(CONTROLLER))
        .await
        .expect("list the labelled pods");
    let names: Vec<String> = labelled
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    assert!(names.len() >= 3 * N, "{} labelled pods", names.len());
    let strip = serde_json::json!({"metadata": {"labels": {CONTROLLER: null}}});
    let (params, strip) = (PatchParams::default(), Patch::Merge(&strip));
    let patched: Vec<_> = futures::stream::iter(&names)
        .map(|name| pods.patch_metadata(name, &params, &strip))
        .buffer_unordered(16)
        .collect()
        .await;
    assert!(
        patched.iter().all(Result::is_ok),
        "every pod stripped of its label"
    );
    names.len()
}
