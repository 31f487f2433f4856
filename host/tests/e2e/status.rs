//! End to end: `kubectl wasmop status` through kubectl's own plugin mechanism (the `wasmop`
//! binary on PATH as `kubectl-wasmop`), with kubectl's flags: the active version and digest
//! and the shadow candidate's agreement from the WasmPlugins, the primaries counted, the
//! reconciles and errors of the last minute and the plans refused by rule from the host's
//! metrics (exactly the count the host holds once the refused object is gone); an
//! unreachable context said as such, and no host found said as such.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::support::uploads::*;
use crate::support::*;
use kube::api::{Api, DynamicObject};
use serde_json::json;

/// Runs `kubectl ARGS` with a PATH that finds `kubectl-wasmop` in `bin`; (success, output).
fn kubectl_with_plugin(cluster: &Cluster, bin: &Path, args: &[&str]) -> (bool, String) {
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    run_text(
        Command::new(cluster.state.join("bin/kubectl"))
            .args(args)
            .env("PATH", path)
            .env_remove("KUBECONFIG"),
    )
}

/// The number after `label` on the line starting with `line` (trimmed).
fn number_on(text: &str, line: &str, label: &str) -> Option<f64> {
    let l = text.lines().map(str::trim).find(|l| l.starts_with(line))?;
    let before = l.split(label).next()?;
    before.split_whitespace().last()?.parse().ok()
}

/// The host's count of refused plans of the hostile plugin, by rule.
fn refused_by_rule(host: &Host) -> std::collections::BTreeMap<String, f64> {
    let prefix = "wasmop_rejected_plans_total{plugin=\"hostile\",rule=\"";
    let (_, metrics) = host.http_get("/metrics").unwrap_or_default();
    metrics
        .lines()
        .filter_map(|l| {
            let (rule, value) = l.strip_prefix(prefix)?.split_once("\"} ")?;
            Some((rule.to_owned(), value.parse().ok()?))
        })
        .collect()
}

