//! Hostile plugins are stopped with the right error, within their limits, without
//! affecting the host or other plugins. Guests that sleep, wait or read are in
//! [`blocking`]; answers over the output budget in [`output`].

#[path = "../support/mod.rs"]
mod support;

mod blocking;
mod output;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use wasmop::runtime::{
    COMPILED_KEPT, CallError, Entry, Limits, LoadError, LoadedPlugin, Observed, Sandbox,
};

fn hostile(sandbox: &Sandbox, limits: Limits) -> LoadedPlugin {
    sandbox
        .load(&support::plugin_bytes("wasmop_hostile.wasm"), limits)
        .expect("the hostile plugin loads")
}

fn observed(mode: &str) -> Observed {
    Observed::new(
        json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Hostile",
        "metadata": {"name": mode, "namespace": "default", "uid": "u"},
        "spec": {"mode": mode}}),
    )
}

fn call(sandbox: &Sandbox, plugin: &LoadedPlugin, mode: &str) -> Result<(), CallError> {
    sandbox
        .decide_blocking(plugin, Entry::Reconcile, &observed(mode), mode)
        .map(|r| {
            r.expect("no reconcile error");
        })
}

fn short_limits() -> Limits {
    Limits {
        deadline: Duration::from_millis(200),
        memory_bytes: 32 << 20,
        ..Limits::default()
    }
}

/// Nothing a call writes survives it: calls reusing the same pooled memory each find the
/// guest's statics as the module's image has them (the reset after each call restores the
/// pages the call dirtied, initialised data and zeroed data alike).
#[test]
fn every_call_starts_from_the_module_image() {
    let sandbox = Sandbox::new(1).unwrap();
    let plugin = hostile(&sandbox, Limits::default());
    for i in 0..300 {
        let plan = sandbox
            .decide_blocking(&plugin, Entry::Reconcile, &observed("remember"), "remember")
            .unwrap()
            .expect("no reconcile error");
        assert_eq!(
            plan.status,
            Some(json!({"calls": 1, "seed": 0x5EED_F00D_u64})),
            "call {i} saw what an earlier call left"
        );
    }
}

#[test]
fn endless_loop_times_out_at_its_deadline() {
    let sandbox = Sandbox::new(2).unwrap();
    let plugin = hostile(&sandbox, short_limits());
    let start = Instant::now();
    let err = call(&sandbox, &plugin, "spin").unwrap_err();
    let took = start.elapsed();
    assert_eq!(err, CallError::Timeout(Duration::from_millis(200)));
    assert!(
        took >= Duration::from_millis(200),
        "stopped early: {took:?}"
    );
    // One epoch tick (5 ms) after the deadline at most, plus the instantiation and a
    // loaded machine's scheduling: far below a second.
    assert!(
        took < Duration::from_millis(700),
        "stopped {took:?} after it started, the deadline was 200 ms"
    );
    println!("spin stopped after {took:?} (deadline 200ms)");
}

/// Memory-heavy tests run one at a time: their memory figures are the process's.
static MEMORY_HEAVY: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Resident memory of this process now, in KiB.
fn vm_rss_kib() -> u64 {
    status_kib("VmRSS:")
}

/// Resets the kernel's record of this process's peak resident memory (`VmHWM`) to what it
/// holds now (`/proc/self/clear_refs`, 5), so that a later [`vm_hwm_kib`] is the peak since:
/// every moment counted, none sampled.
fn reset_peak() {
    std::fs::write("/proc/self/clear_refs", "5").expect("resetting VmHWM");
}

