//! The table and the JSON file of a run.

use std::collections::BTreeMap;

use serde_json::json;

use crate::control::{COMPONENTS, total};
use crate::cost::Look;
use crate::latency::quantile;

/// One convergence phase.
pub struct Phase {
    /// The size every PodReplica was given.
    pub size: usize,
    /// Seconds to converge.
    pub secs: f64,
    /// Host CPU and requests during the phase.
    pub spent: Look,
    /// CPU seconds of each control-plane process during the phase.
    pub control: BTreeMap<String, f64>,
    /// Host peak RSS after the phase, MiB.
    pub peak_mib: f64,
    /// The most live pods any PodReplica had during the phase.
    pub most: usize,
}

/// One size.
pub struct Row {
    /// PodReplicas.
    pub objects: usize,
    /// Seconds the bare client needed for `objects × 3` pods.
    pub floor_s: f64,
    /// CPU seconds of each control-plane process during the floor.
    pub floor_control: BTreeMap<String, f64>,
    /// Seconds the operator floor needed to converge every PodReplica at 3: the least any
    /// operator must send, sent by a bare client ([`crate::operator_floor`]).
    pub op_floor_s: f64,
    /// CPU seconds of each control-plane process during the operator floor.
    pub op_floor_control: BTreeMap<String, f64>,
    /// Seconds a bare client needed to rewrite every PodReplica's status once, no operator
    /// running: the least a swap to a version that changes every status waits for.
    pub rewrite_s: f64,
    /// Size 3, then 5, then 2.
    pub phases: Vec<Phase>,
    /// Host RSS at rest with everything cached, MiB.
    pub rest_mib: f64,
    /// Delete sent → replacement seen by the benchmark's watch, ms, sorted.
    pub latency_ms: Vec<f64>,
    /// Delete received → the host's create received, by the API server's audit log:
    /// event → action.
    pub action: crate::audit::EventToAction,
    /// The same reactions inside the host: its `wasmop_event_to_action_seconds` histogram
    /// over the samples (a pod's change reaching its cache → the replacement's create).
    pub host_action: crate::reaction::Reactions,
    /// The hot swap.
    pub swap: crate::swap::Swap,
    /// The cost of a shadow candidate.
    pub shadow: crate::shadow::ShadowCost,
    /// The same objects converged by sharded replicas (the largest size only).
    pub sharded: Vec<crate::replicas::Sharded>,
}

fn requests(l: &Look) -> String {
    l.requests
        .iter()
        .map(|(v, n)| format!("{v} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Prints the table.
pub fn print(rows: &[Row]) {
    println!();
    println!(
        "| objects | floor s | phase | s | × floor | × operator floor | host CPU s | peak MiB | requests |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        println!(
            "| {} | {:.1} | operator floor, size 3 | {:.1} | {:.2} | 1.00 | - | - | - |",
            r.objects,
            r.floor_s,
            r.op_floor_s,
            r.op_floor_s / r.floor_s
        );
        for p in &r.phases {
            println!(
                "| {} | {:.1} | size {} | {:.1} | {:.2} | {} | {:.1} | {:.0} | {} |",
                r.objects,
                r.floor_s,
                p.size,
                p.secs,
                p.secs / r.floor_s,
                op_floor_ratio(r, p).map_or("-".to_string(), |x| format!("{x:.2}")),
                p.spent.cpu_s,
                p.peak_mib,
                requests(&p.spent)
            );
        }
    }
    print_control(rows);
    if rows.iter().all(|r| r.latency_ms.is_empty()) {
        // `--converge-only`: nothing measured after memory at rest.
        for r in rows {
            println!("\n{} objects: RSS at rest {:.0} MiB", r.objects, r.rest_mib);
        }
        return;
    }
    println!();
    println!(
        "| objects | RSS at rest MiB | event → action p50 / p99 ms (the API server's delete; after it) | in the host p50 / p99 ms at most | delete → replacement seen p50 / p99 ms | push → verdict s | verdict → all on v2 s (p99 per object) | a pass writing nothing s | × that pass | every status rewritten by a bare client s | × that |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        println!(
            "| {} | {:.0} | {:.1} / {:.1} ({:.1} / {:.1}; {:.1} / {:.1}) | {:.0} / {:.0} | {:.0} / {:.0} | {:.2} | {:.1} ({:.1}) | {:.2} | {} | {:.2} | {} |",
            r.objects,
            r.rest_mib,
            quantile(&r.action.total_ms, 0.5),
            quantile(&r.action.total_ms, 0.99),
            quantile(&r.action.delete_ms, 0.5),
            quantile(&r.action.delete_ms, 0.99),
            quantile(&r.action.after_delete_ms, 0.5),
            quantile(&r.action.after_delete_ms, 0.99),
            r.host_action.at_most_ms(0.5),
            r.host_action.at_most_ms(0.99),
            quantile(&r.latency_ms, 0.5),
            quantile(&r.latency_ms, 0.99),
            r.swap.push_s,
            r.swap.all_s,
            r.swap.p99_s,
            r.swap.pass_s,
            // No swap in the smoke run: nothing to divide.
            ratio(r.swap.all_s, r.swap.pass_s),
            r.rewrite_s,
            ratio(r.swap.all_s, r.rewrite_s),
        );
    }
    if rows.iter().any(|r| r.shadow.plain_s > 0.0) {
        print_shadow(rows);
    }
    if rows.iter().any(|r| !r.sharded.is_empty()) {
        print_sharded(rows);
    }
}

/// `a / b` with one decimal; `-` without a `b` (no swap in the smoke run).
fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 && a > 0.0 {
        format!("{:.1}", a / b)
    } else {
        "-".to_string()
    }
}

