//! Objects a decision asks for that no relation selects (`plan.requires`, contract 0.4.0):
//! read with the plugin's own identity (its ServiceAccount must be allowed to `get` them by
//! name or `list` them by labels), trimmed as related objects are, and handed to the next
//! decision of the same reconcile. Read, not watched: a change to them does not wake the
//! primary. A reconcile decides again at most [`MAX_ROUNDS`] times for them.

use std::collections::BTreeMap;

use kube::Client;
use kube::api::{DynamicObject, ListParams};
use serde_json::Value;

use crate::k8s::kinds::api_for;
use crate::observe::trim_for_guest;
use crate::runtime::types::{Matching, Requirement};

/// How many times one reconcile decides again with objects its plan asked for.
pub const MAX_ROUNDS: usize = 3;

/// Reads what `requirements` select, by requirement name, as `client` (the plugin's
/// identity); namespaced kinds default to `namespace` (the primary's).
pub async fn read(
    client: &Client,
    requirements: &[Requirement],
    namespace: Option<&str>,
) -> Result<BTreeMap<String, Vec<Value>>, String> {
    let mut out = BTreeMap::new();
    for r in requirements {
        let ns = if r.kind.namespaced {
            r.namespace.as_deref().or(namespace)
        } else {
            None
        };
        let api = api_for(client, &r.kind, ns);
        let failed = |e: kube::Error| {
            format!(
                "requirement `{}`: cannot read {} {:?}: {e}",
                r.name, r.kind.kind, r.matching
            )
        };
        let objects: Vec<DynamicObject> = match &r.matching {
            Matching::Name(name) => api
                .get_opt(name)
                .await
                .map_err(failed)?
                .into_iter()
                .collect(),
            Matching::Labels(selector) => {
                api.list(&ListParams::default().labels(selector))
                    .await
                    .map_err(failed)?
                    .items
            }
        };
        let values = objects
            .into_iter()
            .map(|mut o| {
                o.types = Some(kube::api::TypeMeta {
                    api_version: r.kind.api_version(),
                    kind: r.kind.kind.clone(),
                });
                serde_json::to_value(o).map(trim_for_guest)
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        out.insert(r.name.clone(), values);
    }
    Ok(out)
}
