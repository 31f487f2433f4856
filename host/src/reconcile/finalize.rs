//! The plugin's finalizer on its primaries: added before the first decision, removed after
//! a cleanup that has nothing left to do.
//!
//! The way out of a cleanup that cannot succeed (it keeps failing, or answers
//! `invalid-spec` on an object being deleted): annotate the object with
//! `wasmop.dev/skip-cleanup=true`. The host then removes its finalizer without calling
//! `cleanup`, and says so in a Warning Event (`CleanupSkipped`). Only the plugin's own
//! finalizer is ever removed; the list is patched with a resourceVersion precondition.

use kube::api::{DynamicObject, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::json;
use tracing::Instrument;

use crate::k8s::kinds::api_for;
use crate::k8s::requests::{write_failed, write_span};
use crate::plan::guard::PrimaryRef;
use crate::reconcile::context::Context;
use crate::reconcile::events::publish;
use crate::reconcile::own_writes;
use crate::runtime::{Entry, EventType, PluginInfo};

/// The annotation that lets an object being deleted go without its plugin's cleanup.
pub const SKIP_CLEANUP: &str = "wasmop.dev/skip-cleanup";

fn skips_cleanup(obj: &DynamicObject) -> bool {
    obj.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SKIP_CLEANUP))
        .is_some_and(|v| v == "true")
}

/// What the finalizer step decided.
pub enum Prepared {
    /// Go on and call this entry point.
    Decide(Entry),
    /// Nothing to decide now: return this action.
    Done(Action),
}

/// Writes `finalizers` as the whole list of object `name`, on condition that it is still
/// at `read`'s resourceVersion (else 409 Conflict); returns the object as stored.
async fn patch_finalizers(
    api: &kube::Api<DynamicObject>,
    name: &str,
    finalizers: &[String],
    read: &DynamicObject,
) -> Result<DynamicObject, kube::Error> {
    let patch = json!({"metadata": {
        "finalizers": finalizers,
        "resourceVersion": read.metadata.resource_version,
    }});
    let kind = read.types.as_ref().map_or("", |t| t.kind.as_str());
    let span = write_span("PATCH", kind, read.metadata.namespace.as_deref(), name);
    async {
        let stored = api
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await;
        stored.inspect_err(|e| write_failed(e))
    }
    .instrument(span)
    .await
}

/// Sets the primary's finalizer list, computed from `obj`, and expects the write in the
/// primary's cache. The patch carries `obj`'s resourceVersion as a precondition: if anyone
/// changed the object since (another controller's finalizer, say), the API server answers
/// 409 Conflict and the reconcile is retried on the newer object, so no other finalizer is
/// ever dropped or revived.
pub async fn set_finalizers(
    ctx: &Context,
    info: &PluginInfo,
    obj: &DynamicObject,
    pref: &PrimaryRef,
    finalizers: Vec<String>,
) -> Result<(), kube::Error> {
    let api = api_for(&ctx.writer, &info.primary, pref.namespace.as_deref());
    let stored = patch_finalizers(&api, &pref.name, &finalizers, obj).await?;
    own_writes::record_primary(ctx, &pref.uid, &info.primary, &stored);
    Ok(())
}

/// Decides between `reconcile` and `cleanup`, adding the finalizer first when it is missing.
pub async fn prepare(
    ctx: &Context,
    info: &PluginInfo,
    obj: &DynamicObject,
    pref: &PrimaryRef,
) -> Result<Prepared, kube::Error> {
    let deleting = obj.metadata.deletion_timestamp.is_some();
    let Some(fin) = &info.finalizer else {
        return Ok(if deleting {
            Prepared::Done(Action::await_change())
        } else {
            Prepared::Decide(Entry::Reconcile)
        });
    };
    let mut finalizers = obj.metadata.finalizers.clone().unwrap_or_default();
    let has = finalizers.contains(fin);
    Ok(match (deleting, has) {
        (true, true) if skips_cleanup(obj) => {
            tracing::warn!(
                annotation = SKIP_CLEANUP,
                "cleanup skipped: releasing the finalizer"
            );
            publish(
                ctx,
                obj,
                EventType::Warning,
                "CleanupSkipped",
                format!("{SKIP_CLEANUP}=true: finalizer {fin} removed without cleanup"),
            );
            release(ctx, info, obj, pref).await?;
            Prepared::Done(Action::await_change())
        }
        (true, true) => Prepared::Decide(Entry::Cleanup),
        (true, false) => Prepared::Done(Action::await_change()),
        (false, true) => Prepared::Decide(Entry::Reconcile),
        (false, false) => {
            finalizers.push(fin.clone());
            set_finalizers(ctx, info, obj, pref, finalizers).await?;
            // The first decision is owed: the finalizer's echo on the watch brings it (an
            // echo of the host's own write triggers only what is owed), unless the echo
            // came already: then now.
            let key = crate::expect::triggers::key_of(pref.namespace.as_deref(), &pref.name);
            if ctx.expectations.park(&ctx.triggers, key, &pref.uid) {
                Prepared::Done(Action::requeue(std::time::Duration::ZERO))
            } else {
                Prepared::Done(Action::await_change())
            }
        }
    })
}

/// After a cleanup with nothing left to do: removes the plugin's finalizer.
pub async fn release(
    ctx: &Context,
    info: &PluginInfo,
    obj: &DynamicObject,
    pref: &PrimaryRef,
) -> Result<(), kube::Error> {
    let fin = info.finalizer.clone().unwrap_or_default();
    let rest: Vec<String> = obj
        .metadata
        .finalizers
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|f| *f != fin)
        .collect();
    set_finalizers(ctx, info, obj, pref, rest).await
}

/// Removes `finalizer` from every primary of `info`'s kind (in `namespace`, or all), for a
/// plugin that no longer declares it: a new version without it, or a deleted WasmPlugin.
/// Otherwise those objects could never be deleted. Each patch carries the object's
/// resourceVersion; a conflict is retried on a fresh read. Returns how many were released.
/// The host reads (`reader`, which may list the kind); the plugin writes (`writer`, its own
/// ServiceAccount, which may patch its primaries when it declared a finalizer).
pub async fn release_everywhere(
    reader: &kube::Client,
    writer: &kube::Client,
    info: &PluginInfo,
    finalizer: &str,
    namespace: Option<&str>,
) -> Result<usize, kube::Error> {
    let list = api_for(reader, &info.primary, namespace);
    let mut released = 0;
    for obj in list.list(&Default::default()).await?.items {
        let name = obj.metadata.name.clone().unwrap_or_default();
        let ns = obj.metadata.namespace.clone();
        let api = api_for(writer, &info.primary, ns.as_deref());
        let reread = api_for(reader, &info.primary, ns.as_deref());
        let by_name = kube::api::ListParams::default().fields(&format!("metadata.name={name}"));
        let mut current = obj;
        for _attempt in 0..5 {
            let finalizers = current.metadata.finalizers.clone().unwrap_or_default();
            if !finalizers.iter().any(|f| f == finalizer) {
                break;
            }
            let rest: Vec<String> = finalizers.into_iter().filter(|f| f != finalizer).collect();
            match patch_finalizers(&api, &name, &rest, &current).await {
                Ok(_) => {
                    released += 1;
                    break;
                }
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    match reread.list(&by_name).await?.items.into_iter().next() {
                        Some(fresh) => current = fresh,
                        None => break,
                    }
                }
                Err(kube::Error::Api(s)) if s.code == 404 => break,
                Err(e) => return Err(e),
            }
        }
    }
    Ok(released)
}
