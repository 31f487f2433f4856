//! Plugin uploads in end-to-end tests: `wasmop push`, raw WasmPlugin uploads, and the
//! verdict in a WasmPlugin's status.

use std::collections::BTreeMap;
use std::process::Command;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::json;

use super::{Cluster, apply, plugin_dir};

/// Runs `wasmop push NAME FILE` (a file of the plugins build) into namespace `default`;
/// returns whether it succeeded and what it printed.
pub fn push(cluster: &Cluster, name: &str, file: &str) -> (bool, String) {
    push_with(cluster, name, file, &[])
}

/// [`push`] with more flags (`--shadow`, `--canary 50`, ...).
pub fn push_with(cluster: &Cluster, name: &str, file: &str, extra: &[&str]) -> (bool, String) {
    let file = plugin_dir().join(file);
    let mut args = vec!["push", name, file.to_str().unwrap()];
    args.extend_from_slice(extra);
    wasmop_on(cluster, &args)
}

/// Runs `wasmop ARGS --kubeconfig K --namespace default`; returns whether it succeeded and
/// what it printed.
pub fn wasmop_on(cluster: &Cluster, args: &[&str]) -> (bool, String) {
    let kubeconfig = cluster.kubeconfig.to_str().unwrap();
    let mut all = args.to_vec();
    all.extend([
        "--kubeconfig",
        kubeconfig,
        "--namespace",
        "default",
        "--timeout",
        "120",
    ]);
    wasmop(&all)
}

/// Runs `wasmop ARGS`; returns whether it succeeded and what it printed (stdout, then
/// stderr).
pub fn wasmop(args: &[&str]) -> (bool, String) {
    run_text(Command::new(env!("CARGO_BIN_EXE_wasmop")).args(args))
}

/// Runs `command` to its end; returns whether it succeeded and what it printed (stdout,
/// then stderr).
pub fn run_text(command: &mut Command) -> (bool, String) {
    let out = command.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// The WasmPlugin API resource.
pub fn wasmplugin_resource() -> ApiResource {
    ApiResource {
        group: "wasmop.dev".into(),
        version: "v1alpha1".into(),
        api_version: "wasmop.dev/v1alpha1".into(),
        kind: "WasmPlugin".into(),
        plural: "wasmplugins".into(),
    }
}

/// Uploads raw bytes the way `wasmop push` does, but without its local checks.
pub async fn upload_raw(client: &kube::Client, name: &str, component: &[u8]) {
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(component).unwrap();
    let cm = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("raw-{name}")),
            ..Default::default()
        },
        binary_data: Some(BTreeMap::from([(
            "plugin.wasm.gz".to_string(),
            ByteString(gz.finish().unwrap()),
        )])),
        ..Default::default()
    };
    let pp = PatchParams::apply("e2e-test").force();
    Api::<ConfigMap>::namespaced(client.clone(), "default")
        .patch(&format!("raw-{name}"), &pp, &Patch::Apply(&cm))
        .await
        .unwrap();
    apply(client, &wasmplugin_resource(), "default", &json!({"apiVersion": "wasmop.dev/v1alpha1", "kind": "WasmPlugin",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"configMap": {"name": format!("raw-{name}")}, "sha256": wasmop::runtime::digest_of(component)}}))
    .await
    .unwrap();
}

/// The Ready condition's (status, reason) of WasmPlugin `name`, once the host has
/// observed its latest generation.
pub async fn ready_reason(client: &kube::Client, name: &str) -> Option<(String, String)> {
    ready_reason_in(client, "default", name).await
}

/// [`ready_reason`] of a WasmPlugin in namespace `ns`.
pub async fn ready_reason_in(
    client: &kube::Client,
    ns: &str,
    name: &str,
) -> Option<(String, String)> {
    let (status, reason, _, _) = ready_condition_in(client, ns, name).await?;
    Some((status, reason))
}

/// The Ready condition's (status, reason, message) of WasmPlugin `ns/name`, and its whole
/// status, once the host has observed its latest generation.
pub async fn ready_condition_in(
    client: &kube::Client,
    ns: &str,
    name: &str,
) -> Option<(String, String, String, serde_json::Value)> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &wasmplugin_resource());
    let wp = api.get(name).await.ok()?;
    let generation = wp.metadata.generation?;
    let s = &wp.data["status"];
    (s["observedGeneration"].as_i64() == Some(generation)).then_some(())?;
    let c = s["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")?;
    Some((
        c["status"].as_str()?.to_string(),
        c["reason"].as_str()?.to_string(),
        c["message"].as_str().unwrap_or_default().to_string(),
        s.clone(),
    ))
}

/// The notes of the Events of `default` with `reason`, each as often as it was published
/// (a repeated Event is one object whose series counts the repeats).
pub async fn event_notes(client: &kube::Client, reason: &str) -> Vec<String> {
    Api::<k8s_openapi::api::events::v1::Event>::namespaced(client.clone(), "default")
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .flat_map(|e| {
            let times = e.series.as_ref().map_or(1, |s| s.count.max(1)) as usize;
            std::iter::repeat_n(e.note.unwrap_or_default(), times)
        })
        .collect()
}
