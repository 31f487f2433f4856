//! The cost of a shadow candidate: the same rescale of every PodReplica (2 → 3) without and
//! then with a candidate deciding beside the active version on every reconcile (PodReplica
//! v1 beside v2: every comparison diverges, so each one also renders a diff).

use std::time::Duration;

use kube::Client;

use crate::converge::apply_and_converge;
use crate::cost::{self, Look};
use crate::support::uploads::push_with;
use crate::support::{Cluster, Host, eventually};
use crate::swap::quiet;
use crate::tracker::Tracker;

/// The rescale without and with a shadow candidate.
#[derive(Debug, Clone, Default)]
pub struct ShadowCost {
    /// Rescale 2 → 3 without a candidate, seconds.
    pub plain_s: f64,
    /// Host CPU seconds of that rescale.
    pub plain_cpu_s: f64,
    /// The same rescale with the shadow candidate, seconds.
    pub shadow_s: f64,
    /// Host CPU seconds of that rescale.
    pub shadow_cpu_s: f64,
    /// Shadow decisions made during it (compared with the active version's).
    pub decisions: u64,
    /// Shadow decisions dropped because too many were running.
    pub skipped: u64,
}

/// The host's count of candidate decisions with this `result`.
fn rollout_count(host: &Host, result: &str) -> u64 {
    let (_, text) = host.http_get("/metrics").unwrap_or_default();
    text.lines()
        .filter(|l| {
            l.starts_with("wasmop_rollout_decisions_total{")
                && l.contains(&format!("result=\"{result}\""))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

fn compared(host: &Host) -> u64 {
    ["agree", "diverge", "fault"]
        .iter()
        .map(|r| rollout_count(host, r))
        .sum()
}

async fn rescale(client: &Client, tracker: &Tracker, host: &Host, names: &[String]) -> (f64, f64) {
    tracker.take_most();
    let before: Look = cost::look(host);
    let secs = apply_and_converge(client, tracker, names, 3).await;
    let spent = cost::between(&before, &cost::look(host));
    let most = tracker.take_most();
    assert!(
        most <= 3,
        "a PodReplica had {most} live pods while asked for 3"
    );
    (secs, spent.cpu_s)
}

/// Measures [`ShadowCost`]; every PodReplica of `names` is at size 2 when it starts.
pub async fn shadow_cost(
    cluster: &Cluster,
    host: &Host,
    client: &Client,
    tracker: &Tracker,
    names: &[String],
) -> ShadowCost {
    quiet(client).await;
    let (plain_s, plain_cpu_s) = rescale(client, tracker, host, names).await;
    println!("shadow: rescale 2 → 3 without a candidate in {plain_s:.1} s");
    apply_and_converge(client, tracker, names, 2).await;
    quiet(client).await;
    let (ok, out) = push_with(cluster, "podreplica", "podreplica.wasm", &["--shadow"]);
    assert!(ok, "push --shadow failed: {out}");
    // The push reconciles every object once, with the candidate beside: let that pass end.
    // A shadow call beyond the candidate's in-flight bound is skipped by design (counted as
    // `skipped`): the pass met that object too.
    let n = names.len() as u64;
    eventually(
        Duration::from_secs(300),
        "the candidate met every object",
        || async { (compared(host) + rollout_count(host, "skipped") >= n).then_some(()) },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (before, skipped_before) = (compared(host), rollout_count(host, "skipped"));
    let (shadow_s, shadow_cpu_s) = rescale(client, tracker, host, names).await;
    println!("shadow: rescale 2 → 3 with a shadow candidate in {shadow_s:.1} s");
    tokio::time::sleep(Duration::from_secs(1)).await;
    ShadowCost {
        plain_s,
        plain_cpu_s,
        shadow_s,
        shadow_cpu_s,
        decisions: compared(host) - before,
        skipped: rollout_count(host, "skipped") - skipped_before,
    }
}
