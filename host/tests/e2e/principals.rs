//! End to end: plugins as principals. The host runs as deployed (the token of
//! ServiceAccount wasmop-system/wasmop, the RBAC of deploy/, not the admin kubeconfig), and
//! every write a plugin's plan causes goes out as the plugin's own ServiceAccount.
//!
//! 1. PodReplica and ChaosPod work under their identities; the API server's audit log names
//!    each plugin's ServiceAccount as the (impersonated) user of its writes.
//! 2. A hostile plugin that declares only `pods: create` (granted in namespace `tenant` only)
//!    plans, one object each: a pod in another namespace, a ClusterRoleBinding, a Secret,
//!    adoption of a foreign ConfigMap, an ownerReference to a foreign object, a privileged
//!    pod, a WasmPlugin. The guard refuses each with its rule (the privileged pod: the API
//!    server's Pod Security); nothing is written.
//! 3. The same with the guard off (`--unsafe-disable-guard`, tests only): the API server
//!    refuses each on its own (RBAC of the plugin's account, owner-reference enforcement, Pod
//!    Security); nothing is written, and the audit log shows the refusals as the plugin's.
//! 4. A version that declares a new permission (`configmaps: create, patch`) is uploaded:
//!    `PermissionsMissing` with the rule, the old version keeps deciding; `wasmop rbac … |
//!    kubectl apply -f -` activates it without another upload; its adoption of the foreign
//!    ConfigMap is then refused by the guard's `adoption` rule (RBAC cannot say "only what
//!    you control").

use std::time::Duration;

use crate::support::uploads::*;
use crate::support::*;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use serde_json::{Value, json};

const TENANT: &str = "tenant";
const VICTIM: &str = "victim";
const HOST_NS: &str = "wasmop-system";

/// The attacks, each with the rule the guard refuses it by.
const ATTACKS: [(&str, &str); 7] = [
    ("attack-other-namespace", "namespace"),
    ("attack-clusterrolebinding", "protected"),
    ("attack-secret", "protected"),
    ("attack-adopt", "undeclared"),
    ("attack-owner", "owner-reference"),
    ("attack-privileged", "api-server"),
    ("attack-wasmplugin", "protected"),
];

/// `kubectl ARGS` as the admin; must succeed; its output.
fn kubectl(cluster: &Cluster, args: &[&str]) -> String {
    let out = cluster.kubectl().args(args).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "kubectl {args:?}: {text}");
    text
}

/// The message of the newest `PlanRejected` Event about Hostile `name`, once there is one.
async fn rejection_of(client: &kube::Client, name: &str) -> String {
    let events: Api<Event> = Api::namespaced(client.clone(), TENANT);
    eventually(
        Duration::from_secs(60),
        &format!("a PlanRejected Event about {name}"),
        || async {
            let list = events.list(&ListParams::default()).await.ok()?;
            list.items
                .into_iter()
                .filter(|e| {
                    e.reason.as_deref() == Some("PlanRejected")
                        && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                })
                .max_by_key(|e| e.metadata.creation_timestamp.clone().map(|t| t.0))
                .and_then(|e| e.note)
        },
    )
    .await
}

/// Creates Hostile `name` running `mode` in the tenant namespace.
async fn hostile(client: &kube::Client, name: &str, mode: &str, owner: &ConfigMap) {
    let spec = json!({"mode": mode, "target": if mode == "attack-wasmplugin" { HOST_NS }
        else if mode == "attack-adopt" { "foreign" } else { VICTIM },
        "ownerName": owner.metadata.name, "ownerUid": owner.metadata.uid});
    apply(
        client,
        &hostile_resource(),
        TENANT,
        &json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Hostile",
                "metadata": {"name": name, "namespace": TENANT}, "spec": spec}),
    )
    .await
    .unwrap();
}

/// Nothing any attack aimed at exists or changed.
async fn nothing_written(client: &kube::Client) {
    let victim_pods: Api<Pod> = Api::namespaced(client.clone(), VICTIM);
    assert!(
        victim_pods
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let crbs: Api<ClusterRoleBinding> = Api::all(client.clone());
    assert!(crbs.get_opt("hostile-escalation").await.unwrap().is_none());
    let secrets: Api<Secret> = Api::namespaced(client.clone(), TENANT);
    assert!(secrets.get_opt("hostile-secret").await.unwrap().is_none());
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), TENANT);
    let foreign = cms.get("foreign").await.unwrap();
    assert!(foreign.metadata.owner_references.is_none(), "{foreign:?}");
    assert_eq!(
        foreign
            .data
            .unwrap_or_default()
            .get("owner")
            .map(String::as_str),
        Some("nobody")
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), TENANT);
    let names: Vec<String> = pods
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .filter(|n| n.starts_with("hostile-"))
        .collect();
    assert!(names.is_empty(), "hostile pods exist: {names:?}");
    let wps: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), HOST_NS, &wasmplugin_resource());
    assert!(wps.get_opt("hostile-upload").await.unwrap().is_none());
}

/// Audit events (Metadata level) of the local control plane so far.
fn audit(cluster: &Cluster) -> Vec<Value> {
    cluster.audit_since(0).0
}

