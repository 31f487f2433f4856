//! The decision: one call into the plugin's sandbox, and what the host does with an answer
//! that is not a plan (an invalid spec, an error, a fault of the sandbox).

use std::sync::Arc;
use std::time::Instant;

use kube::api::DynamicObject;
use kube::runtime::controller::Action;
use serde_json::Value;
use tracing::Instrument;

use crate::plan::guard::PrimaryRef;
use crate::reconcile::Failure;
use crate::reconcile::context::Context;
use crate::reconcile::events::publish;
use crate::reconcile::execute;
use crate::reconcile::own_writes;
use crate::rollout::record::Decision;
use crate::rollout::shadow::{self, ShadowCall};
use crate::rollout::{Divergence, Role};
use crate::runtime::{
    CallError, Entry, EventType, LoadedPlugin, Observed, Outcome, Plan, ReconcileError, Reservation,
};
use crate::telemetry::metrics::{PluginLabels, RolloutLabels};

/// Beside the decision: the shadow candidate decides on the same observed value, a canary
/// decision is counted, and the decision is recorded when the plugin's are.
fn after(
    ctx: &Context,
    (plugin, role): (&Arc<LoadedPlugin>, &Role),
    entry: Entry,
    observed: Option<Observed>,
    outcome: &Result<Result<Plan, ReconcileError>, CallError>,
    object: String,
    recording: bool,
) {
    // The common case, nothing beside the decision: no copy of the outcome is made.
    if matches!(role, Role::Active) && !recording {
        return;
    }
    let result = Outcome::of(outcome);
    if let Role::Canary(c) = role {
        let labels = RolloutLabels {
            plugin: c.plugin.info.name.clone(),
            candidate: c.plugin.info.version.clone(),
            result: if result.is_fault() { "fault" } else { "canary" },
        };
        ctx.metrics.rollout_decisions.get_or_create(&labels).inc();
        match &result {
            Outcome::Fault(why) => c.stats.faulted(Divergence {
                object: object.clone(),
                time: shadow::now(),
                diff: format!("candidate fault: {why}"),
            }),
            _ => c.stats.decided(),
        }
    }
    let Some(observed) = observed else { return };
    let (for_record, for_shadow) = match (recording, role) {
        (true, Role::Shadowed(_)) => (Some(observed.clone()), Some(observed)),
        (true, _) => (Some(observed), None),
        (false, _) => (None, Some(observed)),
    };
    if let Some(observed) = for_record {
        ctx.cases.record(Decision {
            plugin: plugin.info.name.clone(),
            version: plugin.info.version.clone(),
            object: object.clone(),
            observed,
            outcome: result.clone(),
            reads_secrets: crate::rollout::record::reads_secrets(&plugin.info),
        });
    }
    if let (Role::Shadowed(c), Some(observed)) = (role, for_shadow) {
        let call = ShadowCall {
            candidate: c.clone(),
            entry,
            observed,
            active: result,
            object,
        };
        shadow::spawn(&ctx.sandbox, &ctx.metrics, call);
    }
}

/// What the decision step produced.
pub enum Decided {
    /// A plan to check and carry out, with the share of the host's guest-memory budget it
    /// holds parsed (keep it until the plan is carried out).
    Plan(Plan, Option<Reservation>),
    /// Nothing to carry out: return this action.
    Done(Action),
}

/// Sets the host's `Ready=False` condition on the primary and expects that write in the
/// primary's cache.
pub async fn not_ready(
    ctx: &Context,
    plugin: &LoadedPlugin,
    primary: &Value,
    pref: &PrimaryRef,
    reason: &str,
    message: &str,
) -> Result<(), kube::Error> {
    let info = &plugin.info;
    let stored =
        execute::mark_not_ready(&ctx.writer, &info.primary, primary, pref, reason, message).await?;
    if let Some(stored) = stored {
        own_writes::record_primary(ctx, &pref.uid, &info.primary, &stored);
    }
    Ok(())
}

/// Calls `entry` of `plugin` on `observed`, in a `decide` span. An invalid spec is reported
/// on the object and waits for a change; a plugin error or a sandbox fault is reported and
/// retried with backoff. What came back is recorded as the reconcile span's `decision`
/// (`invalid-spec`, `error`, `fault`; a plan is recorded by the caller).
/// The candidate's part (`role`) and the recording happen beside it ([`after`]).
pub async fn decide(
    ctx: &Context,
    (plugin, role): (&Arc<LoadedPlugin>, &Role),
    (obj, primary, pref): (&DynamicObject, &Value, &PrimaryRef),
    entry: Entry,
    observed: Observed,
) -> Result<Decided, Failure> {
    let info = &plugin.info;
    let labels = PluginLabels::new(&info.name, &info.version);
    let object = crate::expect::triggers::key_of(pref.namespace.as_deref(), &pref.name);
    let recording = ctx.cases.records(ctx.slot.record_switch());
    // The shadow and the recorder need the observed value after the call consumed it.
    let copy = (recording || matches!(role, Role::Shadowed(_))).then(|| observed.clone());
    let call_started = Instant::now();
    // A child span of the reconcile: the wait for a call slot and the call itself.
    let (outcome, held) = match ctx
        .sandbox
        .decide_holding(plugin.clone(), entry, observed, object.clone())
        .instrument(tracing::info_span!("decide", ?entry))
        .await
    {
        Ok((answer, held)) => (Ok(answer), held),
        Err(fault) => (Err(fault), None),
    };
    ctx.metrics
        .sandbox_call_duration_seconds
        .get_or_create(&labels)
        .observe(call_started.elapsed().as_secs_f64());
    after(
        ctx,
        (plugin, role),
        entry,
        copy,
        &outcome,
        object,
        recording,
    );
    match outcome {
        Ok(Ok(plan)) => Ok(Decided::Plan(plan, held)),
        Ok(Err(ReconcileError::InvalidSpec(msg))) => {
            tracing::Span::current().record("decision", "invalid-spec");
            tracing::warn!(reason = "InvalidSpec", "{msg}");
            publish(ctx, obj, EventType::Warning, "InvalidSpec", msg.clone());
            not_ready(ctx, plugin, primary, pref, "InvalidSpec", &msg).await?;
            Ok(Decided::Done(Action::await_change()))
        }
        Ok(Err(e)) => {
            tracing::Span::current().record("decision", "error");
            publish(
                ctx,
                obj,
                EventType::Warning,
                "ReconcileError",
                e.to_string(),
            );
            Err(Failure::Plugin(e))
        }
        Err(fault) => {
            tracing::Span::current().record("decision", "fault");
            match fault {
                CallError::Timeout(_) => ctx.metrics.sandbox_timeouts.get_or_create(&labels).inc(),
                CallError::Trap(_) | CallError::OutOfMemory(_) | CallError::HostMemory(_) => {
                    ctx.metrics.sandbox_traps.get_or_create(&labels).inc()
                }
                _ => 0,
            };
            tracing::error!(fault = %fault, "plugin fault");
            let text = fault.to_string();
            publish(ctx, obj, EventType::Warning, "PluginFault", text.clone());
            let _ = not_ready(ctx, plugin, primary, pref, "PluginFault", &text).await;
            Err(Failure::Fault(fault))
        }
    }
}
