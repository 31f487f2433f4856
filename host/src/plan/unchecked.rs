//! TESTS ONLY (`--unsafe-disable-guard`): the [`Checker`] that turns a plan into steps
//! without any of the guard's checks, so that a test can show what the API server, acting
//! on the plugin's ServiceAccount, refuses on its own. The host picks it at startup in place
//! of the guard; the reconcile path does not know which one it asks. Kinds the plugin did
//! not declare are found by discovery; nothing is filled in but the primary's namespace
//! where an object has none.

use kube::Client;
use kube::core::GroupVersionKind;
use kube::discovery::{Scope, pinned_kind};
use serde_json::Value;

use std::collections::HashSet;

use futures::future::BoxFuture;

use crate::plan::Checker;
use crate::plan::guard::{PrimaryRef, Step, Violation};
use crate::runtime::{Action, KindRef, Plan, PluginInfo};

/// Plans as steps, unchecked; kinds by discovery with the host's client.
pub struct Unchecked {
    /// The host's client (discovery only).
    pub client: Client,
}

impl Checker for Unchecked {
    fn steps<'a>(
        &'a self,
        info: &'a PluginInfo,
        primary: &'a PrimaryRef,
        plan: &'a Plan,
        _owned_uids: &'a HashSet<String>,
    ) -> BoxFuture<'a, Result<Vec<Step>, Violation>> {
        Box::pin(steps(&self.client, info, primary, plan))
    }

    fn checks_adoption(&self) -> bool {
        false
    }
}

async fn kind_of(
    client: &Client,
    info: &PluginInfo,
    api_version: &str,
    kind: &str,
) -> Result<KindRef, Violation> {
    if let Some(p) = info
        .permissions
        .iter()
        .find(|p| p.kind.matches(api_version, kind))
    {
        return Ok(p.kind.clone());
    }
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (ar, caps) = pinned_kind(client, &gvk)
        .await
        .map_err(|e| Violation::new("malformed", format!("{api_version} {kind}: {e}")))?;
    Ok(KindRef {
        group: ar.group,
        version: ar.version,
        kind: ar.kind,
        plural: ar.plural,
        namespaced: caps.scope == Scope::Namespaced,
    })
}

/// The plan's actions as steps, unchecked.
async fn steps(
    client: &Client,
    info: &PluginInfo,
    primary: &PrimaryRef,
    plan: &Plan,
) -> Result<Vec<Step>, Violation> {
    let mut steps = Vec::with_capacity(plan.actions.len());
    for action in &plan.actions {
        match action {
            Action::Apply(object) => {
                let mut object = object.clone();
                let s = |p: &str| {
                    object
                        .pointer(p)
                        .and_then(Value::as_str)
                        .map(str::to_string)
                };
                let (Some(api_version), Some(kind_name)) = (s("/apiVersion"), s("/kind")) else {
                    return Err(Violation::new("malformed", "no apiVersion or kind"));
                };
                let kind = kind_of(client, info, &api_version, &kind_name).await?;
                let create = s("/metadata/name").is_none();
                if kind.namespaced && s("/metadata/namespace").is_none() {
                    object["metadata"]["namespace"] = serde_json::json!(primary.namespace);
                }
                steps.push(if create {
                    Step::Create { kind, object }
                } else {
                    Step::Apply { kind, object }
                });
            }
            Action::Delete(target) => {
                let kind = kind_of(client, info, &target.api_version, &target.kind).await?;
                let mut target = target.clone();
                if kind.namespaced && target.namespace.is_none() {
                    target.namespace = primary.namespace.clone();
                }
                steps.push(Step::Delete { kind, target });
            }
        }
    }
    Ok(steps)
}
