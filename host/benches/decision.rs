//! Benchmark: the cost of one sandboxed decision (fresh store + instantiate + call) against
//! the same PodReplica decision compiled natively, for 1, 10 and 100 observed pods. Both
//! sides get the pods as the host sends them: cut to the fields PodReplica declares it reads
//! (the sandbox as JSON text, native code as parsed values, the cheaper form). Prints
//! medians and their ratio, measured in one run (the two sides alternate call by call).
//! Needs the plugins (`make plugins`).
//!
//! Run: `make bench` (or `cargo bench -p wasmop --bench decision`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wasmop::observe::Fields;
use wasmop::runtime::{Entry, Limits, Observed, Sandbox};

fn plugin(file: &str) -> Vec<u8> {
    let dir = std::env::var("WASMOP_PLUGIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "../target".into()))
                .join("wasm32-wasip2/plugin")
        });
    std::fs::read(dir.join(file))
        .unwrap_or_else(|e| panic!("{file}: {e}; run `make plugins` first"))
}

/// A PodReplica with `pods` Running pods, each cut to `fields`.
fn world(pods: usize, fields: &Fields) -> Observed {
    let primary = json!({"apiVersion": "app.example.com/v1alpha1", "kind": "PodReplica",
        "metadata": {"name": "bench", "namespace": "default", "uid": "U", "generation": 1},
        "spec": {"size": pods}});
    let pods: Vec<Value> = (0..pods)
        .map(|i| {
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("bench-pod-{i:03}"), "namespace": "default", "uid": format!("uid-{i}"),
                    "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"app.example.com/podreplica": "bench"},
                    "ownerReferences": [{"apiVersion": "app.example.com/v1alpha1", "kind": "PodReplica", "name": "bench", "uid": "U", "controller": true}]},
                "spec": {"containers": [{"name": "busybox", "image": "busybox", "command": ["sleep", "3600"]}],
                    "nodeName": "kwok-node-0", "restartPolicy": "Always"},
                "status": {"phase": "Running", "podIP": "10.0.0.1", "hostIP": "10.0.0.2",
                    "conditions": [{"type": "Ready", "status": "True"}, {"type": "ContainersReady", "status": "True"}],
                    "containerStatuses": [{"name": "busybox", "ready": true, "restartCount": 0, "image": "busybox", "imageID": "", "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]}})
        })
        .map(|pod| fields.project(pod))
        .collect();
    Observed::new(primary)
        .with_related("pods", pods)
        .at(1_767_225_600_000)
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn time(runs: usize, mut f: impl FnMut()) -> Duration {
    for _ in 0..runs / 10 {
        f();
    }
    median(
        (0..runs)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed()
            })
            .collect(),
    )
}

/// Medians of `a` and `b`, run alternately (`runs` each, after a warm-up): on a shared
/// machine a burst of load then slows both sides alike, and their ratio holds.
fn time_pair(runs: usize, mut a: impl FnMut(), mut b: impl FnMut()) -> (Duration, Duration) {
    for _ in 0..runs / 10 {
        a();
        b();
    }
    let (mut ta, mut tb) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
    for _ in 0..runs {
        let t = Instant::now();
        a();
        ta.push(t.elapsed());
        let t = Instant::now();
        b();
        tb.push(t.elapsed());
    }
    (median(ta), median(tb))
}

fn main() {
    let sandbox = Sandbox::new(1).unwrap();
    let hostile = sandbox
        .load(&plugin("wasmop_hostile.wasm"), Limits::default())
        .unwrap();
    let podreplica = sandbox
        .load(&plugin("podreplica.wasm"), Limits::default())
        .unwrap();
    let ok = Observed::new(
        json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Hostile",
        "metadata": {"name": "ok", "namespace": "default", "uid": "u"}, "spec": {"mode": "ok"}}),
    );
    let fixed = time(2000, || {
        sandbox
            .decide_blocking(&hostile, Entry::Reconcile, &ok, "bench")
            .unwrap()
            .unwrap();
    });
    println!(
        "fixed cost of one sandboxed call (fresh store + instantiate + trivial reconcile): {:.1} µs",
        fixed.as_secs_f64() * 1e6
    );
    println!(
        "{:>6} {:>14} {:>14} {:>8}",
        "pods", "sandboxed µs", "native µs", "ratio"
    );
    let fields = Fields::declared(podreplica.info.relations[0].fields.as_deref());
    for n in [1usize, 10, 100] {
        let obs = world(n, &fields);
        // The host's caches hold each related object as the guest's JSON text, made once
        // per object version when it arrives (`operator::packed`): a call sends that text.
        let mut packed = Observed::new(obs.primary.clone()).at(obs.now_unix_ms);
        packed.related_json = obs
            .related
            .iter()
            .map(|(name, objects)| (name.clone(), objects.iter().map(Value::to_string).collect()))
            .collect();
        let (wasm, native) = time_pair(
            400,
            || {
                let plan = sandbox
                    .decide_blocking(&podreplica, Entry::Reconcile, &packed, "bench")
                    .unwrap()
                    .unwrap();
                assert!(plan.actions.is_empty());
            },
            || {
                let plan = podreplica::decide::reconcile(&obs).unwrap();
                assert!(plan.actions.is_empty());
            },
        );
        println!(
            "{n:>6} {:>14.1} {:>14.1} {:>8.2}",
            wasm.as_secs_f64() * 1e6,
            native.as_secs_f64() * 1e6,
            wasm.as_secs_f64() / native.as_secs_f64()
        );
    }
}
