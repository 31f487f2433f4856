//! Hot swap under load: `wasmop push` of PodReplica v2 while every PodReplica exists, the
//! time to the verdict, then until each PodReplica's status was written by v2; and, to
//! compare with, a pass over every object that writes nothing (v2's code again under a new
//! digest).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};

use crate::support::uploads::push;
use crate::support::{Cluster, Host, podreplica_resource};

/// Waits until no pod is terminating: the scale-down's deletions end with a burst of final
/// deletes when their 30 s grace period runs out, which would otherwise land on the push.
pub async fn quiet(client: &Client) {
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), "default");
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(120) {
        let terminating = pods
            .list_metadata(&ListParams::default())
            .await
            .map(|l| {
                l.items
                    .iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_some())
                    .count()
            })
            .unwrap_or(usize::MAX);
        if terminating == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    println!(
        "no pod terminating after {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// What a hot swap under load cost.
#[derive(Debug, Clone, Copy, Default)]
pub struct Swap {
    /// `wasmop push` of v2 until its verdict, seconds.
    pub push_s: f64,
    /// Verdict until every PodReplica's status was written by v2, seconds.
    pub all_s: f64,
    /// p99 of that per object, seconds.
    pub p99_s: f64,
    /// Verdict on the same code under a new digest until every PodReplica was decided
    /// again: a full pass that writes nothing, seconds.
    pub pass_s: f64,
}

/// `bytes` with a custom section appended: another digest, the very same code.
fn same_code_new_digest(bytes: &[u8]) -> Vec<u8> {
    let name = b"wasmop-bench";
    let payload = b"same code, another digest";
    let size = 1 + name.len() + payload.len();
    assert!(size < 128 && name.len() < 128, "one-byte LEB128 sizes");
    let mut out = bytes.to_vec();
    out.extend_from_slice(&[0, size as u8, name.len() as u8]);
    out.extend_from_slice(name);
    out.extend_from_slice(payload);
    out
}

/// Reconciles of PodReplica so far (every version), from the host's metrics.
fn reconciles(host: &Host) -> u64 {
    let (_, text) = host.http_get("/metrics").unwrap_or_default();
    text.lines()
        .filter(|l| {
            l.starts_with("wasmop_reconciles_total{") && l.contains("plugin=\"podreplica\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// Pushes v2's code again under a new digest and times the pass over every object that
/// the swap starts: its decisions equal the running ones, so it writes nothing. Timed by the
/// host's reconcile counter, from its first move to `n` more reconciles.
async fn pass_without_writes(cluster: &Cluster, host: &Host, n: usize) -> f64 {
    let file =
        std::env::temp_dir().join(format!("wasmop-bench-v2-again-{}.wasm", std::process::id()));
    std::fs::write(
        &file,
        same_code_new_digest(&crate::support::plugin_bytes("podreplica_v2.wasm")),
    )
    .unwrap();
    let before = reconciles(host);
    let (kubeconfig, path) = (cluster.kubeconfig.clone(), file.clone());
    let pushing = std::thread::spawn(move || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasmop"))
            .args(["push", "podreplica"])
            .arg(&path)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["--namespace", "default", "--timeout", "120"])
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string(),
        )
    });
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut first_move = None;
    loop {
        let now = reconciles(host);
        if now > before && first_move.is_none() {
            first_move = Some(Instant::now());
        }
        if now >= before + n as u64 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the pass never reached every object"
        );
        // Each look is an HTTP request of about a millisecond: the pass is short.
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let pass = first_move.map_or(0.0, |t| t.elapsed().as_secs_f64());
    let (ok, out) = pushing.join().unwrap();
    let _ = std::fs::remove_file(&file);
    assert!(ok, "push failed: {out}");
    pass
}

/// A hot swap to v2 pushed while every PodReplica exists and no pod is terminating, then a
/// pass that writes nothing to compare it with.
pub async fn swap(cluster: &Cluster, host: &Host, client: &Client, n: usize) -> Swap {
    quiet(client).await;
    let started = Instant::now();
    let (ok, out) = push(cluster, "podreplica", "podreplica_v2.wasm");
    assert!(ok, "push failed: {out}");
    let verdict = Instant::now();
    let push_s = verdict.duration_since(started).as_secs_f64();
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &podreplica_resource());
    let mut first: HashMap<String, f64> = HashMap::new();
    let deadline = verdict + Duration::from_secs(600);
    while first.len() < n {
        if let Ok(list) = api.list(&ListParams::default()).await {
            let at = verdict.elapsed().as_secs_f64();
            for pr in list.items {
                let by_v2 = pr.data["status"]["conditions"]
                    .as_array()
                    .is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c["message"].as_str().is_some_and(|m| m.ends_with("(v2)")))
                    });
                if by_v2 {
                    first
                        .entry(pr.metadata.name.unwrap_or_default())
                        .or_insert(at);
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "v2 never reconciled every object"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut times: Vec<f64> = first.into_values().collect();
    times.sort_by(f64::total_cmp);
    let all_s = times.last().copied().unwrap_or(0.0);
    let p99_s = crate::latency::quantile(&times, 0.99);
    let pass_s = pass_without_writes(cluster, host, n).await;
    Swap {
        push_s,
        all_s,
        p99_s,
        pass_s,
    }
}
