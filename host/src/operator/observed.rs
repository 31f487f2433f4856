//! What one decision observes: the primary and its related objects from the caches,
//! trimmed for the guest, with the time and a seed.

use std::collections::{BTreeMap, HashSet};

use kube::api::DynamicObject;
use kube::runtime::reflector::ObjectRef;
use serde_json::{Value, json};

use super::context::Context;
use super::guard::PrimaryRef;
use crate::observe::{in_relation, is_controlled_by, may_relate, trim_for_guest};
use crate::runtime::Observed;

/// The primary as JSON (with apiVersion and kind) and its reference.
pub fn primary_of(ctx: &Context, obj: &DynamicObject) -> Result<(Value, PrimaryRef), String> {
    let mut primary = serde_json::to_value(obj).map_err(|e| e.to_string())?;
    primary["apiVersion"] = json!(ctx.primary.api_version);
    primary["kind"] = json!(ctx.primary.kind);
    let pref = PrimaryRef::of(&primary).ok_or("primary object without name or uid")?;
    Ok((primary, pref))
}

/// The related objects of `primary` from the caches, per relation, trimmed for the guest.
/// Objects of another namespace, of another owner or outside the label selector are skipped
/// on their metadata before they are serialised ([`may_relate`]); the rest is decided by
/// the same [`in_relation`] check the offline commands use, once per object.
fn related_of(
    ctx: &Context,
    primary: &Value,
    ns: Option<&str>,
) -> Result<BTreeMap<String, Vec<Value>>, String> {
    let mut related: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let uid = primary
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    for cache in &ctx.related {
        let selector = cache.selector.as_ref().map_err(Clone::clone)?;
        let chosen = related.entry(cache.relation.name.clone()).or_default();
        // An owned relation reads only the objects its index lists for this primary.
        let candidates = match &cache.owners {
            Some(index) => index
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
            None => cache.store.state(),
        };
        for obj in candidates {
            if cache.relation.kind.namespaced && obj.metadata.namespace.as_deref() != ns {
                continue;
            }
            if !may_relate(&cache.relation, selector, uid, &obj.metadata) {
                continue;
            }
            let Ok(mut v) = serde_json::to_value(&*obj) else {
                continue;
            };
            v["apiVersion"] = json!(cache.resource.api_version);
            v["kind"] = json!(cache.resource.kind);
            if in_relation(&cache.relation, selector, primary, &v) {
                chosen.push(trim_for_guest(v));
            }
        }
    }
    Ok(related)
}

/// The observed value of one decision, and the UIDs of the related objects the primary
/// controls (the guard's notion of "owned").
pub fn observe(
    ctx: &Context,
    primary: &Value,
    pref: &PrimaryRef,
) -> Result<(Observed, HashSet<String>), String> {
    let related = related_of(ctx, primary, pref.namespace.as_deref())?;
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
    Ok((observed, owned))
}