/// Eight memory bombs at once, each allowed 64 MiB, against a host budget of 128 MiB:
/// the guest memories together never pass the budget (the host's own count of its peak,
/// and the kernel's of the process's peak resident memory, stay under it), every bomb fails as out of
/// memory, and everything is given back. Without the budget the eight take 512 MiB.
#[test]
fn eight_bombs_stay_within_the_host_budget() {
    let _one_at_a_time = MEMORY_HEAVY.lock().unwrap_or_else(|e| e.into_inner());
    const BUDGET: usize = 128 << 20;
    let sandbox = Sandbox::with_guest_memory(8, BUDGET).unwrap();
    let limits = Limits {
        deadline: Duration::from_secs(10),
        ..Limits::default()
    };
    let bomb = Arc::new(hostile(&sandbox, limits));
    reset_peak();
    let before_kib = vm_rss_kib();
    let bombs: Vec<_> = (0..8)
        .map(|_| {
            let (sandbox, bomb) = (sandbox.clone(), bomb.clone());
            std::thread::spawn(move || call(&sandbox, &bomb, "bomb").unwrap_err())
        })
        .collect();
    let errors: Vec<CallError> = bombs.into_iter().map(|t| t.join().unwrap()).collect();
    let most_kib = vm_hwm_kib();
    let memory = sandbox.engine().guest_memory();
    let grown_mib = most_kib.saturating_sub(before_kib) / 1024;
    println!(
        "8 bombs: guest memory peaked at {} MiB of a {} MiB budget; process RSS grew by {grown_mib} MiB; {errors:?}",
        memory.peak() >> 20,
        BUDGET >> 20
    );
    for e in &errors {
        assert!(
            matches!(e, CallError::OutOfMemory(_) | CallError::HostMemory(_)),
            "{e:?}"
        );
    }
    assert!(
        errors.iter().any(|e| matches!(e, CallError::HostMemory(_))),
        "no bomb met the host's budget: {errors:?}"
    );
    assert!(memory.peak() <= BUDGET, "{} bytes at once", memory.peak());
    assert!(
        memory.peak() >= BUDGET / 2,
        "the bombs took only {} bytes",
        memory.peak()
    );
    assert_eq!(memory.in_use(), 0, "guest memory not given back");
    // The budget and some slack for the pooled memories kept resident between calls.
    assert!(
        grown_mib < (BUDGET >> 20) as u64 + 96,
        "the process grew by {grown_mib} MiB with a guest budget of {} MiB",
        BUDGET >> 20
    );
}

/// A guest that keeps asking for pollables (each one a host allocation) is stopped by the
/// bound on its resource table, not by the host's memory.
#[test]
fn a_flood_of_pollables_hits_the_resource_bound() {
    let sandbox = Sandbox::new(1).unwrap();
    let plugin = hostile(&sandbox, short_limits());
    let err = call(&sandbox, &plugin, "pollables").unwrap_err();
    assert!(matches!(err, CallError::Trap(_)), "{err:?}");
    println!("pollable flood: {err}");
}

/// Compiled components are kept for versions that loaded only, and no more than
/// `COMPILED_KEPT` of them: nine versions offered one after another leave eight, and a
/// refused one (it traps in info()) is not kept at all.
#[test]
fn compiled_components_are_bounded_and_refused_ones_not_kept() {
    let sandbox = Sandbox::new(1).unwrap();
    let refused = sandbox.load(
        &support::plugin_bytes("wasmop_hostile_trap_info.wasm"),
        Limits::default(),
    );
    assert!(refused.is_err(), "a plugin trapping in info() loaded");
    assert_eq!(sandbox.compiled_kept(), 0, "a refused version was kept");
    let versions = [
        "podreplica.wasm",
        "podreplica_v2.wasm",
        "podreplica_v3.wasm",
        "podreplica_renamed.wasm",
        "podreplica_broken.wasm",
        "chaospod.wasm",
        "wasmop_hostile.wasm",
        "wasmop_hostile_more.wasm",
        "wasmop_hostile_unwatchable.wasm",
    ];
    for (i, file) in versions.iter().enumerate() {
        sandbox
            .load(&support::plugin_bytes(file), Limits::default())
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(
            sandbox.compiled_kept(),
            (i + 1).min(COMPILED_KEPT),
            "after {file}"
        );
    }
}

