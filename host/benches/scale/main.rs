//! `make bench-scale`: the host converging thousands of objects on the local control plane,
//! against the floor of the same work done by a bare client. For each size (rows 100, 300
//! and 1,000 PodReplicas by default) on a fresh control plane: the floor, the operator floor
//! (the least any operator must send for convergence at size 3, sent by a bare client),
//! convergence of every PodReplica at size 3, rescaled to 5 and to 2 (seconds, ratio to the
//! floor and to the operator floor, host CPU, API requests by verb, peak memory, the control
//! plane's CPU beside the floor's), memory at rest, delete → create sent (event → action,
//! from the API server's audit log, and inside the host from its own histogram) and delete →
//! replacement seen, and a hot swap to v2 under load, and the cost of a shadow candidate (the same rescale without and
//! with one). For the largest size, the scale row: the same objects converged by 1, 2 and 3
//! sharded replicas (`--replicas`), with each replica's share and memory. Prints a table and
//! writes JSON under `~/.cache/wasmop/bench/`.
//!
//! `--smoke` (in `make test`): 100 PodReplicas, asserts correctness only (all converge, the
//! operator floor's too, no PodReplica ever over the size it was given, each of 10 deleted
//! pods replaced by one host create that the audit log shows after its delete and that the
//! host's own event → action histogram counts), no timings, no JSON.
//!
//! Run: `scripts/bench-scale [--objects 100,300,1000] [--samples 200] [--replicas 1,2,3] [--smoke] [--converge-only]`.
//! `--converge-only`: the floors, the three phases and the memory at rest, nothing after.

#[path = "../../tests/support/mod.rs"]
#[allow(unused_imports)]
mod support;

mod audit;
mod control;
mod converge;
mod cost;
mod floor;
mod latency;
mod operator_floor;
mod reaction;
mod replicas;
mod report;
mod shadow;
mod swap;
mod tracker;
mod versus;

use std::time::Duration;

use report::{Phase, Row};
use support::{Cluster, Host, eventually, podreplica_resource, wait_for_crd};

/// The command line (after `cargo bench ... --`).
struct Args {
    objects: Vec<usize>,
    samples: usize,
    replicas: Vec<usize>,
    smoke: bool,
    /// Only the floor, the three phases and the memory at rest: for measuring one lever.
    converge_only: bool,
    /// The PodReplica component the host runs (a file of the plugins directory): the Rust
    /// one, or the same plugin in another language (`podreplica_py.wasm`, ...).
    plugin: String,
    /// The operators wasmop is compared with at the largest size ([`versus`]); empty: none.
    versus: Vec<versus::Contender>,
    /// Only the comparison, none of the rows.
    versus_only: bool,
    /// Unrelated pods in the namespace during the comparison (every contender caches them).
    bystanders: usize,
    /// The sizes the comparison applies, one phase each, in order.
    sizes: Vec<usize>,
    /// How many times each contender runs in the comparison (rotating order, a fresh
    /// control plane each round).
    rounds: usize,
}

fn contenders(v: Option<String>) -> Vec<versus::Contender> {
    let v = v
        .expect("--versus needs a list: controller-runtime[@N],kube-rs[@N],wasmop-sharded or none");
    v.split(',')
        .filter(|c| !c.is_empty() && *c != "none")
        .map(|c| versus::Contender::parse(c).unwrap_or_else(|e| panic!("--versus: {e}")))
        .collect()
}

fn number(flag: &str, v: Option<String>) -> usize {
    v.and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{flag} needs a number"))
}

fn numbers(flag: &str, v: Option<String>) -> Vec<usize> {
    let v = v.unwrap_or_else(|| panic!("{flag} needs a list, e.g. 1,2,3"));
    v.split(',')
        .map(|n| {
            n.trim()
                .parse()
                .unwrap_or_else(|_| panic!("{flag}: `{n}` is not a number"))
        })
        .collect()
}

