//! The rollout reporter: every few seconds, for each plugin with a candidate, the counts of
//! the candidate's decisions go into its WasmPlugin's `status.rollout` (field manager
//! `wasmop-rollout`, beside the host's own status fields), and the rollout's policy is
//! judged: the host promotes or aborts by itself, with an Event on the WasmPlugin saying why.
//! Only the leader reports (its writes are the only ones the fence lets out). It also keeps
//! `status.recording` (field manager `wasmop-recording`) of every plugin whose decisions
//! are recorded: where, how many cases, and why the last one could not be written.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource};
use serde_json::json;
use tokio::sync::watch;

use crate::k8s::fence::{Fence, is_fenced_off};
use crate::registry::manager::Manager;
use crate::registry::origin::Origin;
use crate::registry::promotion::{abort_patch, patch_spec, promote_patch};
use crate::registry::slot::PluginSlot;
use crate::registry::wasmplugin::{DivergenceStatus, RecordingStatus, RolloutStatus, WasmPlugin};
use crate::rollout::canary::in_canary;
use crate::rollout::record::CaseRecorder;
use crate::rollout::{Candidate, Counts, Mode, Verdict};

/// How often the counts are written.
pub const EVERY: Duration = Duration::from_secs(1);

/// Share of the shadow decisions that agreed, like `98.5%`.
pub fn agreement(c: &Counts) -> String {
    let compared = c.agreements + c.divergences + c.faults;
    if compared == 0 {
        return "-".into();
    }
    let percent = c.agreements as f64 * 100.0 / compared as f64;
    format!("{}%", (percent * 10.0).round() / 10.0)
}

/// Primary objects decided by the active version and by the candidate.
fn objects(slot: &PluginSlot, mode: Mode) -> (u64, u64) {
    let Some(store) = slot.primaries() else {
        return (0, 0);
    };
    let all = store.state();
    let canary = match mode {
        Mode::Shadow => 0,
        Mode::Canary(p) => all
            .iter()
            .filter(|o| in_canary(o.metadata.uid.as_deref().unwrap_or_default(), p))
            .count() as u64,
    };
    (all.len() as u64 - canary, canary)
}

/// The `status.rollout` of a candidate now.
pub fn status_of(c: &Candidate, slot: &PluginSlot) -> RolloutStatus {
    let counts = c.stats.counts();
    let (objects_active, objects_candidate) = objects(slot, c.mode);
    RolloutStatus {
        digest: c.plugin.digest.clone(),
        decisions: counts.decisions,
        agreements: counts.agreements,
        divergences: counts.divergences,
        faults: counts.faults,
        streak: counts.streak,
        agreement: match c.mode {
            Mode::Shadow => agreement(&counts),
            Mode::Canary(_) => "-".into(),
        },
        objects_active,
        objects_candidate,
        last_divergences: counts
            .recent
            .iter()
            .map(|d| DivergenceStatus {
                object: d.object.clone(),
                time: d.time.clone(),
                diff: d.diff.clone(),
            })
            .collect(),
    }
}

