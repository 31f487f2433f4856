//! End to end: admission webhooks. PodReplica's `admitted` build declares `validate` and
//! `default`; the host makes its CA and serving certificate (kept in a Secret), registers a
//! validating and a mutating configuration with that CA, and the API server calls it: an
//! image tagged `latest` is refused with the API server's wording of an invalid object, an
//! object created without `spec.image` reads back with it, a size above 50 is warned about
//! (kubectl prints it), 200 creates in flight 16 at a time all pass through both webhooks.
//! An object written as v1beta1 (`spec.replicas`) is converted by the plugin, stored and
//! decided as v1alpha1 (`spec.size`), and reads back as v1beta1. Swapped to a version
//! without webhooks, the configurations are unregistered and what was refused is accepted,
//! without a restart.

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::json;

use crate::support::uploads::push;
use crate::support::*;

fn pr(name: &str, size: i64, image: Option<&str>) -> DynamicObject {
    let mut spec = json!({"size": size});
    if let Some(i) = image {
        spec["image"] = json!(i);
    }
    serde_json::from_value(
        json!({"apiVersion": "app.example.com/v1alpha1", "kind": "PodReplica",
        "metadata": {"name": name, "namespace": "default"}, "spec": spec}),
    )
    .unwrap()
}

/// The value of the metric line that starts with `prefix`, from the host's `/metrics`.
fn metric(host: &Host, prefix: &str) -> f64 {
    let (_, text) = host.http_get("/metrics").unwrap_or_default();
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn kubectl_apply(cluster: &Cluster, yaml: &str) -> (bool, String) {
    use std::io::Write;
    let mut child = cluster
        .kubectl()
        .args(["apply", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(yaml.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn validate_and_default_are_served_as_webhooks_and_swapped_with_the_plugin() {
    let cluster = Cluster::start("webhooks");
    let (host, url) = Host::start_with_webhooks(&cluster, &["podreplica_admitted.wasm"]);
    let client = cluster.client().await;
    let ar = podreplica_resource();
    wait_for_crd(&client, &ar).await;
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let registered = eventually(
        Duration::from_secs(60),
        "both configurations registered",
        || async {
            let v = validating.get_opt("wasmop-podreplica").await.ok()??;
            mutating.get_opt("wasmop-podreplica").await.ok()??;
            Some(v)
        },
    )
    .await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let tls = secrets.get("wasmop-webhook-tls").await.unwrap();
    let ca = tls.data.as_ref().unwrap()["ca.crt"].clone();
    let hook = &registered.webhooks.as_ref().unwrap()[0];
    assert_eq!(
        hook.client_config.ca_bundle.as_ref(),
        Some(&ca),
        "caBundle is the Secret's CA"
    );
    assert_eq!(
        hook.client_config.url.as_deref(),
        Some(format!("{url}/validate/podreplica").as_str())
    );

    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let pp = PostParams::default();
    let refused = api
        .create(&pp, &pr("bad", 1, Some("busybox:latest")))
        .await
        .unwrap_err()
        .to_string();
    println!("refused: {refused}");
    assert!(
        refused.contains(
            "admission webhook \"podreplica.validate.wasmop.dev\" denied the request: \
             PodReplica.app.example.com \"bad\" is invalid: spec.image: Invalid value: \
             \"busybox:latest\": an image tagged `latest` is not reproducible"
        ),
        "{refused}"
    );
    let made = api.create(&pp, &pr("plain", 1, None)).await.unwrap();
    assert_eq!(
        made.data["spec"]["image"], "busybox",
        "defaulted by the plugin"
    );
    let (ok, text) = kubectl_apply(
        &cluster,
        "apiVersion: app.example.com/v1alpha1\nkind: PodReplica\nmetadata:\n  name: big\n  namespace: default\nspec:\n  size: 60\n",
    );
    assert!(
        ok && text.contains("Warning: 60 pods is more than 50"),
        "{text}"
    );

    // 200 creates, 16 in flight: every one through both webhooks.
    let started = Instant::now();
    let mut took: Vec<Duration> = futures::stream::iter(0..200)
        .map(|i| {
            let api = api.clone();
            async move {
                let t = Instant::now();
                let o = api
                    .create(&PostParams::default(), &pr(&format!("load-{i}"), 0, None))
                    .await
                    .unwrap();
                assert_eq!(o.data["spec"]["image"], "busybox");
                t.elapsed()
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    took.sort();
    println!(
        "200 creates through both webhooks in {:.2?}: p50 {:.1?}, p99 {:.1?}",
        started.elapsed(),
        took[99],
        took[197]
    );

    let counted = |webhook: &str, result: &str| {
        metric(
            &host,
            &format!(
                "wasmop_webhook_requests_total{{plugin=\"podreplica\",webhook=\"{webhook}\",result=\"{result}\"}}"
            ),
        )
    };
    assert!(counted("validate", "allowed") >= 202.0 && counted("default", "allowed") >= 202.0);
    assert_eq!(
        counted("validate", "denied"),
        1.0,
        "the one image tagged latest"
    );
    assert_eq!(counted("validate", "failed"), 0.0);

    // Conversion: the CRD serves v1beta1 (`spec.replicas`) beside v1alpha1 (`spec.size`,
    // stored); written as v1beta1, read as either, decided by the controller (which reads
    // v1alpha1).
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    eventually(
        Duration::from_secs(60),
        "the CRD converts through the host",
        || async {
            let crd = crds.get("podreplicas.app.example.com").await.ok()?;
            (crd.spec.conversion?.strategy == "Webhook").then_some(())
        },
    )
    .await;
    let beta_ar = kube::api::ApiResource {
        version: "v1beta1".into(),
        api_version: "app.example.com/v1beta1".into(),
        ..ar.clone()
    };
    let beta: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &beta_ar);
    let written: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "app.example.com/v1beta1", "kind": "PodReplica",
        "metadata": {"name": "beta", "namespace": "default"}, "spec": {"replicas": 2}}))
    .unwrap();
    let made = beta.create(&pp, &written).await.unwrap();
    assert_eq!(made.data["spec"]["replicas"], 2);
    assert_eq!(
        made.data["spec"]["image"], "busybox",
        "defaulted as v1beta1"
    );
    let alpha = api.get("beta").await.unwrap();
    assert_eq!(alpha.data["spec"]["size"], 2, "read as v1alpha1");
    assert!(alpha.data["spec"].get("replicas").is_none());
    let uid = alpha.metadata.uid.clone().unwrap();
    eventually(
        Duration::from_secs(60),
        "the controller made beta's two pods",
        || async { (live_owned_pods(&client, "default", &uid).await.len() == 2).then_some(()) },
    )
    .await;
    let back = beta.get("beta").await.unwrap();
    assert_eq!(back.data["spec"]["replicas"], 2, "read back as v1beta1");

    // Swapped to a version without webhooks: unregistered, and `latest` goes through.
    let (ok, text) = push(&cluster, "podreplica", "podreplica_v2.wasm");
    assert!(ok, "{text}");
    eventually(
        Duration::from_secs(60),
        "both configurations unregistered",
        || async {
            let v = validating.get_opt("wasmop-podreplica").await.ok()?;
            let m = mutating.get_opt("wasmop-podreplica").await.ok()?;
            (v.is_none() && m.is_none()).then_some(())
        },
    )
    .await;
    let accepted = api
        .create(&pp, &pr("latest", 1, Some("busybox:latest")))
        .await;
    assert!(accepted.is_ok(), "{accepted:?}");
    drop(host);
}

/// The host fails closed: a `validate` that traps, or runs past its time limit, refuses the
/// operation with the reason, and the next request is judged afresh.
#[tokio::test(flavor = "multi_thread")]
async fn a_validate_that_traps_or_spins_refuses() {
    let cluster = Cluster::start("webhooks-hostile");
    let (host, _url) = Host::start_with_webhooks(&cluster, &["wasmop_hostile.wasm"]);
    let client = cluster.client().await;
    let ar = hostile_resource();
    wait_for_crd(&client, &ar).await;
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    eventually(
        Duration::from_secs(60),
        "the configuration registered",
        || async { validating.get_opt("wasmop-hostile").await.ok()? },
    )
    .await;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let hostile = |name: &str, mode: &str| -> DynamicObject {
        serde_json::from_value(
            json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Hostile",
            "metadata": {"name": name, "namespace": "default"}, "spec": {"mode": mode}}),
        )
        .unwrap()
    };
    let pp = PostParams::default();
    for (name, mode, why) in [
        ("trapping", "trap-in-validate", "trap"),
        ("spinning", "spin-in-validate", "time"),
    ] {
        let started = Instant::now();
        let refused = api
            .create(&pp, &hostile(name, mode))
            .await
            .unwrap_err()
            .to_string();
        println!("{mode}: refused after {:.2?}: {refused}", started.elapsed());
        assert!(
            refused.contains("plugin hostile") && refused.contains("could not validate"),
            "{refused}"
        );
        assert!(refused.to_lowercase().contains(why), "{refused}");
    }
    api.create(&pp, &hostile("calm", "ok"))
        .await
        .expect("an ordinary object is allowed after the failures");
    let failed = metric(
        &host,
        "wasmop_webhook_requests_total{plugin=\"hostile\",webhook=\"validate\",result=\"failed\"}",
    );
    assert_eq!(failed, 2.0, "the trap and the timeout counted as failed");
    drop(host);
}
