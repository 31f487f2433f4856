//! One reconcile: observed state from the caches, the plugin's decision in the sandbox, the
//! guard, the executor, Events, and the requeue decision.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::Resource;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event as KubeEvent, EventType as KubeEventType};
use serde_json::{Value, json};
use tracing::Instrument;

use super::context::Context;
use super::execute::{self, Executed};
use super::guard::{PrimaryRef, Violation};
use super::kinds::api_for;
use crate::observe::{in_relation, is_controlled_by, selector_of, trim_for_guest};
use crate::runtime::{CallError, Entry, EventType, LoadedPlugin, Observed, Plan, ReconcileError};

/// Why a reconcile failed; each is retried with per-object backoff.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// The sandbox stopped the call.
    #[error("plugin fault: {0}")]
    Fault(#[from] CallError),
    /// The plugin answered with a (retryable) error.
    #[error("plugin error: {0}")]
    Plugin(ReconcileError),
    /// The guard refused the plan.
    #[error("{0}")]
    Rejected(#[from] Violation),
    /// The API server refused a write.
    #[error("kubernetes: {0}")]
    Kube(#[from] kube::Error),
    /// The object or the observed state could not be built.
    #[error("{0}")]
    Other(String),
}

impl Failure {
    /// Metric label of the failure.
    pub fn kind(&self) -> &'static str {
        match self {
            Failure::Fault(e) => e.kind(),
            Failure::Plugin(ReconcileError::InvalidSpec(_)) => "invalid_spec",
            Failure::Plugin(ReconcileError::Transient(_)) => "transient",
            Failure::Plugin(ReconcileError::Other(_)) => "other",
            Failure::Rejected(_) => "rejected",
            Failure::Kube(_) => "kubernetes",
            Failure::Other(_) => "other",
        }
    }
}

fn object_key(obj: &DynamicObject) -> String {
    format!(
        "{}/{}",
        obj.metadata.namespace.as_deref().unwrap_or(""),
        obj.metadata.name.as_deref().unwrap_or("")
    )
}

/// The related objects of `primary` from the caches, per relation, trimmed for the guest.
/// Objects of another namespace are skipped before they are serialised; everything else is
/// decided by the same [`in_relation`] check the offline commands use, once per object.
fn related_of(
    ctx: &Context,
    primary: &Value,
    ns: Option<&str>,
) -> Result<BTreeMap<String, Vec<Value>>, String> {
    let mut related: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for cache in &ctx.related {
        let selector = selector_of(&cache.relation)?;
        let chosen = related.entry(cache.relation.name.clone()).or_default();
        for obj in cache.store.state() {
            if cache.relation.kind.namespaced && obj.metadata.namespace.as_deref() != ns {
                continue;
            }
            let Ok(mut v) = serde_json::to_value(&*obj) else {
                continue;
            };
            v["apiVersion"] = json!(cache.resource.api_version);
            v["kind"] = json!(cache.resource.kind);
            if in_relation(&cache.relation, &selector, primary, &v) {
                chosen.push(trim_for_guest(v));
            }
        }
    }
    Ok(related)
}

async fn publish(
    ctx: &Context,
    obj: &DynamicObject,
    event_type: EventType,
    reason: &str,
    note: String,
) {
    let ev = KubeEvent {
        type_: match event_type {
            EventType::Normal => KubeEventType::Normal,
            EventType::Warning => KubeEventType::Warning,
        },
        reason: reason.chars().take(128).collect(),
        note: Some(note.chars().take(1024).collect()),
        action: "Reconcile".into(),
        secondary: None,
    };
    let reference = obj.object_ref(&ctx.primary);
    if let Err(e) = ctx.recorder.publish(&ev, &reference).await {
        tracing::warn!(error = %e, reason, "could not publish event");
    }
}

/// Waits (bounded) until the caches show what a plan did, so the next decision about this
/// object never acts on a stale view (no doubled creates).
async fn await_caches(ctx: &Context, done: &Executed) {
    let deadline = Instant::now() + ctx.cache_wait;
    loop {
        let seen_writes = done.written.iter().all(|(kind, ns, name)| {
            ctx.related
                .iter()
                .filter(|c| &c.relation.kind == kind)
                .all(|c| {
                    c.store.state().iter().any(|o| {
                        o.metadata.name.as_deref() == Some(name)
                            && o.metadata.namespace.as_deref() == ns.as_deref()
                    })
                })
        });
        let seen_deletes = done.deleted.iter().all(|(kind, uid)| {
            ctx.related
                .iter()
                .filter(|c| &c.relation.kind == kind)
                .all(|c| {
                    !c.store.state().iter().any(|o| {
                        o.metadata.uid.as_deref() == Some(uid)
                            && o.metadata.deletion_timestamp.is_none()
                    })
                })
        });
        if (seen_writes && seen_deletes) || Instant::now() >= deadline {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn set_finalizers(
    ctx: &Context,
    pref: &PrimaryRef,
    finalizers: Vec<String>,
) -> Result<(), kube::Error> {
    let api = api_for(
        &ctx.client,
        &ctx.slot.current().info.primary,
        pref.namespace.as_deref(),
    );
    api.patch(
        &pref.name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": finalizers}})),
    )
    .await?;
    Ok(())
}

/// Reconciles one primary object with the plugin's current version.
pub async fn reconcile(obj: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action, Failure> {
    let plugin = ctx.slot.current();
    let key = object_key(&obj);
    let span = tracing::info_span!("reconcile", plugin = %plugin.info.name, version = %plugin.info.version, object = %key);
    let started = Instant::now();
    let labels = crate::ops::metrics::PluginLabels::new(&plugin.info.name, &plugin.info.version);
    let in_flight = ctx
        .metrics
        .queue_depth
        .get_or_create(&crate::ops::metrics::PluginOnlyLabels {
            plugin: plugin.info.name.clone(),
        })
        .clone();
    in_flight.inc();
    let result = reconcile_with(&obj, &ctx, &plugin).instrument(span).await;
    in_flight.dec();
    ctx.metrics.reconciles.get_or_create(&labels).inc();
    ctx.metrics
        .reconcile_duration_seconds
        .get_or_create(&labels)
        .observe(started.elapsed().as_secs_f64());
    match &result {
        Ok(_) => ctx.backoff.succeeded(&key),
        Err(e) => {
            ctx.metrics
                .reconcile_errors
                .get_or_create(&crate::ops::metrics::ErrorLabels::new(
                    &plugin.info.name,
                    &plugin.info.version,
                    e.kind(),
                ))
                .inc();
        }
    }
    result
}

async fn reconcile_with(
    obj: &DynamicObject,
    ctx: &Context,
    plugin: &Arc<LoadedPlugin>,
) -> Result<Action, Failure> {
    let mut primary = serde_json::to_value(obj).map_err(|e| Failure::Other(e.to_string()))?;
    primary["apiVersion"] = json!(ctx.primary.api_version);
    primary["kind"] = json!(ctx.primary.kind);
    let pref = PrimaryRef::of(&primary)
        .ok_or_else(|| Failure::Other("primary object without name or uid".into()))?;
    let info = &plugin.info;

    // Finalizers: added before the first decision, removed after a cleanup with nothing left to do.
    let mut entry = Entry::Reconcile;
    if let Some(fin) = &info.finalizer {
        let mut finalizers = obj.metadata.finalizers.clone().unwrap_or_default();
        let has = finalizers.contains(fin);
        if obj.metadata.deletion_timestamp.is_some() {
            if !has {
                return Ok(Action::await_change());
            }
            entry = Entry::Cleanup;
        } else if !has {
            finalizers.push(fin.clone());
            set_finalizers(ctx, &pref, finalizers).await?;
            return Ok(Action::await_change());
        }
    } else if obj.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }

    let related = related_of(ctx, &primary, pref.namespace.as_deref()).map_err(Failure::Other)?;
    let owned: HashSet<String> = related
        .values()
        .flatten()
        .filter(|o| is_controlled_by(o, &pref.uid))
        .filter_map(|o| {
            o.pointer("/metadata/uid")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .collect();
    let observed = Observed {
        primary: trim_for_guest(primary.clone()),
        related,
        related_json: Default::default(),
        now_unix_ms: jiff::Timestamp::now().as_millisecond(),
        seed: rand::random(),
    };

    let labels = crate::ops::metrics::PluginLabels::new(&info.name, &info.version);
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
    let plan: Plan = match outcome {
        Ok(Ok(plan)) => plan,
        Ok(Err(ReconcileError::InvalidSpec(msg))) => {
            tracing::warn!(reason = "InvalidSpec", "{msg}");
            publish(ctx, obj, EventType::Warning, "InvalidSpec", msg.clone()).await;
            execute::mark_not_ready(
                &ctx.client,
                &info.primary,
                &primary,
                &pref,
                "InvalidSpec",
                &msg,
            )
            .await?;
            return Ok(Action::await_change());
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
            return Err(Failure::Plugin(e));
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
            publish(
                ctx,
                obj,
                EventType::Warning,
                "PluginFault",
                fault.to_string(),
            )
            .await;
            let _ = execute::mark_not_ready(
                &ctx.client,
                &info.primary,
                &primary,
                &pref,
                "PluginFault",
                &fault.to_string(),
            )
            .await;
            return Err(Failure::Fault(fault));
        }
    };

    let steps = match ctx.guard.check(info, &pref, &plan, &owned) {
        Ok(steps) => steps,
        Err(v) => {
            tracing::warn!(rule = v.rule, detail = %v.detail, "plan rejected by the guard");
            ctx.metrics
                .rejected_plans
                .get_or_create(&crate::ops::metrics::RejectLabels {
                    plugin: info.name.clone(),
                    rule: v.rule.to_string(),
                })
                .inc();
            publish(ctx, obj, EventType::Warning, "PlanRejected", v.to_string()).await;
            let _ = execute::mark_not_ready(
                &ctx.client,
                &info.primary,
                &primary,
                &pref,
                "PlanRejected",
                &v.to_string(),
            )
            .await;
            return Err(Failure::Rejected(v));
        }
    };
    let done = execute::run_steps(&ctx.client, &info.name, &steps).await?;
    if let Some(status) = &plan.status {
        execute::write_status(&ctx.client, &info.name, &info.primary, &pref, status).await?;
    }
    for ev in &plan.events {
        publish(ctx, obj, ev.event_type, &ev.reason, ev.message.clone()).await;
    }
    await_caches(ctx, &done).await;

    if entry == Entry::Cleanup && plan.actions.is_empty() {
        let fin = info.finalizer.clone().unwrap_or_default();
        let rest: Vec<String> = obj
            .metadata
            .finalizers
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter(|f| *f != fin)
            .collect();
        set_finalizers(ctx, &pref, rest).await?;
        return Ok(Action::await_change());
    }
    Ok(match plan.requeue_after_ms {
        Some(ms) => Action::requeue(Duration::from_millis(ms.max(100))),
        None if entry == Entry::Cleanup => Action::requeue(Duration::from_secs(1)),
        None => Action::await_change(),
    })
}

/// Error policy: exponential backoff per object, reset on success.
pub fn error_policy(obj: Arc<DynamicObject>, err: &Failure, ctx: Arc<Context>) -> Action {
    let key = object_key(&obj);
    let wait = ctx.backoff.failed(&key);
    tracing::warn!(object = %key, error = %err, retry_in = ?wait, "reconcile failed");
    Action::requeue(wait)
}
