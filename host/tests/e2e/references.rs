//! End to end: a relation by name (contract 0.4.0's `referenced`). 300 PodReplicas of the
//! `configured` build each name one of 60 ConfigMaps (`spec.configRef.name`) beside 2,000
//! ConfigMaps no one names, and 10 name one that does not exist yet. The host holds only
//! the named ones (its cache gauge), every decision sees its ConfigMap's data (the status
//! says the flavour), a change of a named ConfigMap reaches exactly the PodReplicas that name
//! it and a change of the others reaches none (the reconcile counter), a ConfigMap no longer
//! named is let go, one created after it was named is seen, one deleted is seen gone. Every
//! decision also asks for the ConfigMaps labelled `tier=shared` (`plan.requires`): the host
//! reads the three and decides again with them (the status counts them). A watch of every
//! pod holds each PodReplica to its size for the whole window.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::support::fleet::{Phase, Sampler};
use crate::support::*;

/// PodReplicas naming an existing ConfigMap, and the ConfigMaps they name.
const NAMING: usize = 300;
const NAMED: usize = 60;
/// PodReplicas naming a ConfigMap that does not exist yet.
const ABSENT: usize = 10;
/// ConfigMaps no PodReplica names.
const OTHERS: usize = 2000;
/// ConfigMaps labelled `tier=shared`, which every decision asks for.
const SHARED: usize = 3;

const CACHED: &str = "wasmop_cached_objects{resource=\"configmaps.\"";
const RECONCILES: &str = "wasmop_reconciles_total{plugin=\"podreplica\"";
const CALLS: &str = "wasmop_sandbox_call_duration_seconds_count{plugin=\"podreplica\"";
const IN_FLIGHT: &str = "wasmop_queue_depth{plugin=\"podreplica\"";

/// The sum of the metric lines that start with `prefix`, from the host's `/metrics`.
fn metric(host: &Host, prefix: &str) -> Option<f64> {
    let (_, text) = host.http_get("/metrics")?;
    Some(
        text.lines()
            .filter(|l| l.starts_with(prefix))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum(),
    )
}

fn config(name: &str, flavour: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"},
        "data": {"flavour": flavour}}))
    .unwrap()
}

async fn create_configs(api: &Api<ConfigMap>, names: Vec<String>, flavour: &str) {
    futures::stream::iter(names)
        .map(|n| async move {
            api.create(&PostParams::default(), &config(&n, flavour))
                .await
        })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
}

async fn set_flavour(api: &Api<ConfigMap>, name: &str, flavour: &str) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"flavour": flavour}})),
    )
    .await
    .unwrap();
}

/// PodReplica `i`'s message, by name, for every PodReplica.
async fn messages(client: &Client) -> Option<BTreeMap<String, String>> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &podreplica_resource());
    let list = api.list(&ListParams::default()).await.ok()?;
    Some(
        list.items
            .into_iter()
            .map(|o| {
                let m = o.data["status"]["conditions"][0]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                (o.metadata.name.unwrap_or_default(), m)
            })
            .collect(),
    )
}

/// Waits until every PodReplica in `expected` reports its pod ready and its flavour, and
/// no decision is under way (each is counted by then).
async fn flavours(client: &Client, host: &Host, expected: &BTreeMap<String, String>, what: &str) {
    eventually(Duration::from_secs(120), what, || async {
        let seen = messages(client).await?;
        let off = expected.iter().find(|(name, f)| {
            seen.get(*name).map(String::as_str)
                != Some(&format!("1/1 pods ready (config {f}, {SHARED} shared)"))
        });
        let all = off.is_none();
        (all && metric(host, IN_FLIGHT)? == 0.0).then_some(())
    })
    .await;
}

