//! wasmop against the operators users would write instead: a controller-runtime PodReplica
//! written as the kubebuilder book writes one (`bench/reference/controller-runtime`: the
//! pods listed through an owner index, production logging), at its default of one worker
//! and at wasmop's eight, and a kube-rs `Controller` PodReplica without wasm
//! (`bench/reference/kube-rs`) at eight; wasmop again as three sharded replicas on request
//! (the same figures summed over the three processes). Each round runs every contender, one
//! after the other in an order that rotates from round to round, each run on a fresh control
//! plane of its own; the table shows each figure's median and range. Each contender starts
//! alone (no PodReplica, nothing left of another), then goes through the same measurements:
//! start → ready from its process's spawn and its RSS then (wasmop's with an empty cache
//! beside), the control plane's idle CPU rate, PodReplicas applied at 3, rescaled to 5 and
//! to 2 (seconds from the apply's start), its reconciles (its own metric), its writes by
//! verb and resource (from the API server's audit log, by User-Agent, the same count for
//! every contender), its CPU, the control plane's CPU less its idle rate over the window,
//! its peak and at-rest RSS, and how long its status lags the pods: one PodReplica at a
//! time patched to 5, from the watch showing the fifth pod Running to the watch showing the
//! status that lists five ready pods.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::watcher;
use serde_json::{Value, json};

use crate::support::{Cluster, podreplica_resource};
use crate::tracker::Tracker;

/// Which operator runs PodReplica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contender {
    /// The wasmop host with the PodReplica plugin.
    Wasmop,
    /// Three wasmop hosts with the PodReplica plugin, sharded (`--sharding`).
    WasmopSharded,
    /// `bench/reference/controller-runtime` with `workers` reconciles at once
    /// (`MaxConcurrentReconciles`; the framework's default is 1), production logging.
    ControllerRuntime {
        /// Reconciles at once.
        workers: u16,
    },
    /// `bench/reference/kube-rs` with `workers` reconciles at once (0: kube-runtime's
    /// default, no limit).
    KubeRs {
        /// Reconciles at once.
        workers: u16,
    },
}

/// A PodReplica of size 1 made before each operator starts (not one of the measured ones):
/// its first pod times the operator's start to its first decision acted on. A readiness
/// endpoint says less alike: controller-runtime's (the book's `healthz.Ping`) answers once
/// its probe server listens, before its caches are synced; wasmop's once its caches are
/// listed and its plugins loaded.
pub const EARLY: &str = "early";

/// Waits (at most 2 minutes) on `created` (the pod tracker's news) for the first pod of
/// [`EARLY`]; returns the seconds since `spawned`.
pub async fn first_pod_s(
    created: &mut tokio::sync::broadcast::Receiver<(String, Instant)>,
    spawned: Instant,
) -> f64 {
    let seen = tokio::time::timeout(Duration::from_secs(120), async {
        loop {
            match created.recv().await {
                Ok((owner, at)) if owner == EARLY => return at,
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(e) => panic!("the pod tracker ended: {e}"),
            }
        }
    })
    .await
    .expect("no pod of the PodReplica made before the start within 2 minutes");
    seen.duration_since(spawned).as_secs_f64()
}

/// The reconciles the wasmop host runs at once by default (`WASMOP_CONCURRENCY`).
pub const WASMOP_WORKERS: u16 = 8;

fn workers_of(n: u16) -> String {
    match n {
        0 => "no limit".into(),
        1 => "1 worker".into(),
        n => format!("{n} workers"),
    }
}

impl Contender {
    /// Its name in the table, with the reconciles it runs at once.
    pub fn name(self) -> String {
        match self {
            Contender::Wasmop => format!("wasmop, {}", workers_of(WASMOP_WORKERS)),
            Contender::WasmopSharded => {
                format!("wasmop ×3 sharded, {} each", workers_of(WASMOP_WORKERS))
            }
            Contender::ControllerRuntime { workers } => {
                format!("controller-runtime, {}", workers_of(workers))
            }
            Contender::KubeRs { workers } => format!("kube-rs, {}", workers_of(workers)),
        }
    }

