//! What one decision observes: the primary and its related objects from the caches,
//! trimmed for the guest, with the time and a seed.

use std::collections::{BTreeMap, HashSet};

use kube::api::DynamicObject;
use kube::runtime::reflector::ObjectRef;
use serde_json::{Value, json};

use crate::cache::guest_view::guest_json;
use crate::cache::owners::controller_uid;
use crate::observe::select::referenced_names;
use crate::observe::{relates_by_metadata, trim_for_guest};
use crate::plan::guard::PrimaryRef;
use crate::reconcile::context::Context;
use crate::runtime::{Observed, Selection};

/// The primary as JSON (with apiVersion and kind) and its reference.
pub fn primary_of(ctx: &Context, obj: &DynamicObject) -> Result<(Value, PrimaryRef), String> {
    let mut primary = serde_json::to_value(obj).map_err(|e| e.to_string())?;
    primary["apiVersion"] = json!(ctx.primary.api_version);
    primary["kind"] = json!(ctx.primary.kind);
    // The answers the host keeps on the primary reach the guest as `observed.answers`.
    crate::effects::held::strip(&mut primary);
    let pref = PrimaryRef::of(&primary).ok_or("primary object without name or uid")?;
    Ok((primary, pref))
}

/// Related objects as JSON text, by relation name.
type Related = BTreeMap<String, Vec<String>>;

/// The related objects of `primary` from the caches, per relation, as the guest's JSON
/// text (packed once per object version at ingest), and the UIDs of those it controls.
/// The cache holds objects of the relation's kind only, so [`relates_by_metadata`] gives
/// the answer the offline commands get from `in_relation` (a unit test holds the two to
/// the same answers).
fn related_of(
    ctx: &Context,
    primary: &Value,
    uid: &str,
    ns: Option<&str>,
) -> Result<(Related, HashSet<String>), String> {
    let mut related: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut owned = HashSet::new();
    for cache in &ctx.related {
        let selector = cache.selector.as_ref().map_err(Clone::clone)?;
        let chosen = related.entry(cache.relation.name.clone()).or_default();
        // An owned relation reads only the objects its index lists for this primary.
        let candidates = match &cache.relation.selection {
            Selection::Owned => cache
                .owners
                .controlled_by(uid)
                .into_iter()
                .filter_map(|(ns, name)| {
                    let r = ObjectRef::new_with(&name, cache.resource.clone());
                    cache.store.get(&match ns {
                        Some(ns) => r.within(&ns),
                        None => r,
                    })
                })
                .collect(),
            Selection::Namespace => cache.store.state(),
            // The objects it names, read into the cache before this decision.
            Selection::Referenced(to) => {
                referenced_names(to, cache.relation.kind.namespaced, primary)
                    .into_iter()
                    .filter_map(|(ns, name)| {
                        let r = ObjectRef::new_with(&name, cache.resource.clone());
                        cache.store.get(&match ns {
                            Some(ns) => r.within(&ns),
                            None => r,
                        })
                    })
                    .collect()
            }
        };
        for obj in candidates {
            if !relates_by_metadata(&cache.relation, selector, uid, ns, &obj.metadata) {
                continue;
            }
            let Some(text) = guest_json(&obj) else {
                continue;
            };
            if controller_uid(&obj).as_deref() == Some(uid)
                && let Some(u) = &obj.metadata.uid
            {
                owned.insert(u.clone());
            }
            chosen.push(text.to_string());
        }
    }
    Ok((related, owned))
}

/// The observed value of one decision, and the UIDs of the related objects the primary
/// controls (the guard's notion of "owned").
pub fn observe(
    ctx: &Context,
    primary: &Value,
    pref: &PrimaryRef,
) -> Result<(Observed, HashSet<String>), String> {
    let (related_json, owned) = related_of(ctx, primary, &pref.uid, pref.namespace.as_deref())?;
    let observed = Observed {
        primary: trim_for_guest(primary.clone()),
        related: Default::default(),
        related_json,
        now_unix_ms: jiff::Timestamp::now().as_millisecond(),
        seed: rand::random(),
        ..Observed::default()
    };
    Ok((observed, owned))
}
