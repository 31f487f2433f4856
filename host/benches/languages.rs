//! Benchmark: the article's PodReplica in each language the host runs (Rust, Python,
//! TypeScript, Go), the same decision (`guests/conformance/podreplica`): component size; load
//! time cold (compile, type-check, pre-instantiate, `info()`) and from the on-disk compiled
//! cache as a restarted host has it; one decision (fresh store + instantiate + call) at 1, 10
//! and 100 observed pods against the same decision compiled natively in Rust; the guest
//! memory one call takes at 100 pods. Prints one table per measure, medians.
//! Needs the plugins (`make plugins polyglot`).
//!
//! Run: `make bench` (or `cargo bench -p wasmop --bench languages`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wasmop::observe::Fields;
use wasmop::runtime::{Entry, Limits, Observed, Sandbox};

const IMPLEMENTATIONS: [(&str, &str); 4] = [
    ("Rust", "podreplica.wasm"),
    ("Python", "podreplica_py.wasm"),
    ("TypeScript", "podreplica_ts.wasm"),
    ("Go", "podreplica_go.wasm"),
];

fn plugin_dir() -> PathBuf {
    std::env::var("WASMOP_PLUGIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "../target".into()))
                .join("wasm32-wasip2/plugin")
        })
}

fn plugin(file: &str) -> Vec<u8> {
    std::fs::read(plugin_dir().join(file))
        .unwrap_or_else(|e| panic!("{file}: {e}; run `make plugins polyglot` first"))
}

/// A PodReplica with `pods` Running, ready pods (its size), each cut to `fields`, as the
/// host's caches hold them: the primary parsed, the related objects as JSON text.
fn world(pods: usize, fields: &Fields) -> (Observed, Observed) {
    let primary = json!({"apiVersion": "app.example.com/v1alpha1", "kind": "PodReplica",
        "metadata": {"name": "bench", "namespace": "default", "uid": "U", "generation": 1},
        "spec": {"size": pods}});
    let pods: Vec<Value> = (0..pods)
        .map(|i| {
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("bench-pod-{i:03}"), "namespace": "default", "uid": format!("uid-{i}"),
                    "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"app.example.com/podreplica": "bench"},
                    "ownerReferences": [{"apiVersion": "app.example.com/v1alpha1", "kind": "PodReplica", "name": "bench", "uid": "U", "controller": true}]},
                "spec": {"containers": [{"name": "busybox", "image": "busybox", "command": ["sleep", "3600"]}]},
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
        })
        .map(|pod| fields.project(pod))
        .collect();
    let parsed = Observed::new(primary.clone())
        .with_related("pods", pods.clone())
        .at(1_767_225_600_000);
    let mut packed = Observed::new(primary).at(1_767_225_600_000);
    packed.related_json = [(
        "pods".to_string(),
        pods.iter().map(Value::to_string).collect(),
    )]
    .into_iter()
    .collect();
    (parsed, packed)
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn time(runs: usize, mut f: impl FnMut()) -> Duration {
    for _ in 0..runs.div_ceil(10) {
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

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

fn main() {
    let cache = std::env::temp_dir().join(format!("wasmop-bench-languages-{}", std::process::id()));
    std::fs::create_dir_all(&cache).unwrap();
    println!(
        "{:<11} {:>9} {:>11} {:>13} {:>10} {:>10} {:>10} {:>8} {:>13}",
        "language",
        "size MiB",
        "load cold s",
        "load cached s",
        "1 pod ms",
        "10 pods ms",
        "100 pods ms",
        "x native",
        "call mem MiB"
    );
    for (language, file) in IMPLEMENTATIONS {
        let bytes = plugin(file);
        // Cold: a fresh engine (no function cache), no disk cache. Then a fresh engine reading
        // what the first one wrote to the disk cache, as a restarted host does.
        let t = Instant::now();
        Sandbox::new(1)
            .unwrap()
            .with_compiled_dir(&cache)
            .load(&bytes, Limits::default())
            .unwrap();
        let cold = t.elapsed();
        let t = Instant::now();
        Sandbox::new(1)
            .unwrap()
            .with_compiled_dir(&cache)
            .load(&bytes, Limits::default())
            .unwrap();
        let cached = t.elapsed();

        let sandbox = Sandbox::new(1).unwrap().with_compiled_dir(&cache);
        let loaded = sandbox.load(&bytes, Limits::default()).unwrap();
        let fields = Fields::declared(loaded.info.relations[0].fields.as_deref());
        let runs = if language == "Rust" { 400 } else { 60 };
        let mut decisions = Vec::new();
        let mut native_100 = Duration::ZERO;
        for n in [1usize, 10, 100] {
            let (parsed, packed) = world(n, &fields);
            decisions.push(time(runs, || {
                let plan = sandbox
                    .decide_blocking(&loaded, Entry::Reconcile, &packed, "bench")
                    .unwrap()
                    .unwrap();
                assert!(plan.actions.is_empty(), "{language}: a settled PodReplica");
            }));
            if n == 100 {
                native_100 = time(400, || {
                    let plan = podreplica::decide::reconcile(&parsed).unwrap();
                    assert!(plan.actions.is_empty());
                });
            }
        }
        // The guest memory of one call at 100 pods: a sandbox of its own, whose budget
        // records the most memory held at once.
        let measured = Sandbox::with_guest_memory(1, usize::MAX)
            .unwrap()
            .with_compiled_dir(&cache);
        let loaded = measured.load(&bytes, Limits::default()).unwrap();
        let (_, packed) = world(100, &fields);
        measured
            .decide_blocking(&loaded, Entry::Reconcile, &packed, "bench")
            .unwrap()
            .unwrap();
        let peak = measured.engine().guest_memory().peak();
        println!(
            "{:<11} {:>9.1} {:>11.2} {:>13.2} {:>10} {:>10} {:>10} {:>8.0} {:>13.1}",
            language,
            bytes.len() as f64 / (1 << 20) as f64,
            cold.as_secs_f64(),
            cached.as_secs_f64(),
            ms(decisions[0]),
            ms(decisions[1]),
            ms(decisions[2]),
            decisions[2].as_secs_f64() / native_100.as_secs_f64(),
            peak as f64 / (1 << 20) as f64
        );
    }
    println!("(x native: the 100-pod decision against the Rust decision compiled natively)");
    let _ = std::fs::remove_dir_all(&cache);
}