    /// Its name in file names.
    pub fn slug(self) -> String {
        match self {
            Contender::Wasmop => "wasmop".into(),
            Contender::WasmopSharded => "wasmop-sharded".into(),
            Contender::ControllerRuntime { workers } => format!("controller-runtime-{workers}"),
            Contender::KubeRs { workers } => format!("kube-rs-{workers}"),
        }
    }

    /// A contender as `--versus` names it: `controller-runtime`, `kube-rs` or
    /// `wasmop-sharded`, a reference with `@WORKERS` (`controller-runtime@8`; without it,
    /// its framework's default).
    pub fn parse(text: &str) -> Result<Contender, String> {
        let (what, workers) = match text.trim().split_once('@') {
            Some((w, n)) => (
                w,
                Some(
                    n.parse::<u16>()
                        .map_err(|_| format!("`{text}`: `{n}` is not a number of workers"))?,
                ),
            ),
            None => (text.trim(), None),
        };
        match (what, workers) {
            ("controller-runtime", w) => Ok(Contender::ControllerRuntime {
                workers: w.unwrap_or(1),
            }),
            ("kube-rs", w) => Ok(Contender::KubeRs {
                workers: w.unwrap_or(0),
            }),
            ("wasmop-sharded", None) => Ok(Contender::WasmopSharded),
            _ => Err(format!(
                "`{text}` is not controller-runtime[@N], kube-rs[@N] or wasmop-sharded"
            )),
        }
    }

    /// How its requests start their `User-Agent` (what the audit log is filtered by).
    pub fn user_agent(self) -> &'static str {
        match self {
            Contender::Wasmop | Contender::WasmopSharded => "wasmop/",
            Contender::ControllerRuntime { .. } => "podreplica-controller-runtime",
            Contender::KubeRs { .. } => "podreplica-kube-rs",
        }
    }

    /// The metric whose samples, summed, count its reconciles.
    fn reconcile_metric(self) -> &'static str {
        match self {
            Contender::Wasmop | Contender::WasmopSharded => "wasmop_reconciles_total",
            Contender::ControllerRuntime { .. } => "controller_runtime_reconcile_total",
            Contender::KubeRs { .. } => "podreplica_reconciles_total",
        }
    }

    /// Whether it is wasmop (held to its promise of never a pod over the size asked).
    pub fn is_wasmop(self) -> bool {
        matches!(self, Contender::Wasmop | Contender::WasmopSharded)
    }
}

/// One process of a running operator.
struct Process {
    pid: u32,
    /// Address of its metrics.
    metrics: String,
    /// Address of its `/readyz`.
    probes: String,
}

