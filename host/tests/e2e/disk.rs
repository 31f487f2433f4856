//! End to end: the host's disk cache keeps to its byte cap (issue 48, "Disks that only
//! grow"). Twenty distinct, valid, unsigned PodReplica components of 60 MiB each (the built
//! component with a wasm custom section of distinct filler appended) are published to a
//! real registry on loopback (distribution 2.8, TLS from a test CA, htpasswd); one
//! WasmPlugin is pointed at each in turn, on a host whose `--cache-dir` may hold 256 MiB.
//! The cache directory is walked for the whole window, by a thread about every millisecond
//! and again each time a version is accepted. The host removes the least recently used
//! files before it writes one (`runtime::disk::Cap`): the directory never holds more than
//! the cap, not even while a file is on its way.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::support::registry::{Registry, sha256};
use crate::support::uploads::*;
use crate::support::*;
use serde_json::json;

/// Artifacts pointed at in turn.
const ARTIFACTS: usize = 20;
/// The size of each published component, custom section included.
const ARTIFACT_BYTES: usize = 60 << 20;
/// `--cache-max-mib`: four artifacts at most, so twenty must evict.
const CAP_MIB: u64 = 256;

/// Appends `n` as unsigned LEB128.
fn leb128(mut n: usize, out: &mut Vec<u8>) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// `component` with a custom section (id 0, LEB128 size, name, payload) appended, named
/// `name` and filled with `fill`, so that the whole is `total` bytes. A custom section is
/// legal anywhere in a component; the host loads it as the component it extends.
fn padded(component: &[u8], name: &str, fill: u8, total: usize) -> Vec<u8> {
    let mut head = Vec::new();
    leb128(name.len(), &mut head);
    head.extend_from_slice(name.as_bytes());
    // The section's bytes after its id and size; the size's own length decides the rest.
    let rest = total - component.len() - 1;
    let size = (1..=5)
        .map(|n| rest - n)
        .find(|&s| {
            let mut l = Vec::new();
            leb128(s, &mut l);
            l.len() == rest - s
        })
        .expect("a size whose LEB128 fits");
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(component);
    out.push(0);
    leb128(size, &mut out);
    out.extend_from_slice(&head);
    out.resize(total, fill);
    assert_eq!(out.len(), total);
    out
}

/// Every file under `dir` with its length (what the host's cap counts), a file gone
/// between the listing and its `stat` left out.
fn files_under(dir: &Path, out: &mut Vec<(PathBuf, u64)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        match e.metadata() {
            Ok(m) if m.is_dir() => files_under(&e.path(), out),
            Ok(m) if m.is_file() => out.push((e.path(), m.len())),
            _ => {}
        }
    }
}

/// A file the host writes before renaming it into place (`.NAME.PID.tmp`).
fn in_flight(path: &Path) -> bool {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    name.starts_with('.') && name.ends_with(".tmp")
}

/// What the walks of the cache directory saw.
#[derive(Debug, Default)]
struct Seen {
    /// Walks made.
    walks: u64,
    /// The largest total of one walk, and its files.
    peak: u64,
    peak_files: Vec<(PathBuf, u64)>,
    /// Every file ever seen under its final name.
    files: BTreeSet<PathBuf>,
}

impl Seen {
    /// Walks `dir` once; its total.
    fn walk(&mut self, dir: &Path) -> u64 {
        let mut files = Vec::new();
        files_under(dir, &mut files);
        let total = files.iter().map(|f| f.1).sum();
        self.walks += 1;
        self.files.extend(
            files
                .iter()
                .filter(|f| !in_flight(&f.0))
                .map(|f| f.0.clone()),
        );
        if total > self.peak {
            self.peak = total;
            self.peak_files = files;
        }
        total
    }
}

/// A thread walking the cache directory about every millisecond until stopped (or dropped).
struct DiskWatch {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Seen>>,
}

impl DiskWatch {
    fn start(dir: PathBuf) -> DiskWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut seen = Seen::default();
            while !flag.load(Ordering::Relaxed) {
                seen.walk(&dir);
                // A walk is a few syscalls; a write of 60 MiB takes far longer than this
                // pause, which only leaves the two cores to the host and the registry.
                std::thread::sleep(Duration::from_millis(1));
            }
            seen
        });
        DiskWatch {
            stop,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> Seen {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .expect("running")
            .join()
            .expect("the disk watch")
    }
}

impl Drop for DiskWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