fn args() -> Args {
    let mut a = Args {
        objects: vec![100, 300, 1000],
        samples: 200,
        replicas: vec![1, 2, 3],
        smoke: false,
        converge_only: false,
        plugin: "podreplica.wasm".into(),
        // Controller-runtime at its default and at wasmop's workers; kube-rs at wasmop's.
        versus: vec![
            versus::Contender::ControllerRuntime { workers: 1 },
            versus::Contender::ControllerRuntime {
                workers: versus::WASMOP_WORKERS,
            },
            versus::Contender::KubeRs {
                workers: versus::WASMOP_WORKERS,
            },
        ],
        versus_only: false,
        bystanders: 0,
        sizes: vec![3, 5, 2],
        rounds: 3,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--objects" => a.objects = numbers("--objects", it.next()),
            "--replicas" => a.replicas = numbers("--replicas", it.next()),
            "--samples" => a.samples = number("--samples", it.next()),
            "--smoke" => a.smoke = true,
            "--converge-only" => a.converge_only = true,
            "--plugin" => a.plugin = it.next().expect("--plugin needs a file name"),
            "--versus" => a.versus = contenders(it.next()),
            "--versus-only" => a.versus_only = true,
            "--rounds" => a.rounds = number("--rounds", it.next()).max(1),
            "--sizes" => a.sizes = numbers("--sizes", it.next()),
            "--bystanders" => a.bystanders = number("--bystanders", it.next()),
            "--bench" => {} // added by `cargo bench`
            "-h" | "--help" => {
                println!(
                    "usage: scripts/bench-scale [--objects 100,300,1000] [--samples 200] [--replicas 1,2,3] [--smoke] [--converge-only] [--plugin podreplica.wasm] [--versus controller-runtime[@N],kube-rs[@N],wasmop-sharded|none] [--versus-only] [--rounds 3] [--sizes 3,5,2] [--bystanders 2400]\n  --versus: at the largest size, wasmop against these operators, one after the other, each run on a fresh control plane (default controller-runtime@1,controller-runtime@8,kube-rs@8: @N reconciles at once, wasmop running 8; without @, the framework's default: 1 for controller-runtime, no limit for kube-rs; wasmop-sharded: wasmop again as three sharded replicas; none with --smoke, --converge-only or --plugin)\n  --versus-only: only that comparison\n  --rounds: how many times each contender runs in it, in rotating order (default 3); the table shows each figure's median and range\n  --sizes: the comparison's phases, each a size applied to every PodReplica (default 3,5,2)\n  --bystanders: that many unrelated pods Running in the namespace during the comparison (default 0)\n  --converge-only: the floors, the three phases and memory at rest only (no latency, swap, shadow or scale row)\n  --plugin: the PodReplica the host runs, from the plugins directory (podreplica_py.wasm, podreplica_ts.wasm, podreplica_go.wasm); with another than the Rust one, --converge-only"
                );
                std::process::exit(0);
            }
            other => panic!("unknown argument `{other}` (try --help)"),
        }
    }
    assert!(
        !a.sizes.is_empty() && a.sizes.last() != Some(&5),
        "--sizes: at least one size, the last not 5 (the status samples then patch to 5)"
    );
    if (a.smoke || a.converge_only || a.plugin != "podreplica.wasm") && !a.versus_only {
        a.versus = Vec::new();
    }
    if a.smoke {
        a.objects = vec![100];
        a.samples = 10;
        a.replicas = Vec::new();
    }
    if a.plugin != "podreplica.wasm" {
        // The swap and shadow phases push the Rust v2 over the plugin under test.
        a.converge_only = true;
    }
    if a.converge_only || a.versus_only {
        a.replicas = Vec::new();
    }
    a
}