/// A running operator: a reference's process (killed when dropped) or the hosts (one, or
/// the sharded replicas); its figures are summed over its processes.
pub struct Running {
    contender: Contender,
    child: Option<Child>,
    processes: Vec<Process>,
    /// Its (first process's) log.
    pub log: PathBuf,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The binary of a reference, built by `make references` (the controller-runtime one is
/// built by its own script, which prints its cached path).
fn binary(contender: Contender) -> PathBuf {
    let repo = crate::support::repo();
    match contender {
        Contender::ControllerRuntime { .. } => {
            let script = repo.join("bench/reference/controller-runtime/build");
            let out = Command::new(&script)
                .stderr(Stdio::inherit())
                .output()
                .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
            assert!(
                out.status.success(),
                "{} failed; see above",
                script.display()
            );
            PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
        }
        Contender::KubeRs { .. } => {
            // Beside the bench's own binary: target/<triple>/release/deps/scale-… → release/.
            let exe = std::env::current_exe().expect("the bench's path");
            let release = exe.parent().and_then(Path::parent).expect("release dir");
            let bin = release.join("podreplica-kube-rs");
            assert!(
                bin.exists(),
                "{}: build it with `make references`",
                bin.display()
            );
            bin
        }
        Contender::Wasmop | Contender::WasmopSharded => {
            unreachable!("the hosts are started by crate::support::Host")
        }
    }
}

/// Starts a reference operator against `cluster`; returns it and the instant it was
/// spawned (its binary found, or built, before: the clock starts at the spawn).
pub fn start_reference(cluster: &Cluster, contender: Contender) -> (Running, Instant) {
    let bin = binary(contender);
    let metrics = format!("127.0.0.1:{}", crate::support::free_port());
    let probes = format!("127.0.0.1:{}", crate::support::free_port());
    let log = cluster.state.join(format!("{}.log", contender.slug()));
    let file = std::fs::File::create(&log).unwrap();
    // Each as its users run it in production: controller-runtime's scaffold defaults to
    // development logging (`zap.Options{Development: true}`), its flags turn it off.
    let workers: Vec<String> = match contender {
        Contender::ControllerRuntime { workers } => vec![
            "--zap-devel=false".into(),
            format!("--max-concurrent-reconciles={workers}"),
        ],
        Contender::KubeRs { workers } => vec![format!("--concurrency={workers}")],
        Contender::Wasmop | Contender::WasmopSharded => Vec::new(),
    };
    let spawned = Instant::now();
    let child = Command::new(&bin)
        .args(&workers)
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .arg("--metrics-bind-address")
        .arg(&metrics)
        .arg("--health-probe-bind-address")
        .arg(&probes)
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    (
        Running {
            contender,
            processes: vec![Process {
                pid: child.id(),
                metrics,
                probes,
            }],
            child: Some(child),
            log,
        },
        spawned,
    )
}

/// The host, or the sharded replicas, as a contender (each serves metrics and probes on one
/// address).
pub fn hosts(contender: Contender, hosts: &[crate::support::Host]) -> Running {
    Running {
        contender,
        child: None,
        processes: hosts
            .iter()
            .map(|h| Process {
                pid: h.pid(),
                metrics: h.addr.clone(),
                probes: h.addr.clone(),
            })
            .collect(),
        log: hosts[0].log.clone(),
    }
}

/// The arguments of sharded replica `i` (Leases of 5 s in `default`).
pub fn replica_args(i: usize) -> Vec<String> {
    [
        "--leader-election",
        "--sharding",
        "--lease-seconds",
        "5",
        "--lease-namespace",
        "default",
        "--identity",
    ]
    .iter()
    .map(ToString::to_string)
    .chain([format!("replica-{i}")])
    .collect()
}

/// GET `path` of `addr` in HTTP/1.0 (no chunked body, whatever the server); (status, body).
fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string());
    Some((status, body.unwrap_or_default()))
}

impl Process {
    /// `/readyz` answers 200 and, if `sharded`, its metrics say it holds shards.
    fn ready(&self, sharded: bool) -> bool {
        http_get(&self.probes, "/readyz").is_some_and(|(code, _)| code == 200)
            && (!sharded
                || http_get(&self.metrics, "/metrics")
                    .is_some_and(|(_, m)| m.lines().any(|l| l == "wasmop_shard_member 1")))
    }
}

