//! A shard's part in moving objects between replicas, at the start of a reconcile (so it
//! never overlaps another reconcile of the same object: the controller runs one at a time).
//!
//! - **Drain.** The sharder asked this shard to let the object go: once the shard's own
//!   writes for it are seen (a write of unknown outcome is expected until its expiry), the
//!   reconcile decides nothing, removes the shard's labels (the acknowledgement) and ends;
//!   the object leaves this shard's cache, and the sharder gives it to its new shard.
//! - **Not ours.** A reconcile acts only on an object whose shard label names this shard
//!   as the cache holds it when the decision starts; anything else waits for the change
//!   that takes it out of the cache.
//! - **Takeover.** The object came from another shard (the handover annotation), or this
//!   shard sees it for the first time ([`Sighted`]: since its controller started, its cache
//!   last relisted, or the object last left it): before deciding, this shard lists what the
//!   object controls (by the controller label the host sets, a consistent read), relabels it
//!   for itself, and expects every one of those objects in its caches at the version it read
//!   or wrote. The decision then waits for them like it waits for its own writes
//!   ([`crate::expect`]): the new shard never decides on a view that misses another shard's
//!   last writes, so it never doubles a pod, whoever moved the object (the sharder, or a
//!   user or GitOps tool rewriting the shard label) and whatever annotation it carries.
//!   What the object waited for on an earlier stay is forgotten when it leaves.

use std::collections::HashMap;
use std::sync::Mutex;

use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::json;

use crate::k8s::kinds::api_for;
use crate::plan::guard::PrimaryRef;
use crate::reconcile::context::Context;
use crate::reconcile::execute::Written;
use crate::reconcile::own_writes;
use crate::runtime::{PluginInfo, Selection};
use crate::shards::assign::{DRAIN_LABEL, SHARD_LABEL};
use crate::shards::scope::{HANDOVER_ANNOTATION, controller_selector};
use crate::shards::sharder::acknowledge;
use crate::telemetry::metrics::MoveLabels;

/// The primaries this shard has taken over, by UID, each with the resourceVersion it was
/// taken over at. An object not in it is seen for the first time and taken over before its
/// first decision; one that carries the handover annotation at another version was handed
/// over again. An object leaves it when it leaves the shard's cache (deleted, relabelled, or
/// a drain acknowledged) and when the cache relists (what left during a gap is unknown).
#[derive(Debug, Default)]
pub struct Sighted {
    taken: Mutex<HashMap<String, String>>,
}

impl Sighted {
    /// Whether the object with `uid` at `version` must be taken over before deciding:
    /// never taken over, or `handed_over` at a version other than the one it was taken at.
    pub fn needs_takeover(&self, uid: &str, version: Option<&str>, handed_over: bool) -> bool {
        match self.lock().get(uid) {
            None => true,
            Some(at) => handed_over && Some(at.as_str()) != version,
        }
    }

    /// The object with `uid` was taken over as it stood at `version`.
    pub fn taken(&self, uid: &str, version: Option<&str>) {
        self.lock()
            .insert(uid.to_string(), version.unwrap_or_default().to_string());
    }

    /// The object with `uid` left this shard's cache.
    pub fn left(&self, uid: &str) {
        self.lock().remove(uid);
    }

