//! Support for end-to-end tests against the local control plane (`tests/cluster/`): a
//! cluster per test, a `wasmop run` child process, a client, and polling helpers. Every
//! helper stops what it started when dropped.
#![allow(dead_code)]

pub mod diagnose;
pub mod fleet;
pub mod hostile_registry;
pub mod outside;
pub mod registry;
pub mod relay;
pub mod scaffold;
pub mod storm;
pub mod uploads;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::Value;

/// The repository root.
///
/// Read when the test runs (cargo sets `CARGO_MANIFEST_DIR` for it), not when it was
/// compiled: two checkouts sharing one target directory share the compiled tests too, and
/// each must run its own scripts.
pub fn repo() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join("..")
}

/// Where the plugin components were built (`make plugins`); `WASMOP_PLUGIN_DIR` overrides.
pub fn plugin_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("WASMOP_PLUGIN_DIR") {
        return PathBuf::from(dir);
    }
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| repo().join("target"));
    target.join("wasm32-wasip2/plugin")
}

/// The bytes of a built plugin, with a clear message when it has not been built.
pub fn plugin_bytes(file: &str) -> Vec<u8> {
    let path = plugin_dir().join(file);
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; build the plugins first with `make plugins`",
            path.display()
        )
    })
}

/// The paths of built plugin files (in [`plugin_dir`]).
pub fn built(plugins: &[&str]) -> Vec<PathBuf> {
    plugins.iter().map(|p| plugin_dir().join(p)).collect()
}

/// The test-only hostile plugin's kind.
pub fn hostile_resource() -> ApiResource {
    ApiResource {
        group: "test.wasmop.dev".into(),
        version: "v1".into(),
        api_version: "test.wasmop.dev/v1".into(),
        kind: "Hostile".into(),
        plural: "hostiles".into(),
    }
}

