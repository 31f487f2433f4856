//! End to end: `wasmop dev` on a plugin scaffolded by `wasmop new`, in Rust and in Python.
//! The sample reaches its desired state; an edit of the source (a new label on the
//! ConfigMaps it writes) is built and swapped in within a minute of the save (about 10 s; two
//! minutes for Python, whose build makes the whole component again),
//! and objects decided afterwards carry the label; a syntax error is reported with the
//! compiler's message while the last good version keeps running; SIGTERM stops the host and
//! the local control plane (`--local`) it started.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::scaffold::*;
use crate::support::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::Api;
use serde_json::json;

/// A `wasmop dev` child, its output in a log file; stopped (SIGTERM) when dropped.
struct Dev {
    child: Child,
    log: std::path::PathBuf,
    addr: String,
}

impl Dev {
    /// `wasmop dev DIR --local`: it starts a local control plane of its own.
    fn start(dir: &Path, log: std::path::PathBuf) -> Dev {
        let addr = format!("127.0.0.1:{}", free_port());
        let file = std::fs::File::create(&log).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_wasmop"));
        cmd.arg("dev")
            .arg(dir)
            .arg("--local")
            .args(["--listen", &addr, "--poll-ms", "200"])
            .current_dir(repo())
            .env("WASMOP_LOG", "info")
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file);
        author_env(&mut cmd);
        Dev {
            child: cmd.spawn().expect("start wasmop dev"),
            log,
            addr,
        }
    }

    fn text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn terminate(&mut self) -> bool {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let until = Instant::now() + Duration::from_secs(30);
        while Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }
}

impl Drop for Dev {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- wasmop dev log ---\n{}", self.text());
        }
        if !self.terminate() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn greeting(name: &str, message: &str) -> serde_json::Value {
    json!({"apiVersion": "example.com/v1alpha1", "kind": "Greeting",
        "metadata": {"name": name, "namespace": "default"}, "spec": {"message": message}})
}

/// The labels of ConfigMap `name`, once it holds `message`.
async fn config_map_labels(
    client: &Client,
    name: &str,
    message: &str,
) -> Option<std::collections::BTreeMap<String, String>> {
    let cm = Api::<ConfigMap>::namespaced(client.clone(), "default")
        .get(name)
        .await
        .ok()?;
    (cm.data.as_ref()?.get("message")? == message).then(|| cm.metadata.labels.unwrap_or_default())
}

const LABEL: &str = "greeter.example.com/edited";

