//! Owned objects belong to the shard of their controller, whatever their labels say. A
//! shard caches the owned objects labelled for it ([`crate::shards::scope`]); the labels
//! are the host's, but anyone who may edit the objects may edit them (the admission policy
//! that guards them is optional). Relabelled, an owned object would leave the shard's cache
//! as if it were deleted, and the next decision would make another. [`Custody`] is asked
//! before the cache lets one go: an object that still exists, whose controller this shard
//! holds (read from the API server, not a cache), is labelled for this shard again and kept
//! in the cache, so no decision ever sees it missing. It also mends an edited controller
//! label, by which a shard that takes the controller over finds what it controls.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use futures::future::BoxFuture;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::core::{GroupVersionKind, ObjectMeta};
use kube::discovery::{Scope, pinned_kind};
use serde_json::json;

use crate::cache::shared::Custodian;
use crate::k8s::fence::is_fenced_off;
use crate::k8s::kinds::api_for;
use crate::runtime::{Relation, Selection};
use crate::shards::assign::SHARD_LABEL;
use crate::shards::scope::{CONTROLLER_LABEL, shard_selector};

/// How often a departure is looked at again when the API server fails to answer.
const ATTEMPTS: u32 = 3;

/// The custody of one shard's owned objects.
pub struct Custody {
    client: Client,
    shard: String,
    /// The controllers' kinds, resolved through discovery once each: the resource and
    /// whether it is namespaced.
    kinds: Mutex<HashMap<GroupVersionKind, (ApiResource, bool)>>,
}

/// What happened to an object that left the shard's cache.
#[derive(Debug, PartialEq, Eq)]
enum Departure {
    /// Gone, going, or not this shard's: let it go.
    Left,
    /// Still there and put back for this shard (now, or by someone else already).
    Kept,
    /// Changed between the read and the relabel: look again.
    Raced,
}

fn labelled<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.labels.as_ref()?.get(key).map(String::as_str)
}

/// The controlling owner reference of an object.
fn controller(
    meta: &ObjectMeta,
) -> Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference> {
    meta.owner_references
        .as_deref()?
        .iter()
        .find(|o| o.controller == Some(true))
}

impl Custody {
    /// The custody of `shard`'s owned objects, reading and writing through `client` (the
    /// shard's fenced client: a shard that lost its Lease relabels nothing).
    pub fn new(client: Client, shard: String) -> Custody {
        Custody {
            client,
            shard,
            kinds: Mutex::default(),
        }
    }