/// wasmop and each of `others`, `rounds` times, `n` PodReplicas each ([`versus`]): every run
/// on a fresh control plane of its own, so no contender works on an etcd that another's
/// churn has grown; the contenders one after the other in an order that rotates from round
/// to round (the first of one round is the last of the next), so drift over the session
/// falls on each in turn. `status_samples` status-lag samples each. `bystanders` unrelated
/// pods run in the namespace the whole time (created before the contender starts, so its
/// caches list them). The PodReplicas are applied at each of `sizes` in turn. Returns each
/// contender's runs, wasmop's first.
async fn compare(
    n: usize,
    others: &[versus::Contender],
    (sizes, status_samples): (&[usize], usize),
    (bystanders, rounds): (usize, usize),
) -> Vec<Vec<versus::Run>> {
    let mut contenders = vec![versus::Contender::Wasmop];
    contenders.extend_from_slice(others);
    let mut runs: Vec<Vec<versus::Run>> = vec![Vec::new(); contenders.len()];
    for round in 0..rounds {
        let order: Vec<usize> = (0..contenders.len())
            .map(|i| (i + round) % contenders.len())
            .collect();
        let names: Vec<String> = order.iter().map(|&i| contenders[i].name()).collect();
        println!("round {} of {rounds}: {}", round + 1, names.join(" → "));
        for i in order {
            let mut run =
                compare_one(n, contenders[i], (sizes, status_samples), bystanders, round).await;
            run.round = round;
            runs[i].push(run);
        }
    }
    runs
}

/// One run of [`compare`]: `contender` on a fresh control plane.
async fn compare_one(
    n: usize,
    contender: versus::Contender,
    (sizes, status_samples): (&[usize], usize),
    bystanders: usize,
    round: usize,
) -> versus::Run {
    // Room on the three nodes for the largest phase (and the status samples' size 5).
    let largest = sizes.iter().copied().chain([5]).max().unwrap_or(5);
    let node_pods = (n * largest / 3 + 200 + bystanders / 3) as u32;
    let cluster = Cluster::start_with_node_pods(
        &format!("versus-{n}-{}-{round}", contender.slug()),
        node_pods,
    );
    let client = cluster.client().await;
    let tracker = tracker::Tracker::start(client.clone());
    let names = converge::names(n);
    operator_floor::install_crd(&client).await;
    wait_for_crd(&client, &podreplica_resource()).await;
    if bystanders > 0 {
        let (secs, _) = floor::floor(&client, bystanders, in_flight()).await;
        println!("{bystanders} unrelated pods Running in the namespace in {secs:.1} s");
    }
    let stage = versus::Stage {
        cluster: &cluster,
        client: &client,
        tracker: &tracker,
        names: &names,
        sizes,
        status_samples,
    };
    let mut created = tracker.created();
    support::apply(
        &client,
        &podreplica_resource(),
        "default",
        &converge::podreplica(versus::EARLY, 1),
    )
    .await
    .expect("applying the PodReplica made before the start");
    if !contender.is_wasmop() {
        let (op, spawned) = versus::start_reference(&cluster, contender);
        return stage.run(&op, spawned, &mut created).await;
    }
    // wasmop as deployed: compiled components cached on disk. The Deployment's emptyDir
    // starts empty: a first host's start, which fills the cache, is reported as the cold
    // one; the measured host starts on the cache it filled, as a restarted container does.
    let cache = cluster.state.join("wasmop-cache");
    let cache_arg = cache.to_string_lossy().to_string();
    let args = ["--cache-dir", cache_arg.as_str()];
    cluster.grant(&["podreplica.wasm"]);
    let (cold_ready_s, cold_first_pod_s) = {
        let spawned = std::time::Instant::now();
        let cold = Host::start_with(&cluster.kubeconfig, &["podreplica.wasm"], &args, &[]);
        let (secs, _) = versus::hosts(versus::Contender::Wasmop, std::slice::from_ref(&cold))
            .ready(spawned)
            .await;
        let first = versus::first_pod_s(&mut created, spawned).await;
        println!(
            "wasmop: start → ready with an empty cache {secs:.2} s, → first decision {first:.2} s"
        );
        (secs, first)
    };
    // The measured start decides the early PodReplica again: its pod goes first.
    early_pods_gone(&client).await;
    let mut run = if contender == versus::Contender::WasmopSharded {
        sharded_run(&stage, &cache, &mut created).await
    } else {
        let spawned = std::time::Instant::now();
        let host = Host::start_with(&cluster.kubeconfig, &["podreplica.wasm"], &args, &[]);
        let single = versus::hosts(versus::Contender::Wasmop, std::slice::from_ref(&host));
        stage.run(&single, spawned, &mut created).await
    };
    run.cold_ready_s = Some(cold_ready_s);
    run.cold_first_pod_s = Some(cold_first_pod_s);
    run
}