/// The lines of one WasmPlugin's block in the status output.
fn block(text: &str, name: &str) -> String {
    let head = format!("WasmPlugin default/{name}:");
    text.lines()
        .skip_while(|l| !l.starts_with(&head))
        .enumerate()
        .take_while(|(i, l)| *i == 0 || l.starts_with(' '))
        .map(|(_, l)| format!("{l}\n"))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_wasmop_status_tells_versions_objects_activity_and_refusals() {
    let cluster = Cluster::start("status");
    let host = Host::start(
        &cluster,
        &["podreplica.wasm", "wasmop_hostile.wasm"],
        &[],
        &[],
    );
    let client = cluster.client().await;
    wait_for_crd(&client, &podreplica_resource()).await;
    wait_for_crd(&client, &hostile_resource()).await;
    wait_for_crd(&client, &wasmplugin_resource()).await;

    // kubectl finds the plugin by its name on PATH: the wasmop binary under a symlink.
    let bin = Scratch::new("kubectl-plugin");
    std::fs::create_dir_all(&bin.0).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_wasmop"), bin.0.join("kubectl-wasmop")).unwrap();
    // A kubeconfig whose current context points nowhere: only `--context` reaches the
    // cluster, and only its namespace (`default`) names where the WasmPlugins are.
    let kubeconfig = bin.0.join("kubeconfig");
    std::fs::copy(&cluster.kubeconfig, &kubeconfig).unwrap();
    let kc = kubeconfig.to_str().unwrap();
    let good = String::from_utf8(
        cluster
            .kubectl()
            .args(["config", "current-context"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .trim()
    .to_owned();
    let cluster_name = String::from_utf8(
        cluster
            .kubectl()
            .args([
                "config",
                "view",
                "-o",
                "jsonpath={.contexts[0].context.cluster}",
            ])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    for args in [
        vec![
            "config",
            "set-cluster",
            "nowhere",
            "--server",
            "https://127.0.0.1:1",
        ],
        vec![
            "config",
            "set-context",
            "nowhere",
            "--cluster",
            "nowhere",
            "--user",
            "nobody",
        ],
        vec!["config", "use-context", "nowhere"],
        vec![
            "config",
            "set-context",
            &good,
            "--cluster",
            &cluster_name,
            "--namespace",
            "default",
        ],
    ] {
        let ok = Command::new(cluster.state.join("bin/kubectl"))
            .args(&args)
            .args(["--kubeconfig", kc])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kubectl {args:?}");
    }

    // `kubectl wasmop --help` names itself as kubectl's plugin.
    let (ok, help) = kubectl_with_plugin(&cluster, &bin.0, &["wasmop", "--help"]);
    assert!(ok, "{help}");
    assert!(help.contains("Usage: kubectl wasmop"), "{help}");

    // Push both plugins through kubectl (its flags after the plugin's name, as kubectl wants).
    for (name, file) in [
        ("podreplica", "podreplica.wasm"),
        ("hostile", "wasmop_hostile.wasm"),
    ] {
        let file = plugin_dir().join(file);
        let (ok, text) = kubectl_with_plugin(
            &cluster,
            &bin.0,
            &[
                "wasmop",
                "push",
                name,
                file.to_str().unwrap(),
                "--kubeconfig",
                kc,
                "--context",
                &good,
            ],
        );
        assert!(ok, "{text}");
        assert!(
            text.contains(&format!("WasmPlugin default/{name}")),
            "{text}"
        );
    }
    // Without --context the current context (nowhere) is used, and the command says so.
    let (ok, text) =
        kubectl_with_plugin(&cluster, &bin.0, &["wasmop", "status", "--kubeconfig", kc]);
    assert!(!ok, "the context pointing nowhere cannot succeed: {text}");
    // What it tried (listing the WasmPlugins) and why it failed (nothing listens on port 1
    // of the context's server), and nothing printed as if it had read a plugin.
    assert!(
        text.contains("listing WasmPlugins in default on https://127.0.0.1:1/")
            && text.contains("tcp connect error: Connection refused"),
        "status says it could not reach the API server, and which: {text}"
    );
    // Said once, by the command: no log line of the client library repeats it.
    assert!(!text.contains("ERROR"), "{text}");
    assert!(!text.contains("WasmPlugin default/"), "{text}");

    // 30 PodReplicas, a hostile object whose every plan the guard refuses (a Secret, which
    // the guard protects), and v2 as a shadow candidate of PodReplica.
    let names: Vec<String> = (0..30).map(|i| format!("status-{i}")).collect();
    for n in &names {
        apply(
            &client,
            &podreplica_resource(),
            "default",
            &json!({"apiVersion": "app.example.com/v1alpha1", "kind": "PodReplica",
                    "metadata": {"name": n, "namespace": "default"}, "spec": {"size": 2}}),
        )
        .await
        .unwrap();
    }
    apply(
        &client,
        &hostile_resource(),
        "default",
        &json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Hostile",
                "metadata": {"name": "thief", "namespace": "default"},
                "spec": {"mode": "attack-secret"}}),
    )
    .await
    .unwrap();
    let file = plugin_dir().join("podreplica_v2.wasm");
    let (ok, text) = kubectl_with_plugin(
        &cluster,
        &bin.0,
        &[
            "wasmop",
            "push",
            "podreplica",
            file.to_str().unwrap(),
            "--shadow",
            "--kubeconfig",
            kc,
            "--context",
            &good,
        ],
    );
    assert!(ok, "{text}");
    let wps: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &wasmplugin_resource());
    let wp = eventually(
        Duration::from_secs(60),
        "shadow decisions counted",
        || async {
            let wp = wps.get("podreplica").await.ok()?;
            (wp.data["status"]["rollout"]["decisions"].as_u64()? >= 30).then_some(wp)
        },
    )
    .await;
    eventually(
        Duration::from_secs(60),
        "a refused plan counted",
        || async { (!refused_by_rule(&host).is_empty()).then_some(()) },
    )
    .await;
    // The thief's plans are refused on every retry of its backoff, so their count grows with
    // time. Deleted (its cleanup lets go of the finalizer), it is decided no more: once the
    // API server no longer has it, its last refused reconcile has ended (a reconcile and the
    // cleanup that follows it never run at once), and the count is what the scenario
    // caused, the same before and after status reads it.
    let hostiles: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &hostile_resource());
    hostiles.delete("thief", &Default::default()).await.unwrap();
    eventually(Duration::from_secs(60), "the thief gone", || async {
        matches!(
            hostiles.get("thief").await,
            Err(kube::Error::Api(e)) if e.code == 404
        )
        .then_some(())
    })
    .await;
    let frozen = refused_by_rule(&host);

    let metrics_url = format!("http://{}/metrics", host.addr);
    let (ok, text) = kubectl_with_plugin(
        &cluster,
        &bin.0,
        &[
            "wasmop",
            "status",
            "--kubeconfig",
            kc,
            "--context",
            &good,
            "--metrics",
            &metrics_url,
        ],
    );
    println!("{text}");
    assert!(ok, "every plugin Ready and the host read: {text}");
    let metrics = host.http_get("/metrics").unwrap().1;

    let pr = block(&text, "podreplica");
    assert!(pr.contains("WasmPlugin default/podreplica: Ready"), "{pr}");
    let digest = wp.data["status"]["digest"].as_str().unwrap();
    let hex = digest.trim_start_matches("sha256:");
    let version = wp.data["status"]["pluginVersion"].as_str().unwrap();
    assert!(
        pr.contains(&format!("active      podreplica {version}  {}", &hex[..12])),
        "{pr}"
    );
    let candidate = &wp.data["status"]["candidate"];
    assert!(
        pr.contains(&format!(
            "candidate   {} {}  Shadow",
            candidate["version"].as_str().unwrap(),
            &candidate["digest"]
                .as_str()
                .unwrap()
                .trim_start_matches("sha256:")[..12]
        )),
        "{pr}"
    );
    assert!(pr.contains("agreement "), "{pr}");
    assert!(
        pr.contains("objects     30 podreplicas.app.example.com"),
        "{pr}"
    );
    let reconciles = number_on(&pr, "last minute", "reconciles").expect("reconciles");
    assert!(
        reconciles >= 30.0,
        "every PodReplica reconciled within the minute: {pr}"
    );
    assert_eq!(number_on(&pr, "last minute", "errors"), Some(0.0), "{pr}");
    assert!(
        pr.contains("refused     no plan since the hosts started"),
        "{pr}"
    );

    let hostile = block(&text, "hostile");
    let after = refused_by_rule(&host);
    println!("refused by rule, before status: {frozen:?}, after: {after:?}");
    // Positive first: the scenario's one kind of refusal (a Secret, which the guard
    // protects), counted at least once; then status prints exactly that count, as the host
    // counted it before and after (no refusal came in between).
    assert_eq!(
        frozen.keys().collect::<Vec<_>>(),
        ["protected"],
        "the thief's plans refused by one rule: {metrics}"
    );
    let n = frozen["protected"];
    assert!(n >= 1.0, "{frozen:?}");
    assert_eq!(after, frozen, "a plan refused after the thief was gone");
    let rule_line = hostile
        .lines()
        .find(|l| l.trim_start().starts_with("refused"))
        .unwrap_or_default()
        .trim()
        .to_owned();
    assert_eq!(
        rule_line,
        format!("refused     protected {n} (plans, by rule, since the hosts started)"),
        "{hostile}"
    );
    assert!(
        number_on(&hostile, "last minute", "errors").unwrap() >= 1.0,
        "{hostile}"
    );

    // Without --metrics, the host is looked for as deployed (pods in wasmop-system): there
    // is none here, and status says so and fails, still printing the WasmPlugins.
    let (ok, text) = kubectl_with_plugin(
        &cluster,
        &bin.0,
        &[
            "wasmop",
            "status",
            "podreplica",
            "--kubeconfig",
            kc,
            "--context",
            &good,
        ],
    );
    assert!(!ok, "{text}");
    assert!(
        text.contains("WasmPlugin default/podreplica: Ready"),
        "{text}"
    );
    assert!(text.contains("no host pod found"), "{text}");
    drop(host);
}