    /// The API of the controller `owner` of an object in `namespace`.
    async fn owners_api(
        &self,
        owner: &k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
        namespace: Option<&str>,
    ) -> Result<Api<DynamicObject>, kube::Error> {
        let (group, version) = match owner.api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", owner.api_version.as_str()),
        };
        let gvk = GroupVersionKind::gvk(group, version, &owner.kind);
        let known = self.lock().get(&gvk).cloned();
        let (resource, namespaced) = match known {
            Some(k) => k,
            None => {
                let (resource, caps) = pinned_kind(&self.client, &gvk).await?;
                let k = (resource, caps.scope == Scope::Namespaced);
                self.lock().insert(gvk, k.clone());
                k
            }
        };
        Ok(match (namespaced, namespace) {
            (true, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, &resource),
            _ => Api::all_with(self.client.clone(), &resource),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<GroupVersionKind, (ApiResource, bool)>> {
        self.kinds.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One look at an object that left the cache of `relation` (`object` as the watch last
    /// showed it inside the selection).
    async fn look(
        &self,
        relation: &Relation,
        object: &DynamicObject,
    ) -> Result<Departure, kube::Error> {
        let meta = &object.metadata;
        let (Some(name), Some(owner)) = (meta.name.as_deref(), controller(meta)) else {
            return Ok(Departure::Left);
        };
        if meta.deletion_timestamp.is_some() {
            return Ok(Departure::Left);
        }
        // Both read at once: the object as it is now, and its controller (is it this
        // shard's?). A takeover by another shard, the common case, is told by the second.
        let api = api_for(&self.client, &relation.kind, meta.namespace.as_deref());
        let owners = self.owners_api(owner, meta.namespace.as_deref()).await?;
        let (now, held) = futures::try_join!(
            api.get_metadata_opt(name),
            owners.get_metadata_opt(&owner.name)
        )?;
        let Some(now) = now.map(|n| n.metadata) else {
            return Ok(Departure::Left);
        };
        if now.uid != meta.uid || now.deletion_timestamp.is_some() {
            return Ok(Departure::Left);
        }
        let held = held.is_some_and(|o| {
            o.metadata.uid.as_deref() == Some(owner.uid.as_str())
                && labelled(&o.metadata, SHARD_LABEL) == Some(self.shard.as_str())
        });
        if !held {
            return Ok(Departure::Left);
        }
        if labelled(&now, SHARD_LABEL) == Some(self.shard.as_str()) {
            return Ok(Departure::Kept);
        }
        // Put back with the version read as the precondition: a change since is looked at again.
        let back = json!({"metadata": {
            "resourceVersion": now.resource_version,
            "labels": {SHARD_LABEL: self.shard, CONTROLLER_LABEL: owner.uid}}});
        match api
            .patch_metadata(name, &PatchParams::default(), &Patch::Merge(&back))
            .await
        {
            Ok(_) => {
                tracing::info!(
                    kind = %relation.kind.kind, object = %name, label = ?labelled(&now, SHARD_LABEL),
                    "an owned object relabelled away: taken back (its controller is this shard's)"
                );
                Ok(Departure::Kept)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Departure::Raced),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(Departure::Left),
            Err(e) => Err(e),
        }
    }
}

impl Custodian for Custody {
    fn covers(&self, relation: &Relation) -> bool {
        relation.selection == Selection::Owned
            && relation.label_selector.as_deref().is_some_and(|s| {
                s.split(',')
                    .any(|t| t.trim() == shard_selector(&self.shard))
            })
    }

    fn keeps<'a>(
        &'a self,
        relation: &'a Relation,
        object: &'a DynamicObject,
    ) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            for attempt in 1..=ATTEMPTS {
                match self.look(relation, object).await {
                    Ok(Departure::Kept) => return true,
                    Ok(Departure::Left) => return false,
                    Ok(Departure::Raced) => continue,
                    // This shard may not write (its Lease is lost or its write was cut off):
                    // it decides nothing either until it starts afresh.
                    Err(e) if is_fenced_off(&e) => return false,
                    Err(e) if attempt < ATTEMPTS => {
                        tracing::debug!(error = %e, "looking at an owned object that left: again");
                        tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await;
                    }
                    Err(e) => {
                        tracing::warn!(
                            error = %e, object = ?object.metadata.name,
                            "could not tell whether an owned object that left this shard's cache was relabelled; letting it go"
                        );
                    }
                }
            }
            false
        })
    }

    fn arrived(&self, relation: &Relation, object: &DynamicObject) {
        let meta = &object.metadata;
        let Some(owner) = controller(meta) else {
            return;
        };
        if meta.deletion_timestamp.is_some()
            || labelled(meta, CONTROLLER_LABEL) == Some(owner.uid.as_str())
        {
            return;
        }
        let Some(name) = meta.name.clone() else {
            return;
        };
        let api = api_for(&self.client, &relation.kind, meta.namespace.as_deref());
        let mend = json!({"metadata": {
            "resourceVersion": meta.resource_version,
            "labels": {CONTROLLER_LABEL: owner.uid}}});
        let kind = relation.kind.kind.clone();
        // Not on the watch's path: a change since comes as an event and is looked at then.
        tokio::spawn(async move {
            match api
                .patch_metadata(&name, &PatchParams::default(), &Patch::Merge(&mend))
                .await
            {
                Ok(_) => {
                    tracing::info!(%kind, object = %name, "an owned object's controller label edited: mended")
                }
                Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {}
                Err(e) => {
                    tracing::warn!(%kind, object = %name, error = %e, "could not mend an owned object's controller label")
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shards::scope::relation_for;

    use crate::runtime::pod_relation as pods;

    #[tokio::test]
    async fn only_the_shards_own_selection_of_owned_objects_is_in_its_custody() {
        let client =
            Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap();
        let custody = Custody::new(client, "a".into());
        let owned = pods(Selection::Owned, Some("app=x"));
        assert!(custody.covers(&relation_for(&owned, Some("a"))));
        assert!(
            !custody.covers(&relation_for(&owned, Some("b"))),
            "another shard's"
        );
        assert!(!custody.covers(&owned), "not narrowed to a shard");
        let everyone = pods(Selection::Namespace, Some("shard.wasmop.dev/owner=a"));
        assert!(!custody.covers(&everyone), "a namespace-wide relation");
    }
}
