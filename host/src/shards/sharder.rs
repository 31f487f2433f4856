//! The sharder's pass over the objects of one kind, and a shard's acknowledgement of a
//! drain, as API calls. A pass lists the objects' metadata, decides each one's move
//! ([`super::assign::decide`]) and writes it as a label patch that carries the
//! resourceVersion it decided on, so a decision made on a stale read fails (409) and waits
//! for the next pass instead of overriding a shard's acknowledgement.

use std::collections::BTreeMap;

use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::json;

use super::assign::{DRAIN_LABEL, Move, SHARD_LABEL, decide};
use super::ring::Ring;

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Pass {
    /// Objects seen.
    pub objects: usize,
    /// Objects labelled for a shard, by shard.
    pub assigned: BTreeMap<String, usize>,
    /// Objects whose live shard was asked to let go.
    pub drained: usize,
    /// Writes that lost a race with another writer (retried by the next pass).
    pub conflicts: usize,
}

fn label<'a>(labels: Option<&'a BTreeMap<String, String>>, key: &str) -> Option<&'a str> {
    labels.and_then(|l| l.get(key)).map(String::as_str)
}

/// The API of `ar`'s objects in `namespace` (all namespaces when `None`).
pub fn api_of(
    client: &kube::Client,
    ar: &ApiResource,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    }
}

/// One pass over the objects of kind `ar` in `namespace` (all when `None`; restricted by
/// `selector`, if any), given the ring's `live` members.
pub async fn pass(
    client: &kube::Client,
    ar: &ApiResource,
    namespace: Option<&str>,
    selector: Option<&str>,
    live: &[String],
) -> Result<Pass, kube::Error> {
    let api = api_of(client, ar, namespace);
    let ring = Ring::new(live, super::ring::DEFAULT_VNODES);
    let mut lp = ListParams::default();
    if let Some(s) = selector {
        lp = lp.labels(s);
    }
    let mut out = Pass::default();
    for obj in api.list_metadata(&lp).await?.items {
        out.objects += 1;
        let m = &obj.metadata;
        let (Some(name), Some(uid)) = (m.name.as_deref(), m.uid.as_deref()) else {
            continue;
        };
        let labels = m.labels.as_ref();
        let owner = label(labels, SHARD_LABEL);
        let draining = label(labels, DRAIN_LABEL).is_some();
        let patch = match decide(uid, owner, draining, live, &ring) {
            Move::Stay => continue,
            Move::Assign(shard) => {
                *out.assigned.entry(shard.clone()).or_default() += 1;
                json!({"metadata": {"resourceVersion": m.resource_version,
                    "labels": {SHARD_LABEL: shard, DRAIN_LABEL: null}}})
            }
            Move::Drain => {
                out.drained += 1;
                json!({"metadata": {"resourceVersion": m.resource_version,
                    "labels": {DRAIN_LABEL: "true"}}})
            }
        };
        match api_of(client, ar, m.namespace.as_deref())
            .patch_metadata(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => out.conflicts += 1,
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// A shard lets go of object `name` (read at `resource_version`) that it was asked to
/// drain: it removes both labels, after which the sharder may give the object to its new
/// shard. Called only once the shard no longer reconciles the object.
pub async fn acknowledge(
    api: &Api<DynamicObject>,
    name: &str,
    resource_version: Option<&str>,
) -> Result<(), kube::Error> {
    let patch = json!({"metadata": {"resourceVersion": resource_version,
        "labels": {SHARD_LABEL: null, DRAIN_LABEL: null}}});
    api.patch_metadata(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
}
