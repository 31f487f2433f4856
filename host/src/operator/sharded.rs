//! A shard's part in moving objects between replicas, at the start of a reconcile (so it
//! never overlaps another reconcile of the same object: the controller runs one at a time).
//!
//! - **Drain.** The sharder asked this shard to let the object go: the reconcile decides
//!   nothing, removes the shard's labels (the acknowledgement) and ends; the object leaves
//!   this shard's cache, and the sharder gives it to its new shard.
//! - **Takeover.** The object came from another shard (the handover annotation): before
//!   deciding, this shard lists what the object controls (by the controller label the host
//!   sets, a consistent read), relabels it for itself, and expects every one of those
//!   objects in its caches at the version it read or wrote. The decision then waits for
//!   them like it waits for its own writes ([`super::expect`]): the new shard never decides
//!   on a view that misses the old shard's last writes, so it never doubles a pod.

use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::json;

use super::context::Context;
use super::execute::Written;
use super::guard::PrimaryRef;
use super::kinds::api_for;
use super::seen;
use crate::ops::metrics::MoveLabels;
use crate::runtime::{PluginInfo, Selection};
use crate::shards::assign::{DRAIN_LABEL, SHARD_LABEL};
use crate::shards::scope::{HANDOVER_ANNOTATION, controller_selector};
use crate::shards::sharder::acknowledge;

fn has_label(obj: &DynamicObject, key: &str) -> bool {
    obj.metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(key))
}

fn count(ctx: &Context, info: &PluginInfo, step: &'static str, n: u64) {
    ctx.metrics
        .shard_moves
        .get_or_create(&MoveLabels {
            plugin: info.name.clone(),
            step,
        })
        .inc_by(n);
}

fn metadata_object(meta: kube::core::ObjectMeta) -> DynamicObject {
    DynamicObject {
        types: None,
        metadata: meta,
        data: json!({}),
    }
}

/// The shard's step before the decision, if any: `Some(action)` ends the reconcile there
/// (a drain was acknowledged); `None` goes on to decide (after a takeover, if one was due).
pub async fn before_deciding(
    ctx: &Context,
    shard: &str,
    info: &PluginInfo,
    obj: &DynamicObject,
    pref: &PrimaryRef,
) -> Result<Option<Action>, kube::Error> {
    let api = api_for(&ctx.client, &info.primary, pref.namespace.as_deref());
    if has_label(obj, DRAIN_LABEL) {
        match acknowledge(
            &api,
            &pref.name,
            obj.metadata.resource_version.as_deref(),
            shard,
        )
        .await
        {
            Ok(()) => {
                tracing::info!("drained: let go of the object for its new shard");
                count(ctx, info, "released", 1);
            }
            // Changed since this view: the newer event reconciles it again.
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {}
            Err(e) => return Err(e),
        }
        return Ok(Some(Action::await_change()));
    }
    let from = obj
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(HANDOVER_ANNOTATION));
    let Some(from) = from else {
        return Ok(None);
    };
    // Taken over already, and the cache does not show the annotation's removal yet.
    if ctx.expectations.pending(&pref.uid) != super::expect::Pending::Clear {
        return Ok(None);
    }
    let mut taken = 0;
    for cache in ctx
        .related
        .iter()
        .filter(|c| c.relation.selection == Selection::Owned)
    {
        let kind = &cache.relation.kind;
        let owned = api_for(&ctx.client, kind, pref.namespace.as_deref());
        let listed = owned
            .list_metadata(&ListParams::default().labels(&controller_selector(&pref.uid)))
            .await?;
        for item in listed.items {
            let mine = item
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(SHARD_LABEL))
                .is_some_and(|s| s == shard);
            let object = if mine {
                metadata_object(item.metadata)
            } else {
                let name = item.metadata.name.clone().unwrap_or_default();
                let patch = json!({"metadata": {"labels": {SHARD_LABEL: shard}}});
                match owned
                    .patch_metadata(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(p) => metadata_object(p.metadata),
                    Err(kube::Error::Api(s)) if s.code == 404 => continue,
                    Err(e) => return Err(e),
                }
            };
            taken += 1;
            seen::record(
                ctx,
                &pref.uid,
                Written::Object {
                    kind: kind.clone(),
                    object: Box::new(object),
                },
            );
        }
    }
    let done = json!({"metadata": {"annotations": {HANDOVER_ANNOTATION: null}}});
    let stored = api
        .patch_metadata(&pref.name, &PatchParams::default(), &Patch::Merge(&done))
        .await?;
    seen::record_primary(
        ctx,
        &pref.uid,
        &info.primary,
        &metadata_object(stored.metadata),
    );
    tracing::info!(from = %from, owned = taken, "taken over from another shard");
    count(ctx, info, "taken", 1);
    Ok(None)
}