impl Running {
    /// Seconds from `spawned` until every process's `/readyz` answers 200 (polled every
    /// 5 ms; sharded replicas: and each is a shard member), and VmRSS (MiB, summed) then.
    /// Panics after two minutes, with the log's tail.
    pub async fn ready(&self, spawned: Instant) -> (f64, f64) {
        let sharded = self.contender == Contender::WasmopSharded;
        loop {
            if self.processes.iter().all(|p| p.ready(sharded)) {
                let secs = spawned.elapsed().as_secs_f64();
                return (secs, self.memory_mib().0);
            }
            if spawned.elapsed() > Duration::from_secs(120) {
                let log = std::fs::read_to_string(&self.log).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(30).collect();
                panic!(
                    "{} not ready after 2 minutes; its log ends:\n{}",
                    self.contender.name(),
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Its reconciles so far.
    pub fn reconciles(&self) -> u64 {
        self.metric_sum(self.contender.reconcile_metric(), "")
    }

    /// wasmop: (decisions whose progress hold ran out, watches the host started) so far.
    fn host_counts(&self) -> Option<(u64, u64)> {
        self.contender.is_wasmop().then(|| {
            (
                self.metric_sum("wasmop_progress_holds_expired_total", ""),
                self.metric_sum("wasmop_api_requests_total", "verb=\"watch\""),
            )
        })
    }

    /// The samples of `metric` whose labels contain `labels`, summed over its processes.
    fn metric_sum(&self, metric: &str, labels: &str) -> u64 {
        let mut sum = 0.0;
        for p in &self.processes {
            let Some((_, text)) = http_get(&p.metrics, "/metrics") else {
                continue;
            };
            sum += text
                .lines()
                .filter(|l| {
                    l.strip_prefix(metric).is_some_and(|rest| {
                        (rest.starts_with('{') || rest.starts_with(' ')) && rest.contains(labels)
                    })
                })
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum::<f64>();
        }
        sum as u64
    }

    /// CPU seconds so far.
    pub fn cpu_s(&self) -> f64 {
        self.processes
            .iter()
            .map(|p| crate::cost::cpu_seconds(p.pid))
            .sum()
    }

    /// (VmRSS, VmHWM), MiB, summed over its processes.
    fn memory_mib(&self) -> (f64, f64) {
        self.processes
            .iter()
            .map(|p| crate::cost::memory_of(p.pid))
            .fold((0.0, 0.0), |(r, h), (pr, ph)| (r + pr, h + ph))
    }
}

/// What one contender did in the comparison.
#[derive(Debug, Clone, Default)]
pub struct Run {
    /// Its name.
    pub name: String,
    /// Which round of the comparison (each on a fresh control plane), from 0.
    pub round: usize,
    /// Start → ready, seconds from the process's spawn.
    pub ready_s: f64,
    /// wasmop: start → ready with an empty cache directory (compiling), seconds.
    pub cold_ready_s: Option<f64>,
    /// Start → the first pod of [`EARLY`], a PodReplica made before the operator started:
    /// seconds from the spawn to the pod watch's event (its first decision acted on).
    pub first_pod_s: f64,
    /// wasmop: the same with an empty cache directory, seconds.
    pub cold_first_pod_s: Option<f64>,
    /// VmRSS at ready, MiB.
    pub ready_mib: f64,
    /// Seconds to converge at each size (3, 5 and 2 by default), from each apply's start.
    pub converge_s: Vec<(usize, f64)>,
    /// The most live pods any PodReplica had beyond the larger of its old and new size, in
    /// any phase (wasmop: always 0, asserted).
    pub most_over: usize,
    /// Reconciles over the three phases.
    pub reconciles: u64,
    /// wasmop over the three phases: decisions whose progress hold ran out (its objects made
    /// no step for `--progress-hold-ms`), and the watches it started (a relist each, beyond
    /// those of its start).
    pub host_counts: Option<(u64, u64)>,
    /// Its writes over the three phases, by `verb resource[/subresource]`.
    pub writes: BTreeMap<String, u64>,
    /// Its CPU seconds over the three phases.
    pub cpu_s: f64,
    /// The control plane's CPU seconds over the three phases.
    pub control_cpu_s: f64,
    /// Peak RSS (VmHWM) after the phases, MiB.
    pub peak_mib: f64,
    /// RSS 5 s after the last phase, MiB.
    pub rest_mib: f64,
    /// Status lag behind the pods per sample (ms), sorted.
    pub status_ms: Vec<f64>,
}

impl Run {
    /// Writes of every kind.
    pub fn total_writes(&self) -> u64 {
        self.writes.values().sum()
    }

    /// Seconds of the phase at `size`.
    pub fn secs_at(&self, size: usize) -> f64 {
        self.converge_s
            .iter()
            .find(|(s, _)| *s == size)
            .map_or(f64::NAN, |(_, v)| *v)
    }
}

/// How long the control plane's idle CPU is sampled before each contender's phases.
const IDLE_WINDOW: Duration = Duration::from_secs(5);

/// What every contender is measured on: one control plane, its client, the pod tracker, the
/// PodReplicas' names, and the number of status-lag samples.
pub struct Stage<'a> {
    /// The control plane.
    pub cluster: &'a Cluster,
    /// Its client.
    pub client: &'a Client,
    /// The pod tracker.
    pub tracker: &'a Tracker,
    /// The PodReplicas.
    pub names: &'a [String],
    /// The sizes applied, one phase each.
    pub sizes: &'a [usize],
    /// Status-lag samples.
    pub status_samples: usize,
}

impl Stage<'_> {
    /// Measures `op` (spawned at `spawned`): start → ready, the three phases, the status
    /// samples.
    pub async fn run(
        &self,
        op: &Running,
        spawned: Instant,
        created: &mut tokio::sync::broadcast::Receiver<(String, Instant)>,
    ) -> Run {
        let (cluster, client, tracker, names) =
            (self.cluster, self.client, self.tracker, self.names);
        let mut run = Run {
            name: op.contender.name(),
            ..Default::default()
        };
        (run.ready_s, run.ready_mib) = op.ready(spawned).await;
        run.first_pod_s = first_pod_s(created, spawned).await;
        // The control plane's CPU while the operator is ready and idle, per second: what
        // the window below would cost without a PodReplica (subtracted from it).
        let idle_from = crate::control::look(&cluster.state);
        let idle_started = Instant::now();
        tokio::time::sleep(IDLE_WINDOW).await;
        let idle_rate = crate::control::total(&crate::control::between(
            &idle_from,
            &crate::control::look(&cluster.state),
        )) / idle_started.elapsed().as_secs_f64();
        let from = jiff::Timestamp::now();
        let window = Instant::now();
        let reconciles = op.reconciles();
        let counts = op.host_counts();
        let cpu = op.cpu_s();
        let control = crate::control::look(&cluster.state);
        let mut bound = 0;
        for &size in self.sizes {
            tracker.take_most();
            bound = bound.max(size);
            let secs = crate::converge::apply_and_converge(client, tracker, names, size).await;
            let most_of = tracker.most_of();
            let most = tracker.take_most();
            // wasmop's promise; a reference without expectations may create a pod twice,
            // which the table shows.
            assert!(
                !op.contender.is_wasmop() || most <= bound,
                "{}: a PodReplica had {most} live pods while asked for at most {bound} (first {}: {:?})",
                op.contender.name(),
                most_of.0,
                most_of.1
            );
            println!(
                "{}: {} at size {size} in {secs:.1} s",
                op.contender.name(),
                names.len()
            );
            run.converge_s.push((size, secs));
            run.most_over = run.most_over.max(most.saturating_sub(bound));
            bound = size;
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
        run.reconciles = op.reconciles() - reconciles;
        run.host_counts = op
            .host_counts()
            .zip(counts)
            .map(|((h, w), (h0, w0))| (h - h0, w - w0));
        run.cpu_s = op.cpu_s() - cpu;
        run.control_cpu_s = crate::control::total(&crate::control::between(
            &control,
            &crate::control::look(&cluster.state),
        )) - idle_rate * window.elapsed().as_secs_f64();
        (run.rest_mib, run.peak_mib) = op.memory_mib();
        let to = jiff::Timestamp::now();
        run.writes = writes_of(&cluster.state, op.contender.user_agent(), from, to).await;
        crate::swap::quiet(client).await;
        run.status_ms = status_lag_ms(client, tracker, names, self.status_samples).await;
        run
    }
}

/// Status lag samples: for each of the first `samples` PodReplicas (at size 2, at rest), a
/// patch to 5, then the time from the pod watch's event that made its fifth pod Running to
/// the PodReplica watch's event showing its status listing five pods and Ready for the new
/// generation (both instants taken as each watch delivers its event); ms, sorted.
async fn status_lag_ms(
    client: &Client,
    tracker: &Tracker,
    names: &[String],
    samples: usize,
) -> Vec<f64> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &podreplica_resource());
    let mut out = Vec::new();
    for name in names.iter().take(samples) {
        let cfg = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let mut statuses = std::pin::pin!(watcher::watcher(api.clone(), cfg));
        // The watch's first list, so that nothing after the patch is missed.
        while let Some(Ok(e)) = statuses.next().await {
            if matches!(e, watcher::Event::InitDone) {
                break;
            }
        }
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 5}})),
        )
        .await
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut pods_at = None;
        let mut status_at = None;
        while pods_at.is_none() || status_at.is_none() {
            assert!(
                Instant::now() < deadline,
                "{name}: never at 5 pods and a status saying so"
            );
            tokio::select! {
                e = statuses.next() => {
                    if let Some(Ok(watcher::Event::Apply(pr))) = e
                        && status_at.is_none()
                        && says(&pr, 5)
                    {
                        status_at = Some(Instant::now());
                    }
                }
                () = tokio::time::sleep(Duration::from_millis(2)) => {
                    if pods_at.is_none() && tracker.all_at(std::slice::from_ref(name), 5) {
                        pods_at = tracker.changed_at(name);
                    }
                }
            }
        }
        let (pods, status) = (pods_at.unwrap(), status_at.unwrap());
        // A status seen before the tracker noticed the pods (both watches race): no lag.
        out.push(status.saturating_duration_since(pods).as_secs_f64() * 1000.0);
    }
    out.sort_by(f64::total_cmp);
    out
}