    /// The cache relisted: every object is seen anew.
    pub fn relisted(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.taken.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// How soon a drain whose acknowledgement lost a race with a newer version of the object is
/// looked at again.
const ACKNOWLEDGE_AGAIN: std::time::Duration = std::time::Duration::from_millis(200);

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
/// (the object is not this shard's, or a drain was acknowledged); `None` goes on to decide
/// (after a takeover, if one was due).
pub async fn before_deciding(
    ctx: &Context,
    shard: &str,
    info: &PluginInfo,
    obj: &DynamicObject,
    pref: &PrimaryRef,
) -> Result<Option<Action>, kube::Error> {
    let labelled = obj
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(SHARD_LABEL));
    if labelled.map(String::as_str) != Some(shard) {
        tracing::debug!(shard = ?labelled, "not this shard's object: not deciding");
        return Ok(Some(Action::await_change()));
    }
    let api = api_for(&ctx.client, &info.primary, pref.namespace.as_deref());
    if has_label(obj, DRAIN_LABEL) {
        // Let go only once this shard's own writes for the object are seen: the new shard
        // finds what the object controls by a consistent read, which cannot show a write
        // still on its way, such as a create cut off before its answer that the API server
        // may yet commit (expected until its expiry); it would make that pod again.
        let key = crate::expect::triggers::key_of(pref.namespace.as_deref(), &pref.name);
        if let Some(action) = crate::reconcile::until_own_writes_seen(
            (&ctx.expectations, &ctx.triggers),
            key,
            &pref.uid,
        ) {
            return Ok(Some(action));
        }
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
                ctx.sighted.left(&pref.uid);
                ctx.expectations.forget(&pref.uid);
            }
            // Changed since this view. The newer version may be the echo of a write of this
            // shard's own (a status written while the drain landed), which asks for no
            // decision (`controller::primary_news`): look again shortly, on the cache as it
            // is then, rather than wait for an event that may not come.
            Err(kube::Error::Api(s)) if s.code == 409 => {
                tracing::debug!("the drain's acknowledgement met a newer version: again shortly");
                return Ok(Some(Action::requeue(ACKNOWLEDGE_AGAIN)));
            }
            // Gone: nothing to let go.
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e),
        }
        return Ok(Some(Action::await_change()));
    }
    let from = obj
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(HANDOVER_ANNOTATION));
    let version = obj.metadata.resource_version.as_deref();
    // Taken over already (the cache may not show the annotation's removal yet).
    if !ctx
        .sighted
        .needs_takeover(&pref.uid, version, from.is_some())
    {
        return Ok(None);
    }
    // Whatever this object waited for on an earlier stay says nothing of now.
    ctx.expectations.forget(&pref.uid);
    let taken = take_owned(ctx, shard, pref).await?;
    if from.is_some() {
        let done = json!({"metadata": {"annotations": {HANDOVER_ANNOTATION: null}}});
        let stored = api
            .patch_metadata(&pref.name, &PatchParams::default(), &Patch::Merge(&done))
            .await?;
        own_writes::record_primary(
            ctx,
            &pref.uid,
            &info.primary,
            &metadata_object(stored.metadata),
        );
    }
    ctx.sighted.taken(&pref.uid, version);
    let from = from.map_or("first sight", String::as_str);
    tracing::info!(from = %from, owned = taken, "taken over from another shard");
    count(ctx, info, "taken", 1);
    Ok(None)
}

/// Lists what the primary `pref` controls (a consistent read by the controller label),
/// relabels for `shard` what carries another shard's label, and expects all of it in the
/// caches. Returns how many objects it found.
async fn take_owned(ctx: &Context, shard: &str, pref: &PrimaryRef) -> Result<usize, kube::Error> {
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
            own_writes::record(
                ctx,
                &pref.uid,
                Written::Object {
                    kind: kind.clone(),
                    object: Box::new(object),
                },
            );
        }
    }
    Ok(taken)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_sight_and_new_handovers_are_taken_over_once() {
        let s = Sighted::default();
        // Seen for the first time, with or without the annotation: taken over.
        assert!(s.needs_takeover("u", Some("10"), false));
        assert!(s.needs_takeover("u", Some("10"), true));
        s.taken("u", Some("10"));
        // The cache still shows the version it was taken over at: not again.
        assert!(!s.needs_takeover("u", Some("10"), true));
        // Later versions without the annotation: ours.
        assert!(!s.needs_takeover("u", Some("12"), false));
        // Handed over again (another version carrying the annotation): taken over again.
        assert!(s.needs_takeover("u", Some("15"), true));
    }

    #[test]
    fn leaving_or_a_relist_makes_the_next_sight_a_first_one() {
        let s = Sighted::default();
        s.taken("a", Some("1"));
        s.taken("b", Some("1"));
        s.left("a");
        assert!(s.needs_takeover("a", Some("1"), false));
        assert!(!s.needs_takeover("b", Some("1"), false));
        s.relisted();
        assert!(s.needs_takeover("b", Some("1"), false));
    }
}
