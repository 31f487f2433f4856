//! End to end: a plugin written outside this repository. `wasmop new` scaffolds a crate in
//! a temporary directory; untouched, it builds with a plain `cargo build --release`, its
//! unit tests pass under wasmtime with a plain `cargo test`, its golden case passes with
//! `wasmop test`, and under `wasmop run` on the local control plane its sample object
//! reaches its desired state (a ConfigMap it owns holds the message; Ready=True).

use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::scaffold::*;
use crate::support::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject};

#[tokio::test(flavor = "multi_thread")]
async fn a_scaffolded_plugin_builds_tests_and_runs_untouched() {
    let started = Instant::now();
    let scratch = Scratch::new("scaffold");
    let dir = scratch.0.join("greeter");
    let wasmop = env!("CARGO_BIN_EXE_wasmop");
    // From inside this checkout: the SDK dependency defaults to it.
    let out = new_greeter("greeter", &dir);
    println!("{}", String::from_utf8_lossy(&out.stdout));
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    assert!(manifest.contains("[workspace]"), "{manifest}");

    // A second `new` into the same directory is refused.
    let again = new_greeter_command("greeter", &dir).output().unwrap();
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("not empty"));

    run_ok(
        &mut cargo(&dir, &["build", "--release"]),
        "cargo build --release",
    );
    let wasm = component_of("greeter");
    assert!(wasm.is_file(), "{} not built", wasm.display());

    // `cargo test` compiles the tests to wasm32-wasip2 and runs them with `wasmop wasi-run`.
    let out = run_ok(&mut cargo(&dir, &["test"]), "cargo test");
    let text = text_of(&out);
    assert!(
        text.contains("wasm32-wasip2/debug/deps/greeter-")
            && text.contains("test result: ok. 4 passed;"),
        "{text}"
    );

    let out = run_ok(
        Command::new(wasmop)
            .arg("test")
            .arg(&wasm)
            .arg(dir.join("cases")),
        "wasmop test",
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed, 0 failed"));
    println!("scaffold built and tested: {:?}", started.elapsed());

    // The SDK as a git dependency instead: this repository, by a file:// URL.
    let from_git = scratch.0.join("greeter-git");
    let repo_url = format!("file://{}", repo().canonicalize().unwrap().display());
    run_ok(
        new_greeter_command("greeter-git", &from_git).args(["--sdk-git", &repo_url]),
        "wasmop new --sdk-git",
    );
    let manifest = std::fs::read_to_string(from_git.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains(&format!("git = \"{repo_url}\"")),
        "{manifest}"
    );
    run_ok(
        &mut cargo(&from_git, &["build", "--release"]),
        "cargo build --release (SDK from git)",
    );
    assert!(component_of("greeter-git").is_file());

    // On the local control plane: the sample reaches its desired state.
    let cluster = Cluster::start("scaffold");
    // As an admin would: the RBAC the new plugin declares (`wasmop rbac`), then the host.
    cluster.grant_files(std::slice::from_ref(&wasm));
    let host = Host::start_files(&cluster.kubeconfig, &[wasm], &[], &[]);
    let client = cluster.client().await;
    let ar = greeting_resource();
    wait_for_crd(&client, &ar).await;
    let sample: serde_json::Value =
        serde_yaml::from_str(&std::fs::read_to_string(dir.join("sample.yaml")).unwrap()).unwrap();
    let applied = apply(&client, &ar, "default", &sample).await.unwrap();
    let uid = applied.metadata.uid.clone().unwrap();
    let greetings: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    eventually(
        Duration::from_secs(60),
        "the sample Greeting Ready",
        || async {
            let g = greetings.get("greeter-sample").await.ok()?;
            let st = &g.data["status"];
            (st["configMap"] == "greeter-sample" && st["conditions"][0]["status"] == "True")
                .then_some(())
        },
    )
    .await;
    let cm = Api::<ConfigMap>::namespaced(client.clone(), "default")
        .get("greeter-sample")
        .await
        .unwrap();
    assert_eq!(
        cm.data
            .unwrap_or_default()
            .get("message")
            .map(String::as_str),
        Some("hello from greeter")
    );
    let owner = cm.metadata.owner_references.unwrap_or_default();
    assert!(
        owner
            .iter()
            .any(|o| o.uid == uid && o.controller == Some(true)),
        "the ConfigMap is not controlled by the Greeting: {owner:?}"
    );
    println!(
        "from `wasmop new` to the sample Ready on the cluster: {:?}",
        started.elapsed()
    );
    drop(host);
}