/// A unique scratch directory, removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    /// Creates `/tmp/wasmop-<tag>-<pid>-<n>`.
    pub fn new(tag: &str) -> Scratch {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "wasmop-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A local control plane started for one test and stopped when dropped.
pub struct Cluster {
    /// State directory of the control plane.
    pub state: PathBuf,
    /// Admin kubeconfig.
    pub kubeconfig: PathBuf,
}

impl Cluster {
    /// The audit log's events (Metadata level, tests/cluster/audit-policy.yaml) from byte
    /// `from` of the log on, and the log's length: pass the length back to read only what
    /// came after.
    pub fn audit_since(&self, from: u64) -> (Vec<serde_json::Value>, u64) {
        let text = std::fs::read(self.state.join("logs/audit.log")).unwrap_or_default();
        let from = usize::try_from(from).unwrap_or(usize::MAX).min(text.len());
        let events = String::from_utf8_lossy(&text[from..])
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        (events, text.len() as u64)
    }

    /// Starts a control plane in a fresh state directory (building it first if needed).
    pub fn start(tag: &str) -> Cluster {
        Self::start_with_node_pods(tag, 110)
    }

    /// [`Cluster::start`] with room for `pods` pods on each of the three fake nodes.
    pub fn start_with_node_pods(tag: &str, pods: u32) -> Cluster {
        let state = std::env::temp_dir().join(format!("wasmop-e2e-{tag}-{}", std::process::id()));
        let out = Command::new(repo().join("tests/cluster/up"))
            .env("WASMOP_CLUSTER_NODE_PODS", pods.to_string())
            .arg("--state")
            .arg(&state)
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit())
            .status()
            .expect("run tests/cluster/up");
        assert!(out.success(), "tests/cluster/up failed");
        Cluster {
            kubeconfig: state.join("kubeconfig"),
            state,
        }
    }

    /// Restarts one component (`apiserver` or `etcd`), keeping its data.
    pub fn restart(&self, component: &str) {
        let ok = Command::new(repo().join("tests/cluster/restart"))
            .arg("--state")
            .arg(&self.state)
            .arg(component)
            .status()
            .expect("run tests/cluster/restart")
            .success();
        assert!(ok, "restarting {component} failed");
    }

    /// The cluster's kubectl (version-matched, from the state directory).
    pub fn kubectl(&self) -> Command {
        let mut c = Command::new(self.state.join("bin/kubectl"));
        c.arg("--kubeconfig").arg(&self.kubeconfig);
        c
    }

    /// What an admin does before running plugins: applies `wasmop rbac FILE --cluster` for
    /// each plugin file (ServiceAccounts in `default`, the host's plugin namespace in tests).
    pub fn grant(&self, plugins: &[&str]) {
        self.grant_files(&built(plugins));
    }

    /// [`Cluster::grant`] for plugin files from anywhere.
    pub fn grant_files(&self, files: &[PathBuf]) {
        self.grant_as(files, &["--cluster"]);
    }

    /// Applies `wasmop rbac FILE SCOPE...` (ServiceAccounts in `default`) for each file.
    pub fn grant_as(&self, files: &[PathBuf], scope: &[&str]) {
        let mut yaml = String::new();
        for f in files {
            let out = Command::new(env!("CARGO_BIN_EXE_wasmop"))
                .arg("rbac")
                .arg(f)
                .args(scope)
                .args(["--service-account-namespace", "default"])
                .output()
                .expect("run wasmop rbac");
            assert!(
                out.status.success(),
                "wasmop rbac {}: {}",
                f.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            yaml.push_str(&String::from_utf8_lossy(&out.stdout));
        }
        self.apply_yaml(&yaml);
    }

    /// `kubectl apply -f -` of `yaml`, which must succeed.
    pub fn apply_yaml(&self, yaml: &str) {
        use std::io::Write;
        let mut child = self
            .kubectl()
            .args(["apply", "-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run kubectl apply");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(yaml.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "kubectl apply: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A kubeconfig (written into the state directory) that authenticates as ServiceAccount
    /// `ns/name`, with a token the API server issues for an hour.
    pub fn kubeconfig_for(&self, ns: &str, name: &str) -> PathBuf {
        let token = stdout_of(
            self.kubectl()
                .args(["create", "token", name, "-n", ns, "--duration", "1h"]),
            "kubectl create token",
        );
        let admin: serde_yaml::Value =
            serde_yaml::from_str(&std::fs::read_to_string(&self.kubeconfig).unwrap()).unwrap();
        let cluster = admin["clusters"][0]["cluster"].clone();
        let kc = serde_json::json!({
            "apiVersion": "v1", "kind": "Config", "current-context": "sa",
            "clusters": [{"name": "local", "cluster": cluster}],
            "users": [{"name": "sa", "user": {"token": token}}],
            "contexts": [{"name": "sa", "context": {"cluster": "local", "user": "sa"}}],
        });
        let path = self.state.join(format!("kubeconfig-{ns}-{name}"));
        std::fs::write(&path, serde_yaml::to_string(&kc).unwrap()).unwrap();
        path
    }

    /// An admin client.
    pub async fn client(&self) -> Client {
        let kc = kube::config::Kubeconfig::read_from(&self.kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap();
        Client::try_from(config).unwrap()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(repo().join("tests/cluster/down"))
            .arg("--state")
            .arg(&self.state)
            .status();
    }
}

/// A free TCP port on loopback.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Runs `command` (named `what` in failures) to its end, asserts it succeeded, and returns
/// its standard output, trimmed.
pub fn stdout_of(command: &mut Command, what: &str) -> String {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("run {what}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A `wasmop run` process, killed when dropped.
pub struct Host {
    child: Option<Child>,
    /// Its log file.
    pub log: PathBuf,
    /// Address of its HTTP endpoints.
    pub addr: String,
    plugins: Scratch,
}

impl Host {
    /// Starts `wasmop run` with the given plugin files (from [`plugin_dir`]) and extra args,
    /// after granting those plugins their RBAC ([`Cluster::grant`]).
    pub fn start(
        cluster: &Cluster,
        plugins: &[&str],
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Host {
        cluster.grant(plugins);
        Host::start_with(&cluster.kubeconfig, plugins, extra, env)
    }

    /// [`Host::start`] against the API server of `kubeconfig` (a proxy's, say).
    pub fn start_with(
        kubeconfig: &Path,
        plugins: &[&str],
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Host {
        Host::start_files(kubeconfig, &built(plugins), extra, env)
    }

    /// [`Host::start_with`] with plugin files from anywhere (a scaffolded plugin, say).
    pub fn start_files(
        kubeconfig: &Path,
        plugins: &[PathBuf],
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Host {
        let mut args = vec!["--install-crds"];
        args.extend_from_slice(extra);
        Host::spawn(kubeconfig, plugins, &args, env)
    }

    /// A host as deployed: with the credentials of `kubeconfig` (a ServiceAccount's, say)
    /// and without installing CRDs (an admin did, with deploy/).
    pub fn start_deployed(
        kubeconfig: &Path,
        plugins: &[&str],
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Host {
        Host::spawn(kubeconfig, &built(plugins), extra, env)
    }

    fn spawn(kubeconfig: &Path, plugins: &[PathBuf], extra: &[&str], env: &[(&str, &str)]) -> Host {
        let dir = Scratch::new("plugins");
        for p in plugins {
            let name = p.file_name().expect("a plugin file");
            std::fs::copy(p, dir.0.join(name)).unwrap_or_else(|e| {
                panic!(
                    "{}: {e}; build the plugins first with `make plugins`",
                    p.display()
                )
            });
        }
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        let log = dir.0.with_extension("log");
        let file = std::fs::File::create(&log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_wasmop"))
            .arg("run")
            .arg("--plugins")
            .arg(&dir.0)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--listen")
            .arg(&addr)
            .args(extra)
            // WASMOP_TEST_LOG=debug (or any filter) for a closer look at a failing test; a
            // test that reads a line of its own from the log sets WASMOP_LOG in `env`.
            .env(
                "WASMOP_LOG",
                std::env::var("WASMOP_TEST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .envs(env.iter().copied())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .expect("start wasmop run");
        Host {
            child: Some(child),
            log,
            addr,
            plugins: dir,
        }
    }

    /// [`Host::start`] serving its plugins' webhooks on a free loopback port
    /// (`--webhook-listen`, and `--webhook-url` for the API server to call); returns the
    /// host and that URL.
    pub fn start_with_webhooks(cluster: &Cluster, plugins: &[&str]) -> (Host, String) {
        let port = free_port();
        let (listen, url) = (
            format!("127.0.0.1:{port}"),
            format!("https://127.0.0.1:{port}"),
        );
        let host = Host::start(
            cluster,
            plugins,
            &["--webhook-listen", &listen, "--webhook-url", &url],
            &[],
        );
        (host, url)
    }

    /// Whether it says (in its metrics) that it leads.
    pub fn leads(&self) -> bool {
        self.http_get("/metrics")
            .is_some_and(|(_, m)| m.lines().any(|l| l == "wasmop_leader 1"))
    }

    /// Starts a replica that takes part in leader election on a Lease of `lease_seconds`
    /// in `default`, as `identity`.
    pub fn start_replica(
        cluster: &Cluster,
        plugins: &[&str],
        identity: &str,
        lease_seconds: u32,
    ) -> Host {
        let lease = lease_seconds.to_string();
        let args = [
            "--leader-election",
            "--lease-seconds",
            &lease,
            "--lease-namespace",
            "default",
            "--identity",
            identity,
        ];
        Host::start(cluster, plugins, &args, &[])
    }

    /// The plugins directory it runs from (a changed file there is swapped in).
    pub fn plugins_dir(&self) -> &Path {
        &self.plugins.0
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).unwrap_or(0)
    }

    /// Resident memory of the host process, in KiB.
    pub fn rss_kib(&self) -> u64 {
        self.status_kib("VmRSS:")
    }

    /// The most resident memory the host process held at once so far (`VmHWM`), in KiB.
    pub fn peak_kib(&self) -> u64 {
        self.status_kib("VmHWM:")
    }

    /// A figure of the host process's `/proc/PID/status` (`field` with its colon), in KiB.
    fn status_kib(&self, field: &str) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with(field))
                    .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
            })
            .unwrap_or(0)
    }

    /// Waits (bounded) for the process to exit by itself; its exit status, if it did.
    pub fn exited_within(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        let child = self.child.as_mut()?;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// Sends the signal `name` (`STOP`, `CONT`, ...) to the process.
    pub fn signal(&self, name: &str) {
        let sent = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid().to_string())
            .status()
            .is_ok_and(|s| s.success());
        assert!(sent, "kill -{name} {} failed", self.pid());
    }

    /// Kills the process with SIGKILL and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends SIGTERM and waits (bounded) for the exit; returns whether it exited in time.
    pub fn terminate(&mut self, within: Duration) -> bool {
        let Some(mut c) = self.child.take() else {
            return true;
        };
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(c.id().to_string())
            .status();
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = c.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = c.kill();
        let _ = c.wait();
        false
    }

    /// The log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// GET a path of the HTTP endpoints; returns (status, body).
    pub fn http_get(&self, path: &str) -> Option<(u16, String)> {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(&self.addr).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.addr
        )
        .ok()?;
        let mut text = String::new();
        s.read_to_string(&mut text).ok()?;
        let status = text.split_whitespace().nth(1)?.parse().ok()?;
        let body = text
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        Some((status, body))
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "--- wasmop log ({}) ---\n{}",
                self.log.display(),
                tail(&self.log_text(), 60)
            );
        }
        self.kill();
        // WASMOP_KEEP_LOGS=DIR keeps every host's whole log there, for a look afterwards; a
        // failing test or benchmark keeps its hosts' logs in any case (the tail above is
        // rarely the part that explains it).
        let keep = std::env::var_os("WASMOP_KEEP_LOGS")
            .map(PathBuf::from)
            .or_else(|| {
                std::thread::panicking().then(|| std::env::temp_dir().join("wasmop-failed-logs"))
            });
        if let (Some(dir), Some(name)) = (keep, self.log.file_name()) {
            let _ = std::fs::create_dir_all(&dir);
            let kept = dir.join(name);
            if std::fs::copy(&self.log, &kept).is_ok() && std::thread::panicking() {
                eprintln!("--- the whole log: {} ---", kept.display());
            }
        }
        let _ = std::fs::remove_file(&self.log);
    }
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Polls `check` every 200 ms until it returns `Some`, or panics with `what` after `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The PodReplica API resource.
pub fn podreplica_resource() -> ApiResource {
    ApiResource {
        group: "app.example.com".into(),
        version: "v1alpha1".into(),
        api_version: "app.example.com/v1alpha1".into(),
        kind: "PodReplica".into(),
        plural: "podreplicas".into(),
    }
}

/// The ChaosPod API resource.
pub fn chaospod_resource() -> ApiResource {
    ApiResource {
        group: "app.example.com".into(),
        version: "v1alpha1".into(),
        api_version: "app.example.com/v1alpha1".into(),
        kind: "ChaosPod".into(),
        plural: "chaospods".into(),
    }
}

/// Server-side applies `object` (JSON with apiVersion, kind, metadata.name) as the test.
pub async fn apply(
    client: &Client,
    ar: &ApiResource,
    ns: &str,
    object: &Value,
) -> Result<DynamicObject, kube::Error> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, ar);
    let name = object["metadata"]["name"].as_str().unwrap();
    api.patch(
        name,
        &PatchParams::apply("e2e-test").force(),
        &Patch::Apply(object),
    )
    .await
}

/// Waits until every cached CRD of `plural.group` is served (the host installs them).
pub async fn wait_for_crd(client: &Client, ar: &ApiResource) {
    wait_for_crd_within(client, ar, Duration::from_secs(60)).await;
}

/// [`wait_for_crd`] with a longer wait (a plugin compiled first, say).
pub async fn wait_for_crd_within(client: &Client, ar: &ApiResource, within: Duration) {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), ar);
    eventually(within, &format!("CRD {} served", ar.plural), || {
        let api = api.clone();
        async move { api.list(&Default::default()).await.ok().map(|_| ()) }
    })
    .await;
}

/// Pods of namespace `ns` controlled by `owner_uid` that are not terminating, with their phase.
pub async fn live_owned_pods(client: &Client, ns: &str, owner_uid: &str) -> Vec<(String, String)> {
    use k8s_openapi::api::core::v1::Pod;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    pods.list(&Default::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            p.metadata
                .owner_references
                .as_deref()
                .unwrap_or_default()
                .iter()
                .any(|o| o.uid == owner_uid && o.controller == Some(true))
        })
        .map(|p| {
            (
                p.metadata.name.unwrap_or_default(),
                p.status.and_then(|s| s.phase).unwrap_or_default(),
            )
        })
        .collect()
}

/// `Some` when exactly `n` live pods controlled by `uid` exist and all are Running.
pub async fn converged(client: &Client, uid: &str, n: usize) -> Option<()> {
    let pods = live_owned_pods(client, "default", uid).await;
    (pods.len() == n && pods.iter().all(|(_, p)| p == "Running")).then_some(())
}

/// Path helper for messages.
pub fn show(p: &Path) -> String {
    p.display().to_string()
}