/// Deletes the pods of [`versus::EARLY`] (no operator running) and waits until none is left.
async fn early_pods_gone(client: &kube::Client) {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, DeleteParams, ListParams};
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let lp = ListParams::default().labels(&format!("{}={}", tracker::LABEL, versus::EARLY));
    pods.delete_collection(&DeleteParams::default().grace_period(0), &lp)
        .await
        .expect("deleting the early PodReplica's pods");
    eventually(
        Duration::from_secs(60),
        "the early PodReplica's pods gone",
        || async {
            let left = pods.list_metadata(&lp).await.ok()?;
            left.items.is_empty().then_some(())
        },
    )
    .await;
}

/// Three sharded replicas through `stage`, each started on its own copy of the compiled
/// components' cache `warm` (as three Pods would hold their own).
async fn sharded_run(
    stage: &versus::Stage<'_>,
    warm: &std::path::Path,
    created: &mut tokio::sync::broadcast::Receiver<(String, std::time::Instant)>,
) -> versus::Run {
    let dirs: Vec<std::path::PathBuf> = (0..3)
        .map(|i| {
            let dir = warm.with_file_name(format!("wasmop-cache-{i}"));
            let copied = std::process::Command::new("cp")
                .arg("-a")
                .arg(warm)
                .arg(&dir)
                .status()
                .is_ok_and(|s| s.success());
            assert!(copied, "copying {} to {}", warm.display(), dir.display());
            dir
        })
        .collect();
    let spawned = std::time::Instant::now();
    let hosts: Vec<Host> = dirs
        .iter()
        .enumerate()
        .map(|(i, dir)| {
            let mut args = versus::replica_args(i);
            args.extend(["--cache-dir".to_string(), dir.to_string_lossy().to_string()]);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            Host::start_with(&stage.cluster.kubeconfig, &["podreplica.wasm"], &args, &[])
        })
        .collect();
    let run = stage
        .run(
            &versus::hosts(versus::Contender::WasmopSharded, &hosts),
            spawned,
            created,
        )
        .await;
    drop(hosts);
    for dir in dirs {
        let _ = std::fs::remove_dir_all(dir);
    }
    run
}

