//! The plan's requests outside the cluster, after its Kubernetes writes
//! ([`crate::effects`]): sent or refused, their answers kept on the primary (an own write of
//! the primary, which the gate waits to see), each refusal an Event, the `Ready=False`
//! condition and `wasmop_outbound_refused_total`. A credential's Secret is read as the
//! plugin (its ServiceAccount must be allowed to `get` it) and its value goes only into
//! the request's header: never into a plan, an answer, a recording, a log line or a span.

use k8s_openapi::api::core::v1::Secret;
use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use tracing::Instrument;

use crate::effects::held::{self, ANNOTATION, Held};
use crate::k8s::kinds::api_for;
use crate::k8s::requests::{write_failed, write_span};
use crate::plan::guard::PrimaryRef;
use crate::reconcile::Failure;
use crate::reconcile::context::Context;
use crate::reconcile::decide::not_ready;
use crate::reconcile::events::publish;
use crate::reconcile::own_writes;
use crate::runtime::types::Credential;
use crate::runtime::{EventType, LoadedPlugin, Plan};

/// The answers `obj` holds for its next decision.
pub fn held_of(obj: &DynamicObject) -> Held {
    held::of(obj)
}

/// Carries out `plan`'s requests against the answers `held`; `true` when new answers came
/// (the next decision, at once, observes them).
pub async fn carry_out(
    ctx: &Context,
    plugin: &LoadedPlugin,
    (obj, primary, pref): (&DynamicObject, &Value, &PrimaryRef),
    plan: &Plan,
    held: &Held,
) -> Result<bool, Failure> {
    if plan.requests.is_empty() && held.is_empty() {
        return Ok(false);
    }
    let info = &plugin.info;
    let namespace = pref.namespace.clone();
    let writer = ctx.writer.clone();
    let carried = ctx
        .outbound
        .carry_out(
            (&info.name, &info.outbound_hosts),
            &plan.requests,
            held,
            |c: Credential| {
                let writer = writer.clone();
                let namespace = namespace.clone();
                async move { credential(&writer, namespace.as_deref(), &c).await }
            },
            &ctx.metrics,
        )
        .instrument(tracing::info_span!(
            "outbound",
            requests = plan.requests.len()
        ))
        .await;
    for (key, rule, text) in &carried.refusals {
        tracing::warn!(key, rule, "request outside the cluster refused");
        publish(
            ctx,
            obj,
            EventType::Warning,
            "RequestRefused",
            format!("request `{key}` refused by rule {text}"),
        );
    }
    if let Some((key, _, text)) = carried.refusals.first() {
        not_ready(
            ctx,
            plugin,
            primary,
            pref,
            "RequestRefused",
            &format!("request `{key}` refused by rule {text}"),
        )
        .await?;
    }
    if carried.held != *held {
        keep(ctx, plugin, pref, &carried.held).await?;
    }
    Ok(carried.answered > 0)
}

/// Writes `held` into the primary's annotation (removed when empty).
async fn keep(
    ctx: &Context,
    plugin: &LoadedPlugin,
    pref: &PrimaryRef,
    held: &Held,
) -> Result<(), kube::Error> {
    let kind = &plugin.info.primary;
    let api = api_for(&ctx.writer, kind, pref.namespace.as_deref());
    let patch = json!({"metadata": {"annotations": {ANNOTATION: held::text(held)}}});
    let span = write_span("PATCH", &kind.kind, pref.namespace.as_deref(), &pref.name);
    let stored = async {
        api.patch(&pref.name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .inspect_err(|e| write_failed(e))
    }
    .instrument(span)
    .await?;
    own_writes::record_primary(ctx, &pref.uid, kind, &stored);
    Ok(())
}

/// The value of a credential's Secret key, read as the plugin.
async fn credential(
    writer: &kube::Client,
    namespace: Option<&str>,
    c: &Credential,
) -> Result<String, String> {
    let Some(ns) = namespace else {
        return Err("a cluster-scoped primary has no namespace to read a Secret from".into());
    };
    let api: kube::Api<Secret> = kube::Api::namespaced(writer.clone(), ns);
    let secret = api.get(&c.secret).await.map_err(|e| match e {
        kube::Error::Api(s) => format!("{} ({})", s.reason, s.code),
        other => other.to_string(),
    })?;
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get(&c.key))
        .ok_or_else(|| "no such key".to_string())?;
    String::from_utf8(bytes.0.clone()).map_err(|_| "the value is not UTF-8".to_string())
}
