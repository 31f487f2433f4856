//! End to end: a plugin written outside this repository. `wasmop new` scaffolds a crate in
//! a temporary directory; untouched, it builds with a plain `cargo build --release`, its
//! unit tests pass under wasmtime with a plain `cargo test`, its golden case passes with
//! `wasmop test`, and under `wasmop run` on the local control plane its sample object
//! reaches its desired state (a ConfigMap it owns holds the message; Ready=True).
//!
//! And the effects template (`wasmop new --effects`, records in an outside HTTP API by
//! requests the host sends) in each language, untouched: it builds, its unit tests pass in
//! the language's own runner and its golden case passes through the component. No cluster.

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

/// What the unit tests of each language print when all six of the effects template pass.
fn six_passed(lang: &str) -> &'static str {
    match lang {
        "rust" => "test result: ok. 6 passed;",
        "python" => "6 passed",
        "typescript" => "# pass 6",
        _ => "ok  \tnotes-go/notes_go",
    }
}

/// `wasmop new --effects` in one language into `dir`, then `wasmop build --test`, `wasmop
/// test COMPONENT cases` and `wasmop info`; panics with what failed.
fn effects_template(lang: &str, dir: &std::path::Path) {
    let started = Instant::now();
    let name = format!("notes-{}", &lang[..2]);
    let out = run_ok(
        &mut new_effects_command(&name, lang, dir),
        &format!("wasmop new --effects --lang {lang}"),
    );
    let grant = format!("--outbound-grant {name}=https://api.example.com");
    assert!(text_of(&out).contains(&grant), "{}", text_of(&out));
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(
        readme.contains(&grant) && readme.contains("--effects"),
        "{readme}"
    );

    let (out, wasm) = build_and_test(dir, &format!("wasmop build --test ({lang})"));
    let text = text_of(&out);
    assert!(text.contains(six_passed(lang)), "{lang}: {text}");
    let built = started.elapsed();

    let wasmop = env!("CARGO_BIN_EXE_wasmop");
    let out = run_ok(
        Command::new(wasmop)
            .arg("test")
            .arg(&wasm)
            .arg(dir.join("cases")),
        &format!("wasmop test ({lang})"),
    );
    assert!(
        text_of(&out).contains("1 passed, 0 failed"),
        "{lang}: {}",
        text_of(&out)
    );
    let out = run_ok(
        Command::new(wasmop).arg("info").arg(&wasm),
        &format!("wasmop info ({lang})"),
    );
    let info = text_of(&out);
    assert!(
        info.contains("finalizer: example.com/record")
            && info.contains("- https://api.example.com\n- http://127.0.0.1:*"),
        "{lang}: {info}"
    );
    println!(
        "effects template, {lang}: built and unit-tested in {built:?}, golden case and info in {:?}",
        started.elapsed() - built
    );
}

#[test]
fn effects_templates_build_and_pass_their_tests() {
    let started = Instant::now();
    let scratch = Scratch::new("scaffold-effects");
    // The four side by side: each is a build and a test run of its own toolchain.
    let failed: Vec<String> = std::thread::scope(|s| {
        let runs: Vec<_> = LANGS
            .iter()
            .map(|&lang| {
                let dir = scratch.0.join(lang);
                (lang, s.spawn(move || effects_template(lang, &dir)))
            })
            .collect();
        runs.into_iter()
            .filter_map(|(lang, run)| run.join().is_err().then(|| lang.to_string()))
            .collect()
    });
    assert!(
        failed.is_empty(),
        "the effects template failed in {failed:?} (the panics above say why)"
    );
    println!(
        "the effects template in {} languages: {:?}",
        LANGS.len(),
        started.elapsed()
    );
}