/// Writes one field of a WasmPlugin's status by server-side apply, owned by `manager`
/// (`wasmop-rollout`, `wasmop-recording`), beside the host's own status fields; `None`
/// removes the field.
async fn apply_status_field<T: serde::Serialize>(
    api: &Api<WasmPlugin>,
    name: &str,
    manager: &str,
    field: &str,
    value: Option<&T>,
) -> Result<(), kube::Error> {
    let mut status = json!({});
    if let Some(v) = value {
        status[field] = json!(v);
    }
    let patch =
        json!({"apiVersion": "wasmop.dev/v1alpha1", "kind": "WasmPlugin", "status": status});
    api.patch_status(
        name,
        &PatchParams::apply(manager).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map(|_| ())
}

/// The `status.recording` of a plugin now; `None` when its decisions are not recorded.
fn recording_of(cases: &CaseRecorder, slot: &PluginSlot) -> Option<RecordingStatus> {
    if !cases.records(slot.record_switch()) {
        return None;
    }
    let plugin = slot.current().info.name.clone();
    let now = cases.recording(&plugin).unwrap_or_default();
    Some(RecordingStatus {
        directory: cases.dir().join(&plugin).display().to_string(),
        cases: now.cases,
        error: now.error,
    })
}

/// Writes the `status.recording` of every running plugin that changed since `written`.
async fn report_recordings(
    client: &Client,
    manager: &Manager,
    cases: &CaseRecorder,
    written: &mut HashMap<Origin, Option<RecordingStatus>>,
) {
    for (origin, slot) in manager.slots().await {
        let Some((ns, name)) = origin.wasmplugin() else {
            continue;
        };
        let status = recording_of(cases, &slot);
        match (written.get(&origin), &status) {
            // Unchanged since written.
            (Some(w), s) if w == s => continue,
            // Never recorded: no field to remove.
            (None, None) => continue,
            _ => {}
        }
        let api: Api<WasmPlugin> = Api::namespaced(client.clone(), ns);
        match apply_status_field(&api, name, "wasmop-recording", "recording", status.as_ref()).await
        {
            Ok(()) => {
                written.insert(origin, status);
            }
            Err(e) if is_fenced_off(&e) => {}
            Err(e) => {
                tracing::warn!(wasmplugin = name, error = %e, "could not write the recording status")
            }
        }
    }
}

/// Promotes or aborts the candidate `digest` of WasmPlugin `name` as the policy asked,
/// unless the spec names another candidate by now; an Event says why.
async fn end_rollout(
    api: &Api<WasmPlugin>,
    recorder: &Recorder,
    name: &str,
    digest: &str,
    verdict: &Verdict,
) -> Result<(), kube::Error> {
    let Some(wp) = api.get_opt(name).await? else {
        return Ok(());
    };
    // The candidate the spec names: by its digest (a ConfigMap), or as the status says the
    // host loaded it (an OCI reference resolves to a digest on the host's side).
    let named = match wp.spec.rollout.as_ref() {
        Some(r) => match &r.sha256 {
            Some(d) => d == digest,
            None => wp
                .status
                .as_ref()
                .and_then(|s| s.candidate.as_ref())
                .is_some_and(|c| c.digest == digest),
        },
        None => false,
    };
    if !named {
        return Ok(());
    }
    let (reason, why, patch) = match verdict {
        Verdict::Promote(why) => ("RolloutPromoted", why, promote_patch(&wp).ok()),
        Verdict::Abort(why) => ("RolloutAborted", why, Some(abort_patch())),
        Verdict::Continue => return Ok(()),
    };
    let Some(patch) = patch else { return Ok(()) };
    patch_spec(api, name, &patch).await?;
    tracing::info!(wasmplugin = name, candidate = digest, reason, "{why}");
    let ev = Event {
        type_: if reason == "RolloutAborted" {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: reason.into(),
        note: Some(format!("candidate {digest}: {why}")),
        action: "Rollout".into(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&ev, &wp.object_ref(&())).await {
        tracing::warn!(error = %e, "could not publish the rollout Event");
    }
    Ok(())
}

/// Reports the rollouts and recordings of `manager` every [`EVERY`] until shutdown (see
/// the module docs).
pub async fn run(
    client: Client,
    manager: Arc<Manager>,
    fence: Arc<Fence>,
    cases: Arc<CaseRecorder>,
    reporter: Reporter,
    mut shutdown: watch::Receiver<bool>,
) {
    let recorder = Recorder::new(client.clone(), reporter);
    let mut written: HashMap<Origin, RolloutStatus> = HashMap::new();
    let mut recordings: HashMap<Origin, Option<RecordingStatus>> = HashMap::new();
    let mut ended: HashSet<String> = HashSet::new();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(EVERY) => {}
            _ = shutdown.wait_for(|v| *v) => return,
        }
        if !fence.is_open() {
            written.clear();
            recordings.clear();
            continue;
        }
        report_recordings(&client, &manager, &cases, &mut recordings).await;
        let mut current = HashSet::new();
        for (origin, slot) in manager.rollouts().await {
            let (Some((ns, name)), Some(c)) = (origin.wasmplugin(), slot.candidate()) else {
                continue;
            };
            current.insert(origin.clone());
            let api: Api<WasmPlugin> = Api::namespaced(client.clone(), ns);
            let status = status_of(&c, &slot);
            if written.get(&origin) != Some(&status) {
                match apply_status_field(&api, name, "wasmop-rollout", "rollout", Some(&status))
                    .await
                {
                    Ok(()) => {
                        written.insert(origin.clone(), status);
                    }
                    Err(e) if is_fenced_off(&e) => {}
                    Err(e) => {
                        tracing::warn!(wasmplugin = name, error = %e, "could not write the rollout status")
                    }
                }
            }
            let verdict = c.policy.judge(&c.stats.counts());
            if verdict != Verdict::Continue && !ended.contains(&c.plugin.digest) {
                match end_rollout(&api, &recorder, name, &c.plugin.digest, &verdict).await {
                    Ok(()) => {
                        ended.insert(c.plugin.digest.clone());
                    }
                    Err(e) => {
                        tracing::warn!(wasmplugin = name, error = %e, "could not end the rollout")
                    }
                }
            }
        }
        // A rollout that ended: its counts leave the status.
        let gone: Vec<Origin> = written
            .keys()
            .filter(|o| !current.contains(*o))
            .cloned()
            .collect();
        for origin in gone {
            written.remove(&origin);
            if let Some((ns, name)) = origin.wasmplugin() {
                let api: Api<WasmPlugin> = Api::namespaced(client.clone(), ns);
                if let Err(e) = apply_status_field::<RolloutStatus>(
                    &api,
                    name,
                    "wasmop-rollout",
                    "rollout",
                    None,
                )
                .await
                    && !is_fenced_off(&e)
                    && !matches!(&e, kube::Error::Api(s) if s.code == 404)
                {
                    tracing::warn!(wasmplugin = name, error = %e, "could not clear the rollout status");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agreement_is_a_rounded_share_of_the_compared_decisions() {
        let mut c = Counts::default();
        assert_eq!(agreement(&c), "-");
        c.agreements = 197;
        c.divergences = 2;
        c.faults = 1;
        assert_eq!(agreement(&c), "98.5%");
        c.agreements = 0;
        assert_eq!(agreement(&c), "0%");
    }
}
