//! End to end: a plugin's name and primary kind are its identity. A WasmPlugin cannot turn
//! into another plugin, a second plugin cannot claim a primary kind that has one, and one
//! rule decides between an upload and a file of the plugins directory, both ways: the upload
//! wins while it exists, and the file runs again once the WasmPlugin is deleted.

use std::time::Duration;

use crate::support::uploads::*;
use crate::support::*;
use kube::api::{Api, DeleteParams, DynamicObject};
use serde_json::json;

/// Waits until the host's log says `text` (`count` times at least).
async fn logged(host: &Host, text: &str, count: usize) {
    eventually(Duration::from_secs(60), text, || async {
        (host.log_text().matches(text).count() >= count).then_some(())
    })
    .await;
}

/// Waits until PodReplica `name` reports it was last decided by the build `tag` (`v2`,
/// `v3`; `None` for the shipped one): each build marks its condition message.
async fn decided_by(client: &kube::Client, name: &str, tag: Option<&str>) {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &podreplica_resource());
    eventually(
        Duration::from_secs(90),
        &format!("{name} decided by {tag:?}"),
        || async {
            let o = api.get(name).await.ok()?;
            let msg = o.data["status"]["conditions"][0]["message"].as_str()?;
            match tag {
                Some(t) => msg.ends_with(&format!("({t})")),
                None => !msg.contains("(v"),
            }
            .then_some(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_is_its_name_and_owns_its_primary_kind() {
    let cluster = Cluster::start("identity");
    let host = Host::start(&cluster, &["podreplica.wasm"], &[], &[]);
    let client = cluster.client().await;
    wait_for_crd(&client, &podreplica_resource()).await;
    wait_for_crd(&client, &wasmplugin_resource()).await;
    let pr = json!({"apiVersion": "app.example.com/v1alpha1", "kind": "PodReplica",
        "metadata": {"name": "who", "namespace": "default"}, "spec": {"size": 1}});
    apply(&client, &podreplica_resource(), "default", &pr)
        .await
        .unwrap();
    decided_by(&client, "who", None).await;

    // An upload wins over the file: v2 takes over plugin `podreplica`.
    let (ok, text) = push(&cluster, "podreplica", "podreplica_v2.wasm");
    assert!(ok, "{text}");
    decided_by(&client, "who", Some("v2")).await;

    // The same WasmPlugin cannot turn into another plugin.
    let (ok, text) = push(&cluster, "podreplica", "podreplica_renamed.wasm");
    assert!(!ok, "a renaming upload was accepted: {text}");
    assert_eq!(
        ready_reason(&client, "podreplica").await,
        Some(("False".into(), "NameChanged".into()))
    );
    // Nor can another plugin claim PodReplica.
    let (ok, text) = push(&cluster, "second", "podreplica_renamed.wasm");
    assert!(!ok, "a second claim on PodReplica was accepted: {text}");
    assert_eq!(
        ready_reason(&client, "second").await,
        Some(("False".into(), "PrimaryKindClaimed".into()))
    );
    // Every line about a running plugin carries `plugin=NAME`; refusals do not.
    assert!(
        !host.log_text().contains("plugin=podreplica-renamed"),
        "a refused plugin ran a controller"
    );

    // A changed file does not displace the upload ...
    std::fs::copy(
        plugin_dir().join("podreplica_v3.wasm"),
        host.plugins_dir().join("podreplica.wasm"),
    )
    .unwrap();
    logged(&host, "runs from the upload", 1).await;
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &podreplica_resource());
    apply(
        &client,
        &podreplica_resource(),
        "default",
        &json!({"apiVersion": "app.example.com/v1alpha1", "kind": "PodReplica",
            "metadata": {"name": "who", "namespace": "default"}, "spec": {"size": 2}}),
    )
    .await
    .unwrap();
    eventually(Duration::from_secs(60), "scaled by v2", || async {
        let o = api.get("who").await.ok()?;
        (o.data["status"]["pods"].as_array()?.len() == 2).then_some(())
    })
    .await;
    decided_by(&client, "who", Some("v2")).await;

    // ... and once the WasmPlugin is deleted, the file runs again.
    let wps: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &wasmplugin_resource());
    wps.delete("podreplica", &DeleteParams::default())
        .await
        .unwrap();
    logged(&host, "plugin file accepted", 2).await;
    apply(&client, &podreplica_resource(), "default", &pr)
        .await
        .unwrap();
    decided_by(&client, "who", Some("v3")).await;
}
