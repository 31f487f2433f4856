//! End to end: a new version the host cannot watch is refused, and the running version keeps
//! deciding (issue #34). The host runs as deployed (ServiceAccount wasmop-system/wasmop with
//! the RBAC of deploy/ and, in namespace `tenant`, what `wasmop rbac` grants for the hostile
//! plugin), from a plugins directory holding the hostile plugin 0.1.0.
//!
//! 1. An upload of `hostile` 0.1.0-unwatchable, which also watches `gadgets` of group
//!    `missing.wasmop.dev` (no CRD): refused with `KindNotServed`, naming the kind; 0.1.0
//!    still decides a new object. Before the fix the version was accepted, the controller
//!    restarted, and the new one waited for ever on a cache that could not list.
//! 2. The CRD installed: refused with `HostCannotWatch`, naming the kind and the missing
//!    `list,watch` in `tenant` (the host's account may not read gadgets); 0.1.0 still decides.
//! 3. The host's reads granted (`wasmop rbac … | kubectl apply -f -`): the version activates
//!    without another upload and decides new objects.

use std::time::Duration;

use crate::support::uploads::*;
use crate::support::*;
use kube::api::{Api, DynamicObject};
use serde_json::json;

const TENANT: &str = "tenant";
const HOST_NS: &str = "wasmop-system";
const UNWATCHABLE: &str = "wasmop_hostile_unwatchable.wasm";

const GADGET_CRD: &str = r#"{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
 "metadata": {"name": "gadgets.missing.wasmop.dev"},
 "spec": {"group": "missing.wasmop.dev", "scope": "Namespaced",
  "names": {"kind": "Gadget", "plural": "gadgets", "singular": "gadget", "listKind": "GadgetList"},
  "versions": [{"name": "v1", "served": true, "storage": true,
   "schema": {"openAPIV3Schema": {"type": "object", "properties": {
    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}}"#;

/// `kubectl ARGS` as the admin; must succeed.
fn kubectl(cluster: &Cluster, args: &[&str]) {
    let out = cluster.kubectl().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Applies what `wasmop rbac FILE --namespace tenant` prints (the plugin's account and the
/// host's reads for it).
fn grant(cluster: &Cluster, file: &str) {
    let path = plugin_dir().join(file);
    let (ok, yaml) = wasmop(&["rbac", path.to_str().unwrap(), "--namespace", TENANT]);
    assert!(ok, "{yaml}");
    cluster.apply_yaml(&yaml);
}

/// The (reason, message) of WasmPlugin `hostile`'s Ready condition once it is `reason`.
async fn verdict(client: &kube::Client, reason: &str) -> String {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), HOST_NS, &wasmplugin_resource());
    eventually(
        Duration::from_secs(60),
        &format!("WasmPlugin hostile {reason}"),
        || async {
            let (_, now) = ready_reason_in(client, HOST_NS, "hostile").await?;
            (now == reason).then_some(())?;
            let wp = api.get("hostile").await.ok()?;
            let conditions = wp.data["status"]["conditions"].as_array()?.clone();
            let ready = conditions.iter().find(|c| c["type"] == "Ready")?;
            ready["message"].as_str().map(str::to_string)
        },
    )
    .await
}

/// Creates Hostile `name` (mode `ok`) and returns the plugin version that decided it.
async fn decided_by(client: &kube::Client, name: &str) -> String {
    apply(
        client,
        &hostile_resource(),
        TENANT,
        &json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Hostile",
                "metadata": {"name": name, "namespace": TENANT}, "spec": {"mode": "ok"}}),
    )
    .await
    .unwrap();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), TENANT, &hostile_resource());
    eventually(
        Duration::from_secs(60),
        &format!("{name} decided"),
        || async {
            let h = api.get(name).await.ok()?;
            h.data["status"]["version"].as_str().map(str::to_string)
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_version_the_host_cannot_watch_is_refused_and_the_old_one_keeps_deciding() {
    let cluster = Cluster::start("kinds");
    let client = cluster.client().await;
    let deploy = repo().join("deploy");
    for part in ["namespace.yaml", "crds", "rbac.yaml"] {
        kubectl(
            &cluster,
            &["apply", "-f", deploy.join(part).to_str().unwrap()],
        );
    }
    kubectl(&cluster, &["create", "namespace", TENANT]);
    let hostile = plugin_dir().join("wasmop_hostile.wasm");
    let (ok, crd) = wasmop(&["info", "--crd", hostile.to_str().unwrap()]);
    assert!(ok, "{crd}");
    cluster.apply_yaml(&crd);
    grant(&cluster, "wasmop_hostile.wasm");
    wait_for_crd(&client, &hostile_resource()).await;
    let kubeconfig = cluster.kubeconfig_for(HOST_NS, "wasmop");
    let args = [
        "--namespace",
        TENANT,
        "--plugin-namespace",
        HOST_NS,
        "--permissions-recheck-seconds",
        "1",
    ];
    let mut host = Host::start_deployed(&kubeconfig, &["wasmop_hostile.wasm"], &args, &[]);
    assert_eq!(decided_by(&client, "first").await, "0.1.0");

    // 1. No CRD for gadgets: refused, naming the kind.
    let (ok, out) = wasmop(&[
        "push",
        "hostile",
        plugin_dir().join(UNWATCHABLE).to_str().unwrap(),
        "--kubeconfig",
        cluster.kubeconfig.to_str().unwrap(),
        "--namespace",
        HOST_NS,
        "--timeout",
        "60",
    ]);
    assert!(!ok, "the push must report the refusal: {out}");
    assert!(out.contains("KindNotServed"), "{out}");
    let message = verdict(&client, "KindNotServed").await;
    assert!(
        message.contains("relation `gadgets`")
            && message.contains("missing.wasmop.dev/v1 Gadget (resource `gadgets`, namespaced)"),
        "{message}"
    );
    println!("1. no CRD: {message}");
    assert_eq!(decided_by(&client, "while-no-crd").await, "0.1.0");

    // 2. The CRD is there, the host may not read gadgets: refused, naming the kind.
    cluster.apply_yaml(GADGET_CRD);
    let message = verdict(&client, "HostCannotWatch").await;
    assert!(
        message
            .contains("kind Gadget (missing.wasmop.dev gadgets [list,watch] in namespace tenant)")
            && message.contains("wasmop rbac PLUGIN.wasm --namespace tenant"),
        "{message}"
    );
    println!("2. no RBAC: {message}");
    assert_eq!(decided_by(&client, "while-no-rbac").await, "0.1.0");

    // 3. Granted: it activates without another upload.
    grant(&cluster, UNWATCHABLE);
    verdict(&client, "Loaded").await;
    assert_eq!(decided_by(&client, "now-new").await, "0.1.0-unwatchable");
    println!("3. granted: 0.1.0-unwatchable active and deciding");
    assert!(host.terminate(Duration::from_secs(20)));
    let log = host.log_text();
    assert!(!log.contains("panicked"), "{log}");
}