/// The phase at size 3 against the operator floor (the same end state).
fn op_floor_ratio(r: &Row, p: &Phase) -> Option<f64> {
    (p.size == 3 && r.op_floor_s > 0.0).then(|| p.secs / r.op_floor_s)
}

/// The control plane's CPU seconds in the floor and in each phase, by process, and the
/// whole control plane's against the floor's: how much more work the API server and the
/// rest were given, beside the host's own CPU.
fn print_control(rows: &[Row]) {
    println!();
    println!(
        "| objects | work | {} | all | × floor's | host | all + host, % of the cores |",
        COMPONENTS.join(" | ")
    );
    println!(
        "|---|---|{}---|---|---|---|",
        "---|".repeat(COMPONENTS.len())
    );
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    for r in rows {
        let floor_all = total(&r.floor_control);
        let line = |work: String, spent: &BTreeMap<String, f64>, host: f64, secs: f64| {
            let each: Vec<String> = COMPONENTS
                .iter()
                .map(|c| format!("{:.1}", spent.get(*c).copied().unwrap_or(0.0)))
                .collect();
            let all = total(spent);
            println!(
                "| {} | {work} | {} | {all:.1} | {:.2} | {host:.1} | {:.0} |",
                r.objects,
                each.join(" | "),
                all / floor_all,
                (all + host) / (secs * cores) * 100.0
            );
        };
        line("floor".into(), &r.floor_control, 0.0, r.floor_s);
        line(
            "operator floor, size 3".into(),
            &r.op_floor_control,
            0.0,
            r.op_floor_s,
        );
        for p in &r.phases {
            line(
                format!("size {}", p.size),
                &p.control,
                p.spent.cpu_s,
                p.secs,
            );
        }
    }
}

fn print_sharded(rows: &[Row]) {
    println!();
    println!(
        "| objects | sharded replicas | converge at 3 s | primaries per replica | RSS at rest per replica MiB |"
    );
    println!("|---|---|---|---|---|");
    for r in rows {
        for s in &r.sharded {
            let held: Vec<String> = s.each.iter().map(|(n, _)| n.to_string()).collect();
            let rss: Vec<String> = s.each.iter().map(|(_, m)| format!("{m:.0}")).collect();
            println!(
                "| {} | {} | {:.1} | {} | {} |",
                r.objects,
                s.replicas,
                s.secs,
                held.join(" / "),
                rss.join(" / ")
            );
        }
    }
}