/// Proves the cap of `--cache-dir` (`--cache-max-mib`, pulled artifacts and compiled
/// components together) holds while 20 distinct unsigned 60 MiB artifacts (1,200 MiB) go
/// through one WasmPlugin on a host capped at 256 MiB: each is pulled, loaded and runs
/// (a component grown by a custom section is still the component); every walk of the
/// directory made once a version is accepted, and at the end, holds at most the cap; the
/// walks made about every millisecond for the whole window never see more than the cap and
/// the one file being written (the host writes, then evicts the least recently used; the
/// figures print by how much); every artifact was on the disk, the first ones are gone,
/// the newest and its compiled form are kept; the host stays Ready and decides a
/// PodReplica with the newest version after the churn.
#[tokio::test(flavor = "multi_thread")]
async fn twenty_artifacts_of_60_mib_leave_the_cache_under_its_cap() {
    let started = Instant::now();
    let cluster = Cluster::start("disk");
    let reg = Registry::start("disk");
    let base = plugin_bytes("podreplica.wasm");

    // Twenty distinct components of 60 MiB, published by `wasmop publish` (which loads
    // each first) two at a time, each from a file of its own removed once published.
    let work = Scratch::new("disk-artifacts");
    let publish = |i: usize| {
        let bytes = padded(
            &base,
            &format!("wasmop-e2e-filler-{i:02}"),
            i as u8,
            ARTIFACT_BYTES,
        );
        let file = work.0.join(format!("podreplica-{i:02}.wasm"));
        std::fs::write(&file, &bytes).unwrap();
        let tag = format!("fill-{i:02}");
        let manifest = reg.publish(&file, &format!("plugins/podreplica:{tag}"), None);
        std::fs::remove_file(&file).unwrap();
        (tag, manifest, sha256(&bytes))
    };
    let published: Vec<(String, String, String)> = std::thread::scope(|s| {
        let odd = s.spawn(|| (1..ARTIFACTS).step_by(2).map(publish).collect::<Vec<_>>());
        let even: Vec<_> = (0..ARTIFACTS).step_by(2).map(publish).collect();
        let odd = odd.join().expect("publishing the odd artifacts");
        even.into_iter()
            .zip(odd)
            .flat_map(|(e, o)| [e, o])
            .collect()
    });
    drop(work);
    let publishing = started.elapsed();

    assert_eq!(published.len(), ARTIFACTS);

    cluster.grant(&["podreplica.wasm"]);
    cluster
        .apply_yaml(&std::fs::read_to_string(repo().join("deploy/crds/podreplica.yaml")).unwrap());
    reg.pull_secret(&cluster, "regcred", &reg.user.1);
    // The window: the cache directory watched from before the host starts to after it
    // decided a PodReplica at the end.
    let cache = Scratch::new("disk-cache");
    let watch = DiskWatch::start(cache.0.clone());
    let ca = reg.ca.to_str().unwrap().to_string();
    let cache_dir = cache.0.to_str().unwrap().to_string();
    let cap_mib = CAP_MIB.to_string();
    let cap = CAP_MIB << 20;
    let host = Host::start_deployed(
        &cluster.kubeconfig,
        &[],
        &[
            "--install-crds",
            "--registry-ca",
            &ca,
            "--cache-dir",
            &cache_dir,
            "--cache-max-mib",
            &cap_mib,
        ],
        &[],
    );
    let client = cluster.client().await;
    wait_for_crd(&client, &wasmplugin_resource()).await;
    wait_for_crd(&client, &podreplica_resource()).await;

    // One WasmPlugin pointed at each artifact in turn (a second WasmPlugin of the same
    // plugin would be refused, NameTaken); the directory walked again at each acceptance.
    let mut settled = Seen::default();
    let mut settled_totals = Vec::new();
    let churn = Instant::now();
    for (tag, manifest, _) in &published {
        let reference = format!("{}:{tag}", reg.repo("plugins/podreplica"));
        apply(
            &client,
            &wasmplugin_resource(),
            "default",
            &json!({"apiVersion": "wasmop.dev/v1alpha1", "kind": "WasmPlugin",
                "metadata": {"name": "podreplica", "namespace": "default"},
                "spec": {"oci": {"reference": reference, "pullSecret": "regcred"}}}),
        )
        .await
        .unwrap();
        let one = Instant::now();
        eventually(
            Duration::from_secs(180),
            &format!("WasmPlugin podreplica Loaded from {tag} ({manifest})"),
            || async {
                let (_, reason, _, status) =
                    ready_condition_in(&client, "default", "podreplica").await?;
                (reason == "Loaded" && status["artifact"]["digest"] == manifest.as_str())
                    .then_some(())
            },
        )
        .await;
        let total = settled.walk(&cache.0);
        println!(
            "# {tag} accepted after {:?}: cache {:.1} MiB",
            one.elapsed(),
            mib(total)
        );
        settled_totals.push(total);
    }
    let churned = churn.elapsed();

    // Still Ready, still deciding, with the newest version.
    eventually(Duration::from_secs(60), "host ready", || async {
        (host.http_get("/readyz")?.0 == 200).then_some(())
    })
    .await;
    let pr = apply(
        &client,
        &podreplica_resource(),
        "default",
        &json!({"apiVersion": "app.example.com/v1alpha1", "kind": "PodReplica",
                "metadata": {"name": "after-churn", "namespace": "default"},
                "spec": {"size": 2}}),
    )
    .await
    .unwrap();
    let uid = pr.metadata.uid.unwrap();
    eventually(
        Duration::from_secs(120),
        "PodReplica after-churn with 2 Running pods",
        || converged(&client, &uid, 2),
    )
    .await;
    let (_, reason, _, status) = ready_condition_in(&client, "default", "podreplica")
        .await
        .expect("the WasmPlugin's status");
    assert_eq!(reason, "Loaded", "{status}");
    assert_eq!(
        status["artifact"]["digest"],
        published[ARTIFACTS - 1].1,
        "the newest still runs: {status}"
    );
    let seen = watch.finish();

    // What the disk holds now, and what left it.
    let mut now = Vec::new();
    files_under(&cache.0, &mut now);
    let at_end: u64 = now.iter().map(|f| f.1).sum();
    let present: BTreeSet<PathBuf> = now.iter().map(|f| f.0.clone()).collect();
    let artifact = |component: &str| {
        cache
            .0
            .join("artifacts/sha256")
            .join(component.trim_start_matches("sha256:"))
    };
    let kept: Vec<usize> = (0..ARTIFACTS)
        .filter(|&i| present.contains(&artifact(&published[i].2)))
        .collect();
    let ever: BTreeSet<PathBuf> = seen.files.union(&settled.files).cloned().collect();
    let evicted: Vec<&PathBuf> = ever.iter().filter(|p| !present.contains(*p)).collect();
    let logged = host
        .log_text()
        .matches("cache at its cap: least recently used file removed")
        .count();
    let peak_settled = settled_totals.iter().copied().max().unwrap_or(0);
    println!(
        "# disk cap {CAP_MIB} MiB ({cap} bytes), {ARTIFACTS} artifacts of {} MiB: peak seen {:.1} MiB ({} bytes, {:+.1} MiB against the cap, {} walks about every millisecond); peak at an acceptance {:.1} MiB; {:.1} MiB at the end",
        ARTIFACT_BYTES >> 20,
        mib(seen.peak),
        seen.peak,
        (seen.peak as f64 - cap as f64) / f64::from(1 << 20),
        seen.walks,
        mib(peak_settled),
        mib(at_end),
    );
    println!(
        "# evictions: {} files seen and gone ({} artifacts), {logged} logged by the host; artifacts kept at the end: {kept:?}",
        evicted.len(),
        evicted
            .iter()
            .filter(|p| p.starts_with(cache.0.join("artifacts/sha256")))
            .count(),
    );
    println!(
        "# the files of the peak walk: {:?}",
        seen.peak_files
            .iter()
            .map(|(p, l)| format!(
                "{} {:.1} MiB",
                p.strip_prefix(&cache.0).unwrap_or(p).display(),
                mib(*l)
            ))
            .collect::<Vec<_>>()
    );
    println!(
        "# publishing {publishing:?}, {ARTIFACTS} swaps {churned:?}, whole test {:?}",
        started.elapsed()
    );

    // Within the cap whenever the host is at rest.
    for (i, total) in settled_totals.iter().enumerate() {
        assert!(
            *total <= cap,
            "after {} was accepted the cache held {total} bytes, over its cap of {cap}",
            published[i].0
        );
    }
    assert!(at_end <= cap, "{at_end} bytes at the end, cap {cap}");
    // Never more than the cap, not even while a file is written.
    assert!(
        seen.peak <= cap,
        "a walk saw {} bytes, over the cap of {cap}: {:?}",
        seen.peak,
        seen.peak_files
    );
    assert!(seen.walks > ARTIFACTS as u64, "the disk watch walked");
    // A real effect: every artifact was on the disk; the first are gone, the newest kept
    // with its compiled form; the host says so in its log.
    for (tag, _, component) in &published {
        assert!(
            ever.contains(&artifact(component)),
            "{tag}'s component {component} was never seen on disk"
        );
    }
    let fit = (cap / ARTIFACT_BYTES as u64) as usize;
    assert!(kept.contains(&(ARTIFACTS - 1)), "the newest was evicted");
    assert!(
        kept.len() <= fit && kept.iter().all(|&i| i >= ARTIFACTS - fit),
        "only the newest artifacts are kept: {kept:?}"
    );
    let hex = published[ARTIFACTS - 1].2.trim_start_matches("sha256:");
    assert!(
        present
            .iter()
            .any(|p| p.starts_with(cache.0.join("compiled"))
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(hex))),
        "the newest's compiled form is kept: {present:?}"
    );
    assert!(
        logged >= ARTIFACTS - fit,
        "{logged} evictions logged, {} files seen and gone",
        evicted.len()
    );
}
