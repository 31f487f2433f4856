//! Event → action from the API server's own audit log (`logs/audit.log` of the local control
//! plane, every write at Metadata level): when the benchmark's delete of a pod reached the
//! API server, and when the host's create of its replacement did. Both timestamps are the
//! API server's (`requestReceivedTimestamp`, microseconds), so the difference is the host's
//! reaction as the cluster sees it: the delete's own processing, the watch event reaching the
//! host, the decision and the create going out, and nothing of the create's processing or of
//! the benchmark's watch.

use std::path::Path;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use serde_json::Value;

/// One write on a pod in namespace `default` (not on a subresource).
#[derive(Debug, Clone)]
struct PodWrite {
    verb: String,
    /// Empty for a create with `generateName` (the audit log does not name it).
    name: String,
    at: Timestamp,
    /// When the API server had answered it (`stageTimestamp`).
    done: Timestamp,
    /// Who sent it (`userAgent`).
    agent: String,
}

/// The user agent of the host's requests (kube's client as the host sets it up).
const HOST_AGENT: &str = "wasmop/";

/// Every write on a pod of namespace `default`, oldest first, from the audit log and its
/// rotated backups in `state/logs`.
fn pod_writes(state: &Path) -> Vec<PodWrite> {
    let mut out = Vec::new();
    for file in files(state) {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for line in text.lines().filter(|l| l.contains(r#""resource":"pods""#)) {
            let Ok(e) = serde_json::from_str::<Value>(line) else {
                continue; // the line being written
            };
            let obj = &e["objectRef"];
            if obj["namespace"] != "default" || obj.get("subresource").is_some() {
                continue;
            }
            let time = |key: &str| e[key].as_str().and_then(|t| t.parse().ok());
            let (at, done) = (time("requestReceivedTimestamp"), time("stageTimestamp"));
            if let (Some(verb), Some(at), Some(done)) = (e["verb"].as_str(), at, done) {
                out.push(PodWrite {
                    verb: verb.to_string(),
                    name: obj["name"].as_str().unwrap_or_default().to_string(),
                    at,
                    done,
                    agent: e["userAgent"].as_str().unwrap_or_default().to_string(),
                });
            }
        }
    }
    out.sort_by_key(|w| w.at);
    out
}

/// The audit log of the control plane in `state` and its rotated backups (`state/logs`).
pub fn files(state: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(state.join("logs"))
        .map(|d| d.flatten().map(|e| e.path()).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("audit") && n.ends_with(".log"))
        })
        .collect()
}

/// Event → action samples, each sorted.
#[derive(Debug, Default)]
pub struct EventToAction {
    /// Delete received → the replacement's create received, ms.
    pub total_ms: Vec<f64>,
    /// Of that, the API server's own time on the delete (received → answered), ms.
    pub delete_ms: Vec<f64>,
    /// The rest: delete answered → the create received, ms (the watch event reaching the
    /// host, its decision, the create going out; the watch may deliver before the answer).
    pub after_delete_ms: Vec<f64>,
}

/// For each deleted pod in `victims` (deleted one after another, each only once the previous
/// replacement was there): milliseconds from its delete reaching the API server to the
/// host's create of its replacement reaching it (the next pod create sent by the host).
/// Waits up to a minute for the audit log to hold the last replacement (it is written in
/// batches); panics if a sample cannot be found, so no sample is silently dropped, and if a
/// victim was replaced by more than one create of the host before the next victim's delete.
pub async fn delete_to_create_ms(state: &Path, victims: &[String]) -> EventToAction {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let writes = pod_writes(state);
        match match_samples(&writes, victims) {
            Ok(samples) => {
                let sorted = |f: fn(&(f64, f64)) -> f64| {
                    let mut v: Vec<f64> = samples.iter().map(f).collect();
                    v.sort_by(f64::total_cmp);
                    v
                };
                return EventToAction {
                    total_ms: sorted(|s| s.0),
                    delete_ms: sorted(|s| s.1),
                    after_delete_ms: sorted(|s| s.0 - s.1),
                };
            }
            Err(Unmatched::Twice(what)) => panic!("{what}"),
            Err(Unmatched::Missing(missing)) if Instant::now() > deadline => {
                panic!("the audit log has no {missing} after a minute")
            }
            Err(Unmatched::Missing(_)) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

fn ms(from: Timestamp, to: Timestamp) -> f64 {
    to.duration_since(from).as_secs_f64() * 1000.0
}

/// Why the samples could not be matched.
#[derive(Debug, PartialEq)]
enum Unmatched {
    /// Not in the log (yet).
    Missing(String),
    /// A victim replaced by more than one create of the host.
    Twice(String),
}

/// (delete → create, delete received → answered) per victim, in ms.
fn match_samples(writes: &[PodWrite], victims: &[String]) -> Result<Vec<(f64, f64)>, Unmatched> {
    let delete_of = |from: usize, victim: &str| {
        writes[from..]
            .iter()
            .position(|w| w.verb == "delete" && w.name == victim)
            .map(|i| from + i)
    };
    let host_create = |w: &PodWrite| w.verb == "create" && w.agent.starts_with(HOST_AGENT);
    let mut out = Vec::with_capacity(victims.len());
    let mut from = 0;
    for (i, victim) in victims.iter().enumerate() {
        let del = delete_of(from, victim)
            .ok_or_else(|| Unmatched::Missing(format!("delete of {victim}")))?;
        let create = writes[del..]
            .iter()
            .position(host_create)
            .map(|i| del + i)
            .ok_or_else(|| {
                Unmatched::Missing(format!("create by the host after the delete of {victim}"))
            })?;
        // One create per victim: none more before the next victim's delete.
        if let Some(next) = victims.get(i + 1).and_then(|n| delete_of(create, n)) {
            let creates = writes[del..next].iter().filter(|w| host_create(w)).count();
            if creates != 1 {
                return Err(Unmatched::Twice(format!(
                    "{victim} was replaced by {creates} creates of the host"
                )));
            }
        }
        let (d, c) = (&writes[del], &writes[create]);
        out.push((ms(d.at, c.at), ms(d.at, d.done)));
        from = create;
    }
    Ok(out)
}
