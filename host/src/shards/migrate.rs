//! Objects made before sharding was turned on: a plan's creates then carried no controller
//! label, so a shard's label-selected caches would never show them, and the shard that gets
//! their owner would make them again. On each leadership term, before it assigns anything
//! of a plugin, the sharder labels such objects (of each owned kind, controlled by one of
//! the plugin's primaries) with their controller's UID, and returns those owners: their
//! first assignment carries the handover annotation, so their shard takes the objects over
//! (relabel, then expect them in its caches) before it decides.

use std::collections::HashSet;

use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;

use crate::k8s::kinds::api_resource;
use crate::runtime::{PluginInfo, Selection};
use crate::shards::scope::CONTROLLER_LABEL;
use crate::shards::sharder::{api_of, list_paged};

/// Labels the unlabelled objects of `info`'s owned kinds (in `namespace`, or all) with
/// the UID of the primary that controls them; returns those primaries' UIDs.
pub async fn label_unsharded(
    client: &kube::Client,
    info: &PluginInfo,
    namespace: Option<&str>,
) -> Result<HashSet<String>, kube::Error> {
    let mut owners = HashSet::new();
    let api_version = info.primary.api_version();
    for relation in info
        .relations
        .iter()
        .filter(|r| r.selection == Selection::Owned)
    {
        let ar = api_resource(&relation.kind);
        let unlabelled = ListParams::default().labels(&format!("!{CONTROLLER_LABEL}"));
        for obj in list_paged(&api_of(client, &ar, namespace), &unlabelled).await? {
            let m = &obj.metadata;
            let Some(owner) = m.owner_references.iter().flatten().find(|o| {
                o.controller == Some(true)
                    && o.kind == info.primary.kind
                    && o.api_version == api_version
            }) else {
                continue;
            };
            let patch = json!({"metadata": {"labels": {CONTROLLER_LABEL: owner.uid}}});
            match api_of(client, &ar, m.namespace.as_deref())
                .patch_metadata(
                    m.name.as_deref().unwrap_or_default(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => continue,
                Err(e) => return Err(e),
            }
            owners.insert(owner.uid.clone());
        }
    }
    Ok(owners)
}