/// A shelf written by `wasmop compile` (the image's bundled plugins, compiled ahead of time)
/// is read instead of compiling, by a sandbox whose other settings differ from the one that
/// wrote it (the engine's fingerprint covers what the code depends on, not the call
/// budget); a shelf file the engine refuses is passed over, compiled, and left as it was.
#[test]
fn a_shelf_of_compiled_plugins_is_read_instead_of_compiling() {
    let shelf = support::Scratch::new("shelf");
    let plugins: Vec<std::path::PathBuf> = ["podreplica.wasm", "chaospod.wasm"]
        .iter()
        .map(|f| support::plugin_dir().join(f))
        .collect();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .arg("compile")
        .args(&plugins)
        .arg("--out")
        .arg(&shelf.0)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "wasmop compile: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shelved: Vec<std::path::PathBuf> = std::fs::read_dir(&shelf.0)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(
        shelved.len(),
        2,
        "one compiled file per plugin: {shelved:?}"
    );

    let sandbox = Sandbox::with_guest_memory(8, 128 << 20)
        .unwrap()
        .with_shelf(&shelf.0);
    for p in &plugins {
        let started = Instant::now();
        sandbox
            .load(&std::fs::read(p).unwrap(), Limits::default())
            .unwrap();
        println!(
            "{}: loaded from the shelf in {:?}",
            p.display(),
            started.elapsed()
        );
    }
    assert_eq!(
        sandbox.engine().functions().hits_and_misses(),
        (0, 0),
        "a function was compiled although the shelf held both plugins"
    );

    // A damaged shelf file: compiled instead, the file left as it was.
    let damaged = shelved
        .iter()
        .find(|p| {
            let digest = wasmop::runtime::digest_of(&std::fs::read(&plugins[0]).unwrap());
            p.to_string_lossy()
                .contains(digest.trim_start_matches("sha256:"))
        })
        .expect("podreplica's file on the shelf");
    std::fs::write(damaged, b"not a compiled component").unwrap();
    let fresh = Sandbox::new(1).unwrap().with_shelf(&shelf.0);
    fresh
        .load(&std::fs::read(&plugins[0]).unwrap(), Limits::default())
        .expect("compiled when its shelf file is refused");
    let (_, compiled) = fresh.engine().functions().hits_and_misses();
    assert!(compiled > 0, "nothing compiled for a refused shelf file");
    assert_eq!(std::fs::read(damaged).unwrap(), b"not a compiled component");
}