fn name_of(i: usize) -> String {
    if i < NAMING {
        format!("cfg-{}", i % NAMED)
    } else {
        format!("later-{}", i - NAMING)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_relation_by_name_holds_and_follows_only_the_named_objects() {
    let cluster = Cluster::start_with_node_pods("references", 600);
    let client = cluster.client().await;
    let configs: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    create_configs(
        &configs,
        (0..OTHERS).map(|i| format!("other-{i}")).collect(),
        "x",
    )
    .await;
    create_configs(
        &configs,
        (0..NAMED).map(|i| format!("cfg-{i}")).collect(),
        "a",
    )
    .await;
    for i in 0..SHARED {
        let mut shared = config(&format!("shared-{i}"), "s");
        shared.metadata.labels = Some([("tier".to_string(), "shared".to_string())].into());
        configs
            .create(&PostParams::default(), &shared)
            .await
            .unwrap();
    }

    let host = Host::start(&cluster, &["podreplica_configured.wasm"], &[], &[]);
    let ar = podreplica_resource();
    wait_for_crd(&client, &ar).await;
    let phase = Phase::default();
    phase.set("apply");
    let sampler = Sampler::start(client.clone(), phase.clone(), 1);
    let uids: Vec<String> = futures::stream::iter(0..NAMING + ABSENT)
        .map(|i| {
            let (client, ar) = (client.clone(), ar.clone());
            async move {
                let pr = json!({"apiVersion": "app.example.com/v1alpha1", "kind": "PodReplica",
                    "metadata": {"name": format!("pr-{i}"), "namespace": "default"},
                    "spec": {"size": 1, "configRef": {"name": name_of(i)}}});
                apply(&client, &ar, "default", &pr)
                    .await
                    .unwrap()
                    .metadata
                    .uid
                    .unwrap()
            }
        })
        .buffered(16)
        .collect()
        .await;
    let mut expected: BTreeMap<String, String> = (0..NAMING + ABSENT)
        .map(|i| {
            (
                format!("pr-{i}"),
                if i < NAMING { "a" } else { "none" }.to_string(),
            )
        })
        .collect();
    flavours(
        &client,
        &host,
        &expected,
        "every PodReplica reports its ConfigMap's flavour",
    )
    .await;
    let cached = metric(&host, CACHED).unwrap_or(f64::NAN);
    println!(
        "{} PodReplicas decided; ConfigMaps cached: {cached} of {}",
        NAMING + ABSENT,
        OTHERS + NAMED
    );
    assert_eq!(
        cached, NAMED as f64,
        "the host holds exactly the named ConfigMaps"
    );
    // Each reconcile decides twice: the first plan asks for the shared ConfigMaps, the
    // second sees them.
    let calls = metric(&host, CALLS).unwrap_or_default();
    let reconciles = metric(&host, RECONCILES).unwrap_or_default();
    println!("{reconciles} reconciles, {calls} calls into the plugin");
    assert_eq!(
        calls,
        2.0 * reconciles,
        "every decision asked for the shared ConfigMaps once"
    );

    // A change of a named ConfigMap reaches the five PodReplicas naming it; 200 changes of
    // the others reach none. Changes of one kind come through one watch in order, so the
    // others' changes are taken in before the second named change, whose five decisions
    // are counted last: 10 decisions in all, none more.
    phase.set("changes");
    let before = metric(&host, RECONCILES).unwrap();
    set_flavour(&configs, "cfg-7", "b").await;
    for i in 0..200 {
        set_flavour(&configs, &format!("other-{i}"), "y").await;
    }
    set_flavour(&configs, "cfg-8", "b").await;
    for i in (0..NAMING).filter(|i| i % NAMED == 7 || i % NAMED == 8) {
        expected.insert(format!("pr-{i}"), "b".into());
    }
    flavours(
        &client,
        &host,
        &expected,
        "the PodReplicas naming cfg-7 and cfg-8 report flavour b",
    )
    .await;
    let decided = eventually(Duration::from_secs(60), "10 decisions counted", || async {
        let n = metric(&host, RECONCILES)? - before;
        (n >= 10.0).then_some(n)
    })
    .await;
    println!("decisions after 2 named and 200 other ConfigMaps changed: {decided}");
    assert_eq!(
        decided, 10.0,
        "only the PodReplicas naming a changed ConfigMap decide"
    );

    // The five naming cfg-10 move to cfg-11: cfg-10 is let go, and its change reaches none.
    phase.set("renames");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    set_flavour(&configs, "cfg-11", "c").await;
    for i in (0..NAMING).filter(|i| i % NAMED == 10) {
        api.patch(
            &format!("pr-{i}"),
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"configRef": {"name": "cfg-11"}}})),
        )
        .await
        .unwrap();
    }
    for i in (0..NAMING).filter(|i| i % NAMED == 10 || i % NAMED == 11) {
        expected.insert(format!("pr-{i}"), "c".into());
    }
    flavours(
        &client,
        &host,
        &expected,
        "the PodReplicas moved to cfg-11 report its flavour",
    )
    .await;
    eventually(Duration::from_secs(30), "cfg-10 let go", || async {
        (metric(&host, CACHED)? == (NAMED - 1) as f64).then_some(())
    })
    .await;

    // Created after it was named: seen. Deleted: seen gone.
    phase.set("later and gone");
    create_configs(&configs, vec!["later-0".into()], "d").await;
    configs.delete("cfg-12", &Default::default()).await.unwrap();
    expected.insert(format!("pr-{NAMING}"), "d".into());
    for i in (0..NAMING).filter(|i| i % NAMED == 12) {
        expected.insert(format!("pr-{i}"), "none".into());
    }
    flavours(
        &client,
        &host,
        &expected,
        "a ConfigMap created after it was named is seen, one deleted is gone",
    )
    .await;
    let cached = metric(&host, CACHED).unwrap_or(f64::NAN);
    assert_eq!(
        cached,
        (NAMED - 1) as f64,
        "cfg-12 gone, later-0 come: 59 held"
    );

    sampler.held(&uids, 1, NAMING + ABSENT).await;
    drop(host);
}