fn print_shadow(rows: &[Row]) {
    println!();
    println!(
        "| objects | rescale 2 → 3 s | with a shadow candidate s | × | host CPU s without / with | shadow decisions (skipped) |"
    );
    println!("|---|---|---|---|---|---|");
    for r in rows {
        let s = &r.shadow;
        println!(
            "| {} | {:.1} | {:.1} | {:.2} | {:.1} / {:.1} | {} ({}) |",
            r.objects,
            s.plain_s,
            s.shadow_s,
            s.shadow_s / s.plain_s,
            s.plain_cpu_s,
            s.shadow_cpu_s,
            s.decisions,
            s.skipped
        );
    }
}

/// Writes the run as JSON under `~/.cache/wasmop/bench/` (with date, commit and machine).
pub fn write_json(rows: &[Row]) {
    let doc = json!({
        "rows": rows.iter().map(|r| json!({
            "objects": r.objects, "floor_s": r.floor_s, "rest_mib": r.rest_mib,
            "floor_control_plane_cpu_s": r.floor_control,
            "operator_floor_s": r.op_floor_s, "operator_floor_control_plane_cpu_s": r.op_floor_control,
            "latency_ms": {"p50": quantile(&r.latency_ms, 0.5), "p99": quantile(&r.latency_ms, 0.99), "samples": r.latency_ms.len()},
            "event_to_action_ms": {"p50": quantile(&r.action.total_ms, 0.5), "p99": quantile(&r.action.total_ms, 0.99), "samples": r.action.total_ms.len(),
                "apiserver_delete_p50": quantile(&r.action.delete_ms, 0.5), "apiserver_delete_p99": quantile(&r.action.delete_ms, 0.99),
                "after_delete_p50": quantile(&r.action.after_delete_ms, 0.5), "after_delete_p99": quantile(&r.action.after_delete_ms, 0.99),
                "in_host_p50_at_most": r.host_action.at_most_ms(0.5), "in_host_p99_at_most": r.host_action.at_most_ms(0.99),
                "in_host_samples": r.host_action.count()},
            "swap": {"push_to_verdict_s": r.swap.push_s, "verdict_to_all_s": r.swap.all_s,
                "p99_per_object_s": r.swap.p99_s, "pass_without_writes_s": r.swap.pass_s,
                "statuses_rewritten_by_a_bare_client_s": r.rewrite_s},
            "shadow": {"rescale_s": r.shadow.plain_s, "rescale_cpu_s": r.shadow.plain_cpu_s,
                "with_shadow_s": r.shadow.shadow_s, "with_shadow_cpu_s": r.shadow.shadow_cpu_s,
                "shadow_decisions": r.shadow.decisions, "skipped": r.shadow.skipped},
            "sharded": r.sharded.iter().map(|s| json!({
                "replicas": s.replicas, "converge_s": s.secs,
                "primaries": s.each.iter().map(|e| e.0).collect::<Vec<_>>(),
                "rest_mib": s.each.iter().map(|e| e.1).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "phases": r.phases.iter().map(|p| json!({
                "size": p.size, "secs": p.secs, "ratio_to_floor": p.secs / r.floor_s,
                "ratio_to_operator_floor": op_floor_ratio(r, p), "host_cpu_s": p.spent.cpu_s,
                "peak_mib": p.peak_mib, "most_pods": p.most, "requests": p.spent.requests,
                "control_plane_cpu_s": p.control,
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    });
    write_named_json("scale", &doc);
}

/// Writes `doc` with the date, commit and machine as `~/.cache/wasmop/bench/NAME-DATE.json`
/// (`WASMOP_CACHE` instead of `~/.cache/wasmop`) and says where.
pub fn write_named_json(name: &str, doc: &serde_json::Value) {
    let cmd = |c: &str, args: &[&str]| {
        std::process::Command::new(c)
            .args(args)
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    };
    let cpu = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpu
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .unwrap_or("?")
        .trim()
        .to_string();
    let date = cmd("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]);
    let doc = json!({
        "date": date,
        "commit": cmd("git", &["rev-parse", "--short", "HEAD"]),
        "machine": {"cpus": std::thread::available_parallelism().map_or(0, |n| n.get()), "model": model},
        "data": doc,
    });
    let dir = std::env::var("WASMOP_CACHE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| {
            std::path::PathBuf::from(std::env::var("HOME").unwrap_or_default())
                .join(".cache/wasmop")
        })
        .join("bench");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}-{}.json", date.replace(':', "")));
    std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    println!("\nwritten: {}", path.display());
}