/// A candidate spinning in shadow takes none of the active decisions' slots: with one slot
/// for calls, an active decision made while a candidate spins to its 1.5 s deadline
/// answers at once; a second candidate waits for the first (the candidates' share is one).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn spinning_candidates_leave_the_active_calls_their_slots() {
    let sandbox = Sandbox::new(1).unwrap();
    let spin = Arc::new(hostile(
        &sandbox,
        Limits {
            deadline: Duration::from_millis(1500),
            ..short_limits()
        },
    ));
    let good = Arc::new(hostile(&sandbox, Limits::default()));
    let started = Instant::now();
    let candidates: Vec<_> = (0..2)
        .map(|_| {
            let (sandbox, spin) = (sandbox.clone(), spin.clone());
            tokio::spawn(async move {
                let r = sandbox
                    .decide_candidate(spin, Entry::Reconcile, observed("spin"), "spin".into())
                    .await;
                (r, started.elapsed())
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let asked = Instant::now();
    let active = sandbox
        .decide(good, Entry::Reconcile, observed("ok"), "ok".into())
        .await
        .unwrap()
        .unwrap();
    let answered = asked.elapsed();
    assert_eq!(
        active.status,
        Some(json!({"mode": "ok", "version": "0.1.0"}))
    );
    assert!(
        answered < Duration::from_millis(700),
        "the active decision waited {answered:?} behind spinning candidates"
    );
    let mut ended = Vec::new();
    for c in candidates {
        let (r, at) = c.await.unwrap();
        assert_eq!(
            r.unwrap_err(),
            CallError::Timeout(Duration::from_millis(1500))
        );
        ended.push(at);
    }
    ended.sort();
    assert!(
        ended[1] >= Duration::from_millis(3000),
        "two candidates ran at once in a share of one: ended at {ended:?}"
    );
    println!("active decision answered in {answered:?} while candidates spun (ended at {ended:?})");
}

#[test]
fn memory_bomb_hits_the_cap() {
    let sandbox = Sandbox::new(2).unwrap();
    let plugin = hostile(&sandbox, short_limits());
    assert_eq!(
        call(&sandbox, &plugin, "bomb").unwrap_err(),
        CallError::OutOfMemory(32 << 20)
    );
}

#[test]
fn panic_is_a_trap_with_the_guest_message() {
    let sandbox = Sandbox::new(2).unwrap();
    let plugin = hostile(&sandbox, Limits::default());
    match call(&sandbox, &plugin, "panic").unwrap_err() {
        CallError::Trap(m) => assert!(m.contains("hostile plugin panicked on purpose"), "{m}"),
        other => panic!("expected a trap, got {other:?}"),
    }
}

#[test]
fn malformed_json_is_invalid_output() {
    let sandbox = Sandbox::new(2).unwrap();
    let plugin = hostile(&sandbox, Limits::default());
    match call(&sandbox, &plugin, "badjson").unwrap_err() {
        CallError::InvalidOutput(m) => assert!(m.contains("not JSON"), "{m}"),
        other => panic!("expected invalid output, got {other:?}"),
    }
}

fn vm_hwm_kib() -> u64 {
    status_kib("VmHWM:")
}

/// A figure of this process's `/proc/self/status`, in KiB (`field` with its colon).
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

#[test]
fn a_million_actions_are_refused_and_host_memory_stays_bounded() {
    let _one_at_a_time = MEMORY_HEAVY.lock().unwrap_or_else(|e| e.into_inner());
    let sandbox = Sandbox::new(2).unwrap();
    // With room to build the plan, the host refuses it before copying it.
    let roomy = Limits {
        memory_bytes: 512 << 20,
        deadline: Duration::from_secs(10),
        ..Limits::default()
    };
    let plugin = hostile(&sandbox, roomy);
    match call(&sandbox, &plugin, "huge").unwrap_err() {
        CallError::InvalidOutput(m) => assert!(m.contains("1000 actions"), "{m}"),
        other => panic!("expected invalid output, got {other:?}"),
    }
    // Under the default 64 MiB cap the guest cannot even build it.
    let plugin = hostile(&sandbox, Limits::default());
    let err = call(&sandbox, &plugin, "huge").unwrap_err();
    assert!(
        matches!(err, CallError::OutOfMemory(_) | CallError::InvalidOutput(_)),
        "{err:?}"
    );
    let peak_mib = vm_hwm_kib() / 1024;
    println!("peak RSS of the test process after the huge plans: {peak_mib} MiB");
    assert!(peak_mib < 2048, "host memory peaked at {peak_mib} MiB");
}

#[test]
fn guest_errors_are_answers_not_faults() {
    let sandbox = Sandbox::new(1).unwrap();
    let plugin = hostile(&sandbox, Limits::default());
    let r = sandbox
        .decide_blocking(&plugin, Entry::Reconcile, &observed("invalid"), "x")
        .unwrap();
    assert!(matches!(
        r,
        Err(wasmop::runtime::ReconcileError::InvalidSpec(_))
    ));
}

#[test]
fn healthy_calls_keep_answering_while_hostile_ones_run() {
    let sandbox = Sandbox::new(4).unwrap();
    let bad = Arc::new(hostile(
        &sandbox,
        Limits {
            deadline: Duration::from_millis(1500),
            ..short_limits()
        },
    ));
    let good = hostile(&sandbox, Limits::default());
    let done = Arc::new(AtomicBool::new(false));
    let faults = Arc::new(AtomicUsize::new(0));
    let hostile_threads: Vec<_> = ["spin", "bomb", "spin"]
        .into_iter()
        .map(|mode| {
            let (sandbox, bad, faults) = (sandbox.clone(), bad.clone(), faults.clone());
            std::thread::spawn(move || {
                if call(&sandbox, &bad, mode).is_err() {
                    faults.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    let mut healthy = 0;
    let started = Instant::now();
    let mut first_answer = None;
    let watcher = {
        let done = done.clone();
        std::thread::spawn(move || {
            for t in hostile_threads {
                t.join().unwrap();
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    while !done.load(Ordering::SeqCst) {
        let r = sandbox
            .decide_blocking(&good, Entry::Reconcile, &observed("ok"), "ok")
            .unwrap()
            .unwrap();
        assert_eq!(r.status, Some(json!({"mode": "ok", "version": "0.1.0"})));
        first_answer.get_or_insert(started.elapsed());
        healthy += 1;
    }
    let hostile_ended = started.elapsed();
    watcher.join().unwrap();
    assert_eq!(faults.load(Ordering::SeqCst), 3);
    // Answered while the spinning calls ran (they last their 1.5 s deadline), not after.
    let first = first_answer.expect("no healthy call completed");
    assert!(
        first < Duration::from_millis(700) && hostile_ended >= Duration::from_millis(1500),
        "the first healthy answer came {first:?} after the start, the hostile calls ended at {hostile_ended:?}"
    );
    println!("{healthy} healthy calls completed while 3 hostile calls ran");
}

#[test]
fn many_faults_leak_no_instance_slots() {
    let sandbox = Sandbox::new(1).unwrap();
    let plugin = hostile(&sandbox, short_limits());
    for _ in 0..100 {
        assert!(matches!(
            call(&sandbox, &plugin, "panic"),
            Err(CallError::Trap(_))
        ));
    }
    call(&sandbox, &plugin, "ok").unwrap();
}

#[test]
fn a_plugin_importing_sockets_loads_and_its_connect_traps_naming_the_call() {
    let sandbox = Sandbox::new(1).unwrap();
    let plugin = hostile(&sandbox, Limits::default());
    let err = call(&sandbox, &plugin, "connect").unwrap_err();
    let CallError::Trap(message) = &err else {
        panic!("expected a trap, got {err}");
    };
    assert!(message.contains("wasi:sockets/"), "{message}");
    assert!(message.contains("plugins have no network"), "{message}");
    // The instance is gone with its call; the next call is a fresh one.
    call(&sandbox, &plugin, "ok").unwrap();
}

#[test]
fn components_that_do_not_fit_the_world_are_refused_with_names() {
    let sandbox = Sandbox::new(1).unwrap();
    let evil = wat::parse_str(
        r#"(component (import "evil:net/socket@1.0.0" (instance (export "connect" (func)))))"#,
    )
    .unwrap();
    let err = sandbox.load(&evil, Limits::default()).unwrap_err();
    assert!(matches!(err, LoadError::World(_)), "{err}");
    assert!(err.to_string().contains("evil:net/socket"), "{err}");

    // `wasi:sockets` is stubbed (language runtimes import it); anything else beside it is
    // still refused by name.
    let evil_beside_sockets = wat::parse_str(
        r#"(component
            (import "wasi:sockets/network@0.2.0" (instance (export "network" (type (sub resource)))))
            (import "evil:net/socket@1.0.0" (instance (export "connect" (func)))))"#,
    )
    .unwrap();
    let err = sandbox
        .load(&evil_beside_sockets, Limits::default())
        .unwrap_err();
    assert!(matches!(err, LoadError::World(_)), "{err}");
    assert!(err.to_string().contains("evil:net/socket"), "{err}");

    let other_world = wat::parse_str(
        r#"(component
            (core module $m (func (export "f")))
            (core instance $i (instantiate $m))
            (func $f (canon lift (core func $i "f")))
            (export "run" (func $f)))"#,
    )
    .unwrap();
    let err = sandbox.load(&other_world, Limits::default()).unwrap_err();
    assert!(matches!(err, LoadError::World(_)), "{err}");
    let msg = err.to_string();
    assert!(
        ["info", "reconcile", "cleanup"]
            .iter()
            .any(|e| msg.contains(&format!("no export `{e}`"))),
        "{msg}"
    );

    let core = wat::parse_str("(module)").unwrap();
    assert!(matches!(
        sandbox.load(&core, Limits::default()),
        Err(LoadError::CoreModule)
    ));
    assert!(matches!(
        sandbox.load(b"garbage!", Limits::default()),
        Err(LoadError::NotWasm)
    ));
}

/// A shadow candidate draws on the candidates' own part of the guest-memory budget: a
/// candidate bomb runs into that part (`host_memory` at its limit) and takes nothing from
/// the active versions' part, so no active decision can fail for a candidate's memory.
#[test]
fn a_candidates_memory_never_comes_out_of_the_active_versions_budget() {
    let _one_at_a_time = MEMORY_HEAVY.lock().unwrap_or_else(|e| e.into_inner());
    let rt = tokio::runtime::Runtime::new().unwrap();
    const BUDGET: usize = 96 << 20;
    let sandbox = Sandbox::with_guest_memory(4, BUDGET).unwrap();
    let (active, candidates) = (
        sandbox.engine().guest_memory().clone(),
        sandbox.engine().candidate_memory().clone(),
    );
    assert_eq!(active.limit() + candidates.limit(), BUDGET);
    assert_eq!(candidates.limit(), BUDGET / 4);
    let limits = Limits {
        deadline: Duration::from_secs(10),
        ..Limits::default()
    };
    let bomb = Arc::new(hostile(&sandbox, limits));
    let active_peak = active.peak();
    let err = rt
        .block_on(sandbox.decide_candidate(
            bomb.clone(),
            Entry::Reconcile,
            observed("bomb"),
            "bomb".into(),
        ))
        .unwrap_err();
    assert_eq!(err, CallError::HostMemory(BUDGET / 4), "{err:?}");
    assert!(
        candidates.peak() > BUDGET / 4 - (2 << 20),
        "the candidate bomb took {} bytes",
        candidates.peak()
    );
    assert_eq!(
        active.peak(),
        active_peak,
        "the candidate took active memory"
    );
    // The active version's bomb meets its own cap (64 MiB), within the active part.
    let err = rt
        .block_on(sandbox.decide(bomb, Entry::Reconcile, observed("bomb"), "bomb".into()))
        .unwrap_err();
    assert_eq!(err, CallError::OutOfMemory(64 << 20), "{err:?}");
    assert_eq!((active.in_use(), candidates.in_use()), (0, 0));
}
