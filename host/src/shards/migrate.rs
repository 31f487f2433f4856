//! Objects made before the host labelled what it makes. The caches of owned relations hold
//! only objects labelled with their controller ([`CONTROLLER_LABEL`]) and, sharded, with
//! their shard ([`crate::shards::assign::SHARD_LABEL`]): an owned object made by a host that
//! did not label it (an older host, or one without sharding) would never show in them, and
//! its owner would make it again. So it is labelled first:
//! - without sharding, once per kind when a controller starts, before its first decision
//!   ([`label_controlled`] with the controller label missing);
//! - sharded, on each leadership term before the sharder assigns anything of a plugin
//!   ([`label_unsharded`]): the owners of such objects are returned, and their first
//!   assignment carries the handover annotation, so their shard takes the objects over
//!   (relabel, then expect them in its caches) before it decides.

use std::collections::HashSet;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use serde::Deserialize;
use serde_json::json;

use crate::k8s::kinds::api_resource;
use crate::runtime::{KindRef, PluginInfo, Selection};
use crate::shards::assign::SHARD_LABEL;
use crate::shards::scope::CONTROLLER_LABEL;
use crate::shards::sharder::api_of;

/// What [`label_controlled`] found.
#[derive(Debug, Default, PartialEq)]
pub struct Labelled {
    /// The UIDs of the primaries that control the objects found.
    pub owners: HashSet<String>,
    /// The objects it labelled (namespace, name, UID).
    pub objects: Vec<(Option<String>, String, String)>,
}

/// A metadata list as the labelling reads it: of each object only what it needs (the
/// managed fields, most of the bytes, are skipped unread).
#[derive(Deserialize)]
struct Unlabelled {
    /// `null` when there is none.
    items: Option<Vec<Item>>,
}

#[derive(Deserialize)]
struct Item {
    metadata: Meta,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta {
    #[serde(default)]
    name: String,
    namespace: Option<String>,
    #[serde(default)]
    uid: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    owner_references: Vec<OwnerReference>,
}

/// Finds the objects of `kind` (in `namespace`, or all) without the label `missing` whose
/// controller is a `primary`, and labels each with its controller's UID where it does not
/// carry it yet (writes through `client`: fenced, only the leader labels). One list of the metadata
/// of every object of the kind that lacks the label.
pub async fn label_controlled(
    client: &kube::Client,
    kind: &KindRef,
    primary: &KindRef,
    namespace: Option<&str>,
    missing: &str,
) -> Result<Labelled, kube::Error> {
    let mut found = Labelled::default();
    let api_version = primary.api_version();
    let ar = api_resource(kind);
    // Served whole from the API server's watch cache, as client-go's informers list: in
    // pages, the 19,000 unrelated pods of the start benchmark take three times as long.
    // Objects made by a host that did not label are older than that cache's lag.
    let unlabelled = ListParams::default()
        .labels(&format!("!{missing}"))
        .match_any();
    let url = <DynamicObject as kube::Resource>::url_path(&ar, namespace);
    let request = kube::core::Request::new(url)
        .list_metadata(&unlabelled)
        .map_err(kube::Error::BuildRequest)?;
    let started = std::time::Instant::now();
    let listed: Unlabelled = client.request(request).await?;
    let listed = listed.items.unwrap_or_default();
    tracing::debug!(kind = %kind.kind, objects = listed.len(), took = ?started.elapsed(),
        "listed the objects without the label");
    for obj in listed {
        let m = &obj.metadata;
        let Some(owner) = m.owner_references.iter().find(|o| {
            o.controller == Some(true) && o.kind == primary.kind && o.api_version == api_version
        }) else {
            continue;
        };
        found.owners.insert(owner.uid.clone());
        let carries = m.labels.get(CONTROLLER_LABEL) == Some(&owner.uid);
        if carries {
            continue;
        }
        let name = m.name.clone();
        let patch = json!({"metadata": {"labels": {CONTROLLER_LABEL: owner.uid}}});
        match api_of(client, &ar, m.namespace.as_deref())
            .patch_metadata(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => continue,
            Err(e) => return Err(e),
        }
        found
            .objects
            .push((m.namespace.clone(), name, m.uid.clone()));
    }
    Ok(found)
}

/// Labels the objects of `info`'s owned kinds (in `namespace`, or all) that carry no
/// shard label with the UID of the primary that controls them; returns those primaries'
/// UIDs.
pub async fn label_unsharded(
    client: &kube::Client,
    info: &PluginInfo,
    namespace: Option<&str>,
) -> Result<HashSet<String>, kube::Error> {
    let mut owners = HashSet::new();
    for relation in info
        .relations
        .iter()
        .filter(|r| r.selection == Selection::Owned)
    {
        let found = label_controlled(
            client,
            &relation.kind,
            &info.primary,
            namespace,
            SHARD_LABEL,
        )
        .await?;
        owners.extend(found.owners);
    }
    Ok(owners)
}
