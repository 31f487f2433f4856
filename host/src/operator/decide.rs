//! The decision: one call into the plugin's sandbox, and what the host does with an answer
//! that is not a plan (an invalid spec, an error, a fault of the sandbox).

use std::sync::Arc;
use std::time::Instant;

use kube::api::DynamicObject;
use kube::runtime::controller::Action;
use serde_json::Value;

use super::context::Context;
use super::events::publish;
use super::execute;
use super::guard::PrimaryRef;
use super::reconcile::Failure;
use super::seen;
use crate::ops::metrics::PluginLabels;
use crate::runtime::{CallError, Entry, EventType, LoadedPlugin, Observed, Plan, ReconcileError};

/// What the decision step produced.
pub enum Decided {
    /// A plan to check and carry out.
    Plan(Plan),
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
        execute::mark_not_ready(&ctx.client, &info.primary, primary, pref, reason, message).await?;
    if let Some(stored) = stored {
        seen::record_primary(ctx, &pref.uid, &info.primary, &stored);
    }
    Ok(())
}

/// Calls `entry` of `plugin` on `observed`. An invalid spec is reported on the object and
/// waits for a change; a plugin error or a sandbox fault is reported and retried with backoff.
pub async fn decide(
    ctx: &Context,
    plugin: &Arc<LoadedPlugin>,
    (obj, primary, pref): (&DynamicObject, &Value, &PrimaryRef),
    entry: Entry,
    observed: Observed,
) -> Result<Decided, Failure> {
    let info = &plugin.info;
    let labels = PluginLabels::new(&info.name, &info.version);
    let call_started = Instant::now();
    let outcome = ctx
        .sandbox
        .decide(
            plugin.clone(),
            entry,
            observed,
            format!("{}/{}", pref.namespace.as_deref().unwrap_or(""), pref.name),
        )
        .await;
    ctx.metrics
        .sandbox_call_duration_seconds
        .get_or_create(&labels)
        .observe(call_started.elapsed().as_secs_f64());
    match outcome {
        Ok(Ok(plan)) => Ok(Decided::Plan(plan)),
        Ok(Err(ReconcileError::InvalidSpec(msg))) => {
            tracing::warn!(reason = "InvalidSpec", "{msg}");
            publish(ctx, obj, EventType::Warning, "InvalidSpec", msg.clone()).await;
            not_ready(ctx, plugin, primary, pref, "InvalidSpec", &msg).await?;
            Ok(Decided::Done(Action::await_change()))
        }
        Ok(Err(e)) => {
            publish(
                ctx,
                obj,
                EventType::Warning,
                "ReconcileError",
                e.to_string(),
            )
            .await;
            Err(Failure::Plugin(e))
        }
        Err(fault) => {
            match fault {
                CallError::Timeout(_) => ctx.metrics.sandbox_timeouts.get_or_create(&labels).inc(),
                CallError::Trap(_) | CallError::OutOfMemory(_) => {
                    ctx.metrics.sandbox_traps.get_or_create(&labels).inc()
                }
                _ => 0,
            };
            tracing::error!(fault = %fault, "plugin fault");
            let text = fault.to_string();
            publish(ctx, obj, EventType::Warning, "PluginFault", text.clone()).await;
            let _ = not_ready(ctx, plugin, primary, pref, "PluginFault", &text).await;
            Err(Failure::Fault(fault))
        }
    }
}