/// The status lists `size` pods and is Ready for the object's generation.
fn says(pr: &DynamicObject, size: usize) -> bool {
    let st = &pr.data["status"];
    let generation = pr.metadata.generation.unwrap_or(0);
    st["pods"].as_array().map_or(0, Vec::len) == size
        && st["conditions"].as_array().is_some_and(|cs| {
            cs.iter().any(|c| {
                c["type"] == "Ready"
                    && c["status"] == "True"
                    && c["observedGeneration"] == generation
            })
        })
}

/// Writes (create, update, patch, delete, deletecollection) whose `User-Agent` starts with
/// `agent`, received in `[from, to]`, by verb and resource, from the audit log of the
/// control plane in `state`; read until two reads a second apart agree (the log is written
/// in batches).
pub async fn writes_of(
    state: &Path,
    agent: &str,
    from: jiff::Timestamp,
    to: jiff::Timestamp,
) -> BTreeMap<String, u64> {
    let mut last = None;
    for _ in 0..30 {
        let now = count_writes(state, agent, from, to);
        if last.as_ref() == Some(&now) {
            return now;
        }
        last = Some(now);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    last.unwrap_or_default()
}

/// The verbs that write.
const WRITES: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

fn count_writes(
    state: &Path,
    agent: &str,
    from: jiff::Timestamp,
    to: jiff::Timestamp,
) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for file in crate::audit::files(state) {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for line in text.lines().filter(|l| l.contains(agent)) {
            let Ok(e) = serde_json::from_str::<Value>(line) else {
                continue; // the line being written
            };
            if !e["userAgent"]
                .as_str()
                .is_some_and(|a| a.starts_with(agent))
            {
                continue;
            }
            let at: Option<jiff::Timestamp> = e["requestReceivedTimestamp"]
                .as_str()
                .and_then(|t| t.parse().ok());
            if !at.is_some_and(|at| at >= from && at <= to) {
                continue;
            }
            let obj = &e["objectRef"];
            let mut resource = obj["resource"].as_str().unwrap_or("?").to_string();
            if let Some(sub) = obj["subresource"].as_str() {
                resource = format!("{resource}/{sub}");
            }
            let verb = e["verb"].as_str().unwrap_or("?");
            if !WRITES.contains(&verb) {
                continue;
            }
            // A write the API server refused (a conflict, say) cost it a request all the
            // same: counted, apart.
            let code = e["responseStatus"]["code"].as_u64().unwrap_or(0);
            let key = if code >= 400 {
                format!("{verb} {resource} refused {code}")
            } else {
                format!("{verb} {resource}")
            };
            *out.entry(key).or_default() += 1;
        }
    }
    out
}

fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 && a.is_finite() && b.is_finite() {
        format!("{:.2}", a / b)
    } else {
        "-".to_string()
    }
}

/// The median of `values` (NaN for none).
fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}

/// A figure over a contender's runs: its median and, over several runs, its range.
fn spread(values: &[f64], fmt: &dyn Fn(f64) -> String) -> String {
    let m = median(values);
    let finite: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    let (lo, hi) = finite
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &x| {
            (l.min(x), h.max(x))
        });
    if finite.len() < 2 {
        fmt(m)
    } else {
        format!("{} ({}–{})", fmt(m), fmt(lo), fmt(hi))
    }
}

/// Prints the comparison: a column per contender (the median of its runs and their range)
/// and the ratio of each wasmop column's median to each reference's.
pub fn print(objects: usize, bystanders: usize, contenders: &[Vec<Run>]) {
    let named: Vec<&Vec<Run>> = contenders.iter().filter(|c| !c.is_empty()).collect();
    let (ours, refs): (Vec<&Vec<Run>>, Vec<&Vec<Run>>) =
        named.iter().partition(|c| c[0].name.starts_with("wasmop"));
    if ours.is_empty() {
        return;
    }
    let rounds = named.iter().map(|c| c.len()).max().unwrap_or(0);
    println!();
    println!(
        "median (range) of {rounds} run(s) each, in rotating order, each run on a fresh control plane"
    );
    let mut head = format!("| {objects} PodReplicas |");
    if bystanders > 0 {
        head = format!("| {objects} PodReplicas beside {bystanders} unrelated pods |");
    }
    let mut rule = "|---|".to_string();
    for c in &named {
        head.push_str(&format!(" {} |", c[0].name));
        rule.push_str("---|");
    }
    for o in &ours {
        for r in &refs {
            head.push_str(&format!(" {} ÷ {} |", o[0].name, r[0].name));
            rule.push_str("---|");
        }
    }
    println!("{head}\n{rule}");
    let line = |label: &str, f: &dyn Fn(&Run) -> f64, fmt: &dyn Fn(f64) -> String| {
        let values = |c: &Vec<Run>| c.iter().map(f).collect::<Vec<f64>>();
        let mut l = format!("| {label} |");
        for c in &named {
            l.push_str(&format!(" {} |", spread(&values(c), fmt)));
        }
        for o in &ours {
            for r in &refs {
                l.push_str(&format!(
                    " {} |",
                    ratio(median(&values(o)), median(&values(r)))
                ));
            }
        }
        println!("{l}");
    };
    let s1 = |v: f64| format!("{v:.1}");
    let s2 = |v: f64| format!("{v:.2}");
    let n0 = |v: f64| format!("{v:.0}");
    for &(size, _) in &ours[0][0].converge_s {
        line(
            &format!("converged at {size}, s from the apply's start"),
            &|r| r.secs_at(size),
            &s1,
        );
    }
    line(
        "pods over the size asked, most of one PodReplica",
        &|r| r.most_over as f64,
        &n0,
    );
    // Pods the phases need created (each size's growth over the one before, from none),
    // and what each contender created beyond that (made twice, then deleted).
    let needed: usize = ours[0][0]
        .converge_s
        .iter()
        .scan(0, |before, &(size, _)| {
            let grown = size.saturating_sub(*before);
            *before = size;
            Some(grown * objects)
        })
        .sum();
    line(
        "surplus pods created (beyond the sizes asked), later deleted",
        &|r| r.writes.get("create pods").copied().unwrap_or(0) as f64 - needed as f64,
        &n0,
    );
    line("reconciles", &|r| r.reconciles as f64, &n0);
    line(
        "· holds run out (wasmop: decided with its objects still on their way)",
        &|r| r.host_counts.map_or(f64::NAN, |(h, _)| h as f64),
        &n0,
    );
    line(
        "· watches started (wasmop)",
        &|r| r.host_counts.map_or(f64::NAN, |(_, w)| w as f64),
        &n0,
    );
    line("writes", &|r| r.total_writes() as f64, &n0);
    let mut kinds: Vec<String> = named
        .iter()
        .flat_map(|c| c.iter().flat_map(|r| r.writes.keys().cloned()))
        .collect();
    kinds.sort();
    kinds.dedup();
    for k in kinds {
        line(
            &format!("· {k}"),
            &|r| r.writes.get(&k).copied().unwrap_or(0) as f64,
            &n0,
        );
    }
    line("operator CPU s", &|r| r.cpu_s, &s1);
    line(
        "control plane CPU s, its idle rate subtracted",
        &|r| r.control_cpu_s,
        &s1,
    );
    line("peak RSS MiB", &|r| r.peak_mib, &n0);
    line("RSS at rest MiB", &|r| r.rest_mib, &n0);
    let per = objects as f64;
    line(
        "operator CPU per PodReplica, ms",
        &|r| r.cpu_s * 1000.0 / per,
        &s2,
    );
    line(
        "peak RSS per PodReplica, KiB",
        &|r| r.peak_mib * 1024.0 / per,
        &s1,
    );
    line(
        "start → first decision s (from the spawn to the first pod of a PodReplica made before)",
        &|r| r.first_pod_s,
        &s2,
    );
    line(
        "start → first decision s, empty cache (wasmop)",
        &|r| r.cold_first_pod_s.unwrap_or(f64::NAN),
        &s2,
    );
    line("start → ready s (from the spawn)", &|r| r.ready_s, &s2);
    line(
        "start → ready s, empty cache (wasmop)",
        &|r| r.cold_ready_s.unwrap_or(f64::NAN),
        &s2,
    );
    line("RSS at ready MiB", &|r| r.ready_mib, &n0);
    line(
        "status after the pods, p50 ms",
        &|r| crate::latency::quantile(&r.status_ms, 0.5),
        &n0,
    );
    line(
        "status after the pods, max ms",
        &|r| r.status_ms.last().copied().unwrap_or(f64::NAN),
        &n0,
    );
}

/// The JSON of the comparison: every run of every contender.
pub fn json(bystanders: usize, contenders: &[Vec<Run>]) -> Value {
    Value::Array(
        contenders
            .iter()
            .flatten()
            .map(|r| {
                json!({
                    "name": r.name,
                    "bystanders": bystanders,
                    "round": r.round,
                    "ready_s": r.ready_s,
                    "cold_ready_s": r.cold_ready_s,
                    "first_pod_s": r.first_pod_s,
                    "cold_first_pod_s": r.cold_first_pod_s,
                    "ready_mib": r.ready_mib,
                    "converge_s": r.converge_s,
                    "reconciles": r.reconciles,
                    "holds_expired": r.host_counts.map(|(h, _)| h),
                    "watches_started": r.host_counts.map(|(_, w)| w),
                    "most_over": r.most_over,
                    "writes": r.writes,
                    "cpu_s": r.cpu_s,
                    "control_cpu_s": r.control_cpu_s,
                    "peak_mib": r.peak_mib,
                    "rest_mib": r.rest_mib,
                    "status_ms": r.status_ms,
                })
            })
            .collect(),
    )
}
