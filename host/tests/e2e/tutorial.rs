//! The tutorials (`docs/first-operator.md` in Rust, `docs/python.md`, `docs/typescript.md`,
//! `docs/go.md`) cannot rot: every `sh` block of one is run, in order, as one bash script
//! (`set -euo pipefail`) in an empty directory, with this build's `wasmop` and the local
//! control plane's `kubectl` on the PATH and KUBECONFIG naming it. The Rust crate builds in
//! its own `target/` as a reader's would (its dependencies are compiled there each run); the
//! other languages build with the checkout's pinned toolchains. A watch times the first pod
//! from the start of the script.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::scaffold::{scaffold_target, text_of, without_our_build_env};
use crate::support::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

/// The `sh` blocks of a Markdown text, in order.
fn sh_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match (&mut current, line) {
            (None, "```sh") => current = Some(String::new()),
            (Some(block), "```") => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            (Some(block), l) => {
                block.push_str(l);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    assert!(current.is_none(), "an unclosed sh block");
    blocks
}

/// Kills the host the tutorial starts in the background if the script stopped before it
/// did (its pid is in `host.pid`).
struct TutorialHost(PathBuf);

impl Drop for TutorialHost {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(&self.0) {
            let _ = Command::new("kill").arg(pid.trim()).status();
        }
    }
}

fn bin_dir(file: &Path) -> PathBuf {
    file.parent().unwrap().to_path_buf()
}

/// What a tutorial run left: the script's output, its directory, how long it took, when the
/// first pod of its PodReplica `web` came, and the cluster (still up).
struct Run {
    text: String,
    dir: PathBuf,
    took: Duration,
    first_pod: Duration,
    cluster: Cluster,
    _scratch: Scratch,
}

/// Runs every `sh` block of `doc` (a path under the repository) on a fresh local control plane.
async fn run_tutorial(doc: &str, tag: &str) -> Run {
    let markdown = std::fs::read_to_string(repo().join(doc)).unwrap();
    let blocks = sh_blocks(&markdown);
    assert!(blocks.len() >= 5, "{doc}: {} sh blocks", blocks.len());
    let script = format!("set -euo pipefail\n{}", blocks.join("\n"));

    let cluster = Cluster::start(tag);
    let client = cluster.client().await;
    let scratch = Scratch::new(tag);
    let _host = TutorialHost(scratch.0.join("mypodreplica/host.pid"));
    let kubectl_dir = cluster.kubeconfig.parent().unwrap().join("bin");
    assert!(kubectl_dir.join("kubectl").is_file());
    let path = format!(
        "{}:{}:{}",
        bin_dir(Path::new(env!("CARGO_BIN_EXE_wasmop"))).display(),
        kubectl_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );

    // The first pod of the tutorial's PodReplica, timed from the start of the script.
    let started = Instant::now();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let first_pod = tokio::spawn(async move {
        let lp = ListParams::default().labels("tutorial.example.com/podreplica=web");
        loop {
            if pods.list(&lp).await.is_ok_and(|l| !l.items.is_empty()) {
                return started.elapsed();
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });

    let dir = scratch.0.clone();
    let kubeconfig = cluster.kubeconfig.clone();
    let out = tokio::task::spawn_blocking(move || {
        let mut bash = Command::new("bash");
        without_our_build_env(&mut bash)
            .arg("-c")
            .arg(&script)
            .current_dir(&dir)
            .env("PATH", path)
            .env("KUBECONFIG", kubeconfig)
            .env("CARGO_TERM_COLOR", "never")
            .env_remove("CARGO_TARGET_DIR")
            // Cargo's build directory (intermediate artifacts) is the one the scaffold suite
            // builds its `wasmop new` crate in, kept between runs: the same dependencies are
            // compiled once, not again for the tutorial's crate in every run. The outputs the
            // tutorial names stay under the crate's own `target/`.
            .env("CARGO_BUILD_BUILD_DIR", scaffold_target())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let text = text_of(&out);
    let took = started.elapsed();
    assert!(out.status.success(), "the tutorial {doc} failed:\n{text}");
    println!("{text}");

    // The tutorial's PodReplica left pods behind it.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let left = pods
        .list(&ListParams::default().labels("tutorial.example.com/podreplica=web"))
        .await
        .unwrap()
        .items;
    assert!(
        left.iter().any(|p| p.metadata.deletion_timestamp.is_none()),
        "{doc}: no pod of the tutorial's PodReplica left"
    );
    let first_pod = first_pod.await.unwrap();
    Run {
        text,
        dir: scratch.0.join("mypodreplica"),
        took,
        first_pod,
        cluster,
        _scratch: scratch,
    }
}

/// The golden case the tutorial had `wasmop test --update` fill in holds the two pods.
fn case_holds_two_pods(run: &Run) {
    let case = std::fs::read_to_string(run.dir.join("cases/01-first-reconcile.yaml")).unwrap();
    assert_eq!(case.matches("generateName: web-pod-").count(), 2, "{case}");
    assert!(
        run.text.contains("golden: 1 passed, 0 failed"),
        "{}",
        run.text
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn every_command_of_the_tutorial_runs() {
    let run = run_tutorial("docs/first-operator.md", "tutorial").await;
    case_holds_two_pods(&run);
    assert!(
        run.text.contains("test result: ok. 3 passed;"),
        "{}",
        run.text
    );
    println!(
        "tutorial: {:.0} s in all; the first pod {:.0} s after `wasmop new` (the crate's dependencies compiled in an earlier run, or on the way in the first)",
        run.took.as_secs_f64(),
        run.first_pod.as_secs_f64()
    );
    drop(run.cluster);
}

#[tokio::test(flavor = "multi_thread")]
async fn every_command_of_the_python_tutorial_runs() {
    let run = run_tutorial("docs/python.md", "tutorial-py").await;
    case_holds_two_pods(&run);
    assert!(run.text.contains("3 passed in"), "pytest: {}", run.text);
    println!(
        "Python tutorial: {:.0} s in all; the first pod {:.0} s after `wasmop new`",
        run.took.as_secs_f64(),
        run.first_pod.as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn every_command_of_the_typescript_tutorial_runs() {
    let run = run_tutorial("docs/typescript.md", "tutorial-ts").await;
    case_holds_two_pods(&run);
    assert!(run.text.contains("# pass 3"), "node --test: {}", run.text);
    println!(
        "TypeScript tutorial: {:.0} s in all; the first pod {:.0} s after `wasmop new`",
        run.took.as_secs_f64(),
        run.first_pod.as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn every_command_of_the_go_tutorial_runs() {
    let run = run_tutorial("docs/go.md", "tutorial-go").await;
    case_holds_two_pods(&run);
    assert!(
        run.text.contains("ok  \tmypodreplica/"),
        "go test: {}",
        run.text
    );
    println!(
        "Go tutorial: {:.0} s in all; the first pod {:.0} s after `wasmop new`",
        run.took.as_secs_f64(),
        run.first_pod.as_secs_f64()
    );
}