/// Applies a Greeting and waits for its ConfigMap; returns the ConfigMap's labels.
async fn greet(
    client: &Client,
    name: &str,
    message: &str,
) -> std::collections::BTreeMap<String, String> {
    apply(
        client,
        &greeting_resource(),
        "default",
        &greeting(name, message),
    )
    .await
    .unwrap();
    eventually(
        Duration::from_secs(120),
        &format!("the ConfigMap of Greeting {name}"),
        || config_map_labels(client, name, message),
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn dev_rebuilds_and_swaps_on_save_and_keeps_the_last_good_version() {
    let scratch = Scratch::new("dev");
    let dir = scratch.0.join("greeter");
    new_greeter("greeter", &dir);
    dev_loop(
        &scratch,
        &dir,
        "src/lib.rs",
        ("fn broken( {", "error"),
        Duration::from_secs(60),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn dev_rebuilds_and_swaps_a_python_plugin_on_save() {
    let scratch = Scratch::new("dev-py");
    let dir = scratch.0.join("greeter");
    let mut new = new_greeter_command("greeter", &dir);
    new.args(["--lang", "python"]);
    let out = new.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // componentize-py builds the whole component again (CPython included: 18 s on a quiet
    // 2-core machine, 50 s beside a compile) and the host compiles 18 MiB of it (10-27 s):
    // two minutes is the bound here.
    dev_loop(
        &scratch,
        &dir,
        "greeter/__init__.py",
        ("def broken(:", "SyntaxError"),
        Duration::from_secs(120),
    )
    .await;
}

/// The loop of `wasmop dev` on the scaffolded plugin in `dir`: its sample decided, an edit of
/// `source` swapped in within `bound` of the save, `broken` appended to it reported (the
/// message holds `error`) within `bound` while the edited version keeps running, and SIGTERM
/// stopping everything.
async fn dev_loop(
    scratch: &Scratch,
    dir: &Path,
    source: &str,
    (broken, error): (&str, &str),
    bound: Duration,
) {
    let mut dev = Dev::start(dir, scratch.0.join("dev.log"));
    // The first build may compile every dependency (a cold cache): minutes, not seconds.
    // Then dev starts the local control plane and says where its kubeconfig is.
    let kubeconfig = eventually(
        Duration::from_secs(900),
        "dev's local control plane",
        || async {
            let text = dev.text();
            let line = text.lines().find(|l| l.contains("export KUBECONFIG="))?;
            Some(std::path::PathBuf::from(line.rsplit('=').next()?.trim()))
        },
    )
    .await;
    // Stopped with dev; dropped here too should dev not have stopped it.
    let cluster = Cluster {
        state: kubeconfig.parent().unwrap().to_path_buf(),
        kubeconfig,
    };
    let client = cluster.client().await;
    let ar = greeting_resource();
    wait_for_crd(&client, &ar).await;

    greet(&client, "first", "one").await;

    // An edit: the ConfigMaps it writes get a label. Saved, built, swapped in.
    let lib = dir.join(source);
    let source = std::fs::read_to_string(&lib).unwrap();
    let edited = source.replace(
        r#""metadata": {"name": me.name, "namespace": me.namespace},"#,
        &format!(r#""metadata": {{"name": me.name, "namespace": me.namespace, "labels": {{"{LABEL}": "yes"}}}},"#),
    );
    assert_ne!(
        edited, source,
        "the scaffold's ConfigMap changed shape: update this test"
    );
    let saved = Instant::now();
    std::fs::write(&lib, &edited).unwrap();
    let swapped = |dev: &Dev, n: usize| dev.text().matches("swapped plugin=greeter").count() >= n;
    // An incremental build of the plugin and a swap: about 10 s for Rust on a 2-core
    // machine; `bound` is what the save -> running claim is held to.
    eventually(
        bound,
        "the edited version swapped in within the bound of the save",
        || async { swapped(&dev, 1).then_some(()) },
    )
    .await;
    let swap_s = saved.elapsed().as_secs_f64();
    let labels = greet(&client, "second", "two").await;
    assert_eq!(
        labels.get(LABEL).map(String::as_str),
        Some("yes"),
        "{labels:?}"
    );
    println!("save -> the edited version running: {swap_s:.1} s");

    // A syntax error: the compiler's message is shown, the edited version keeps running.
    std::fs::write(&lib, format!("{edited}\n{broken}\n")).unwrap();
    eventually(
        bound,
        "the build failure reported within the bound",
        || async { dev.text().contains("the build failed").then_some(()) },
    )
    .await;
    let log = dev.text();
    assert!(log.contains(error), "no compiler message:\n{log}");
    assert!(!swapped(&dev, 2), "a broken build was swapped in:\n{log}");
    let labels = greet(&client, "third", "three").await;
    assert_eq!(labels.get(LABEL).map(String::as_str), Some("yes"));

    // SIGTERM stops dev, the host and the control plane it started.
    let addr = dev.addr.clone();
    assert!(dev.terminate(), "wasmop dev did not stop on SIGTERM");
    assert!(
        std::net::TcpStream::connect(&addr).is_err(),
        "the host still listens on {addr}"
    );
    assert!(
        !cluster.state.exists(),
        "the local control plane's state is left: {}",
        cluster.state.display()
    );
}

/// `wasmop dev` against a kubeconfig whose API server is not on this machine, without a
/// terminal to ask on and without `--yes`: it stops before building, granting or starting
/// anything (no request is sent: the address is never contacted), and says how to go on.
#[test]
fn dev_asks_before_using_a_cluster_that_is_not_local() {
    let scratch = Scratch::new("dev-remote");
    let kubeconfig = scratch.0.join("remote.yaml");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\ncurrent-context: remote\nclusters:\n- name: remote\n  cluster:\n    server: https://k8s.example.invalid:6443\nusers:\n- name: u\n  user: {token: t}\ncontexts:\n- name: remote\n  context: {cluster: remote, user: u}\n",
    )
    .unwrap();
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .args(["dev", "/nonexistent-plugin-crate", "--kubeconfig"])
        .arg(&kubeconfig)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "dev went ahead: {text}");
    assert!(
        text.contains("is not on this machine") && text.contains("--yes"),
        "{text}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
}