/// Host reconciles at once (`WASMOP_CONCURRENCY`, which the host reads too; its default
/// 8): the floor keeps as many requests in flight.
fn in_flight() -> usize {
    std::env::var("WASMOP_CONCURRENCY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8)
}

async fn row(n: usize, samples: usize, smoke: bool, converge_only: bool, plugin: &str) -> Row {
    let node_pods = (n * 5 / 3 + 200) as u32;
    let cluster = Cluster::start_with_node_pods(&format!("scale-{n}"), node_pods);
    let client = cluster.client().await;
    let tracker = tracker::Tracker::start(client.clone());
    let before = control::look(&cluster.state);
    let (floor_s, floor_pods) = floor::floor(&client, n * 3, in_flight()).await;
    let floor_control = control::between(&before, &control::look(&cluster.state));
    floor::remove(&client, floor_pods).await;
    println!("{n}: floor {floor_s:.1} s for {} pods", n * 3);

    let names = converge::names(n);
    operator_floor::install_crd(&client).await;
    wait_for_crd(&client, &podreplica_resource()).await;
    let before = control::look(&cluster.state);
    let op_floor_s =
        operator_floor::operator_floor(&client, &tracker, &names, 3, in_flight()).await;
    let op_floor_control = control::between(&before, &control::look(&cluster.state));
    let rewrite_s = operator_floor::rewrite_statuses(&client, &names, in_flight()).await;
    operator_floor::remove(&client, &tracker, &names).await;
    println!("{n}: operator floor {op_floor_s:.1} s for {n} PodReplicas at 3");

    let host = Host::start(&cluster, &[plugin], &[], &[]);
    eventually(Duration::from_secs(120), "host ready", || async {
        (host.http_get("/readyz")?.0 == 200).then_some(())
    })
    .await;
    let mut phases = Vec::new();
    let mut bound = 0;
    for size in [3, 5, 2] {
        tracker.take_most();
        bound = bound.max(size);
        let before = cost::look(&host);
        let control_before = control::look(&cluster.state);
        let secs = converge::apply_and_converge(&client, &tracker, &names, size).await;
        let spent = cost::between(&before, &cost::look(&host));
        let control = control::between(&control_before, &control::look(&cluster.state));
        let most = tracker.take_most();
        assert!(
            most <= bound,
            "a PodReplica had {most} live pods while asked for at most {bound}"
        );
        let (_, peak) = cost::memory_mib(&host);
        println!("{n}: size {size} in {secs:.1} s (most pods at once {most})");
        phases.push(Phase {
            size,
            secs,
            spent,
            control,
            peak_mib: peak,
            most,
        });
        bound = size;
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (rest_mib, _) = cost::memory_mib(&host);
    let reactions_before = reaction::look(&host);
    let lat = if converge_only {
        Default::default()
    } else {
        // At rest: the scale-down's pods have all gone (their final deletes would otherwise
        // run beside the samples).
        swap::quiet(&client).await;
        latency::replacement_ms(&client, &tracker, &names, 2, samples).await
    };
    // Panics unless the audit log shows a pod create after every delete.
    let action = audit::delete_to_create_ms(&cluster.state, &lat.victims).await;
    let host_action = reaction::between(&reactions_before, &reaction::look(&host));
    // Each deleted pod's change made the host decide and create its replacement: every
    // sample is one reaction in the host's histogram.
    assert!(
        host_action.count() >= lat.victims.len() as u64,
        "the host timed {} reactions for {} deleted pods",
        host_action.count(),
        lat.victims.len()
    );
    let (swap, shadow) = if smoke || converge_only {
        Default::default()
    } else {
        let swap = swap::swap(&cluster, &host, &client, n).await;
        let shadow = shadow::shadow_cost(&cluster, &host, &client, &tracker, &names).await;
        (swap, shadow)
    };
    Row {
        objects: n,
        floor_s,
        floor_control,
        op_floor_s,
        op_floor_control,
        rewrite_s,
        phases,
        rest_mib,
        latency_ms: lat.replacement_ms,
        action,
        host_action,
        swap,
        shadow,
        sharded: Vec::new(),
    }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let a = args();
    if a.versus_only {
        let n = a.objects.iter().copied().max().unwrap_or(1000);
        let runs = compare(n, &a.versus, (&a.sizes, 10), (a.bystanders, a.rounds)).await;
        versus::print(n, a.bystanders, &runs);
        report::write_named_json("versus", &versus::json(a.bystanders, &runs));
        return;
    }
    let mut rows = Vec::new();
    for &n in &a.objects {
        rows.push(row(n, a.samples, a.smoke, a.converge_only, &a.plugin).await);
    }
    let compared = match a.objects.iter().max() {
        Some(&n) if !a.versus.is_empty() => Some((
            n,
            compare(n, &a.versus, (&a.sizes, 10), (a.bystanders, a.rounds)).await,
        )),
        _ => None,
    };
    if let (Some(last), Some(&n)) = (rows.last_mut(), a.objects.iter().max()) {
        for &k in &a.replicas {
            last.sharded.push(replicas::sharded(n, k).await);
        }
    }
    println!("PodReplica component: {}", a.plugin);
    report::print(&rows);
    if a.smoke {
        println!(
            "bench-scale smoke: every PodReplica converged at 3, 5 and 2; none ever over its size; every deleted pod replaced, each create in the audit log and in the host's event → action histogram"
        );
    } else {
        report::write_json(&rows);
    }
    if let Some((n, runs)) = compared {
        versus::print(n, a.bystanders, &runs);
        report::write_named_json("versus", &versus::json(a.bystanders, &runs));
    }
}