/// Whether the audit log has a `verb` on `resource` in `ns` made by the host as `plugin`'s
/// ServiceAccount, answered with `code`.
fn audited(
    cluster: &Cluster,
    plugin: &str,
    verb: &str,
    resource: &str,
    ns: &str,
    code: i64,
) -> bool {
    let sa = format!("system:serviceaccount:{HOST_NS}:wasmop-plugin-{plugin}");
    audit(cluster).iter().any(|e| {
        e["user"]["username"] == "system:serviceaccount:wasmop-system:wasmop"
            && e["impersonatedUser"]["username"] == sa.as_str()
            && e["verb"] == verb
            && e["objectRef"]["resource"] == resource
            && e["objectRef"]["namespace"] == ns
            && e["responseStatus"]["code"] == code
    })
}

fn host_args(extra: &[&'static str]) -> Vec<&'static str> {
    let mut a = vec![
        "--namespace",
        TENANT,
        "--plugin-namespace",
        HOST_NS,
        "--permissions-recheck-seconds",
        "1",
    ];
    a.extend_from_slice(extra);
    a
}

#[tokio::test(flavor = "multi_thread")]
async fn plugins_act_as_their_own_service_accounts() {
    let cluster = Cluster::start("principals");
    let client = cluster.client().await;
    // As an admin deploys: deploy/ (namespace, CRDs, the host's RBAC, the bundled plugins'
    // RBAC); the hostile plugin's CRD and its RBAC, in the tenant namespace only.
    let deploy = repo().join("deploy");
    for part in ["namespace.yaml", "crds", "rbac.yaml", "plugins"] {
        kubectl(
            &cluster,
            &["apply", "-f", deploy.join(part).to_str().unwrap()],
        );
    }
    for ns in [TENANT, VICTIM] {
        kubectl(&cluster, &["create", "namespace", ns]);
        // As we recommend (the local control plane's default is baseline too).
        kubectl(
            &cluster,
            &[
                "label",
                "namespace",
                ns,
                "pod-security.kubernetes.io/enforce=baseline",
            ],
        );
    }
    let (ok, crd) = wasmop(&[
        "info",
        "--crd",
        plugin_dir().join("wasmop_hostile.wasm").to_str().unwrap(),
    ]);
    assert!(ok, "{crd}");
    cluster.apply_yaml(&crd);
    let grant_hostile = |file: &str| {
        let (ok, yaml) = wasmop(&[
            "rbac",
            plugin_dir().join(file).to_str().unwrap(),
            "--namespace",
            TENANT,
        ]);
        assert!(ok, "{yaml}");
        cluster.apply_yaml(&yaml);
    };
    grant_hostile("wasmop_hostile.wasm");
    wait_for_crd(&client, &hostile_resource()).await;
    wait_for_crd(&client, &podreplica_resource()).await;
    // Someone else's ConfigMap: the target of the adoption and of the foreign owner.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), TENANT);
    let foreign = cms
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"metadata": {"name": "foreign"}, "data": {"owner": "nobody"}}),
            )
            .unwrap(),
        )
        .await
        .unwrap();

    let kubeconfig = cluster.kubeconfig_for(HOST_NS, "wasmop");
    let plugins = ["podreplica.wasm", "chaospod.wasm", "wasmop_hostile.wasm"];
    let mut host = Host::start_deployed(&kubeconfig, &plugins, &host_args(&[]), &[]);

    // 1. The article's scenario under per-plugin identities.
    let pr = apply(
        &client,
        &podreplica_resource(),
        TENANT,
        &json!({"apiVersion": "app.example.com/v1alpha1", "kind": "PodReplica",
                "metadata": {"name": "web", "namespace": TENANT}, "spec": {"size": 2}}),
    )
    .await
    .unwrap();
    let uid = pr.metadata.uid.clone().unwrap();
    eventually(Duration::from_secs(60), "2 pods of web", || async {
        (live_owned_pods(&client, TENANT, &uid).await.len() == 2).then_some(())
    })
    .await;
    let victim = live_owned_pods(&client, TENANT, &uid).await[0].0.clone();
    apply(
        &client,
        &chaospod_resource(),
        TENANT,
        &json!({"apiVersion": "app.example.com/v1alpha1", "kind": "ChaosPod",
                "metadata": {"name": "chaos", "namespace": TENANT},
                "spec": {"prefix": victim, "intervalSeconds": 1, "maxKillsPerRun": 1}}),
    )
    .await
    .unwrap();
    eventually(Duration::from_secs(60), "the victim replaced", || async {
        let pods = live_owned_pods(&client, TENANT, &uid).await;
        (pods.len() == 2 && pods.iter().all(|(n, _)| *n != victim)).then_some(())
    })
    .await;
    eventually(
        Duration::from_secs(30),
        "the audit log names the plugins' accounts",
        || async {
            (audited(&cluster, "podreplica", "create", "pods", TENANT, 201)
                && audited(&cluster, "podreplica", "patch", "podreplicas", TENANT, 200)
                && audited(&cluster, "chaospod", "delete", "pods", TENANT, 200))
            .then_some(())
        },
    )
    .await;
    println!("1. PodReplica and ChaosPod act as their own ServiceAccounts (audit log)");

    // 2. The attacks, with the guard.
    for (mode, rule) in ATTACKS {
        let name = format!("guarded-{}", mode.trim_start_matches("attack-"));
        hostile(&client, &name, mode, &foreign).await;
        let note = rejection_of(&client, &name).await;
        assert!(note.contains(&format!("rule `{rule}`")), "{mode}: {note}");
        if mode == "attack-privileged" {
            assert!(note.contains("PodSecurity"), "{note}");
        }
        println!(
            "2. {mode}: refused by {}: {note}",
            if rule == "api-server" {
                "the API server"
            } else {
                "the guard"
            }
        );
    }
    nothing_written(&client).await;
    let metrics = host.http_get("/metrics").unwrap().1;
    for rule in [
        "namespace",
        "protected",
        "undeclared",
        "owner-reference",
        "api-server",
    ] {
        assert!(
            metrics.contains(&format!(
                "wasmop_rejected_plans_total{{plugin=\"hostile\",rule=\"{rule}\"}}"
            )),
            "no rejection metric for {rule}"
        );
    }

    // 3. The same attacks with the guard off: the API server refuses each on its own.
    assert!(host.terminate(Duration::from_secs(20)));
    let host_unguarded = Host::start_deployed(
        &kubeconfig,
        &plugins,
        &host_args(&["--unsafe-disable-guard"]),
        &[],
    );
    for (mode, _) in ATTACKS {
        let name = format!("raw-{}", mode.trim_start_matches("attack-"));
        hostile(&client, &name, mode, &foreign).await;
        let note = rejection_of(&client, &name).await;
        assert!(note.contains("rule `api-server`"), "{mode}: {note}");
        let why = match mode {
            "attack-privileged" => "PodSecurity",
            "attack-owner" => "blockOwnerDeletion",
            _ => "forbidden",
        };
        assert!(note.contains(why), "{mode}: {note}");
        println!("3. {mode}: refused by the API server: {note}");
    }
    nothing_written(&client).await;
    assert!(audited(
        &cluster, "hostile", "patch", "secrets", TENANT, 403
    ));
    assert!(audited(&cluster, "hostile", "create", "pods", VICTIM, 403));
    drop(host_unguarded);

    // 4. A version that declares more than its account holds waits for an admin.
    let mut host = Host::start_deployed(&kubeconfig, &plugins, &host_args(&[]), &[]);
    eventually(Duration::from_secs(60), "host ready", || async {
        (host.http_get("/readyz")?.0 == 200).then_some(())
    })
    .await;
    let (ok, out) = wasmop(&[
        "push",
        "hostile",
        plugin_dir()
            .join("wasmop_hostile_more.wasm")
            .to_str()
            .unwrap(),
        "--kubeconfig",
        cluster.kubeconfig.to_str().unwrap(),
        "--namespace",
        HOST_NS,
        "--timeout",
        "60",
    ]);
    assert!(!ok, "the push must report the refusal: {out}");
    assert!(out.contains("PermissionsMissing"), "{out}");
    assert!(
        out.contains("configmaps [create]") && out.contains("wasmop rbac"),
        "{out}"
    );
    println!("4. push of a version declaring configmaps: {out}");
    // The running version keeps deciding: a new object is decided by 0.1.0.
    hostile(&client, "still-old", "ok", &foreign).await;
    let hostiles: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), TENANT, &hostile_resource());
    let version_of = |name: &'static str| {
        let hostiles = hostiles.clone();
        async move {
            let h = hostiles.get(name).await.ok()?;
            h.data["status"]["version"].as_str().map(str::to_string)
        }
    };
    let v = eventually(Duration::from_secs(60), "still-old decided", || {
        version_of("still-old")
    })
    .await;
    assert_eq!(v, "0.1.0");
    // The admin grants what the new version declares: it activates, no second upload.
    grant_hostile("wasmop_hostile_more.wasm");
    eventually(
        Duration::from_secs(60),
        "the new version activated",
        || async {
            (ready_reason_in(&client, HOST_NS, "hostile").await?
                == ("True".into(), "Loaded".into()))
                .then_some(())
        },
    )
    .await;
    hostile(&client, "now-new", "ok", &foreign).await;
    eventually(
        Duration::from_secs(60),
        "now-new decided by 0.1.0-more",
        || async { (version_of("now-new").await? == "0.1.0-more").then_some(()) },
    )
    .await;
    // Now allowed to patch ConfigMaps, it still may not take over one it does not control.
    hostile(&client, "adopt-again", "attack-adopt", &foreign).await;
    let note = rejection_of(&client, "adopt-again").await;
    assert!(note.contains("rule `adoption`"), "{note}");
    println!("4. granted and activated; adoption refused: {note}");
    nothing_written(&client).await;
    assert!(host.terminate(Duration::from_secs(20)));
    let log = host.log_text();
    assert!(!log.contains("panicked"), "{log}");
}
