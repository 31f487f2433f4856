//! Declared kinds resolved through API discovery: a declared kind is what the API server
//! says it is.
//!
//! Once per offered version, before it can become active (off the hot path), the host asks
//! the API server which resources each group version the version declares serves
//! ([`discover`], one discovery request per group version) and checks every declared kind,
//! the primary's, each relation's and each permission's, against the answer ([`check`]):
//! - a served resource of the declared plural, or a served kind of the declared name, must
//!   be exactly the declared kind, plural and scope (`KindMismatch`): `{kind: Blob, plural:
//!   secrets}` would be packed, recorded and guarded as `Blob` while its requests read and
//!   write Secrets, so it is refused, and so is `{kind: Secret, plural: blobs}`;
//! - every relation's kind must be served (`KindNotServed`): the host could not list or
//!   watch it, and a cache that never lists holds back every decision of the plugin;
//! - the primary kind must be served unless the version declares its CRD (the host or an
//!   admin installs it; `validate_crd` checked that it defines exactly the declared kind);
//! - a permission may name a kind that is not served (a plan's request for it then fails
//!   with 404: there is no resource it could alias).
//!
//! A version that passes declares every served kind under its real group, version, kind,
//! plural and scope, so the resource a declared kind names is the resolved one: the guard
//! (`plan::guard`) and the recorder (`rollout::record`) judge it.

use std::collections::HashMap;

use kube::Client;
use kube::core::GroupVersion;
use kube::discovery::{ApiCapabilities, ApiResource, Scope};

use crate::runtime::{KindRef, PluginInfo};

/// The resources of one group version, subresources left out, as discovery lists them.
pub type Resources = Vec<(ApiResource, ApiCapabilities)>;

/// What discovery answered for each group version a plugin version declares.
#[derive(Debug, Clone, Default)]
pub struct Served {
    /// Resources per (group, version); `None`: the group version is not served.
    versions: HashMap<(String, String), Option<Resources>>,
}

impl Served {
    /// Records what the API server serves in `group`/`version` (`None`: nothing, the group
    /// version is unknown to it).
    pub fn insert(&mut self, group: &str, version: &str, resources: Option<Resources>) {
        self.versions
            .insert((group.to_string(), version.to_string()), resources);
    }

    /// The served resource a request for `k` goes to (the declared plural), or else the
    /// served resource of the declared kind name.
    pub fn resolve(&self, k: &KindRef) -> Option<&(ApiResource, ApiCapabilities)> {
        let served = self
            .versions
            .get(&(k.group.clone(), k.version.clone()))?
            .as_deref()?;
        let by_plural = served.iter().find(|(ar, _)| ar.plural == k.plural);
        by_plural.or_else(|| served.iter().find(|(ar, _)| ar.kind == k.kind))
    }
}

/// Why a declared kind was refused; the message names the kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KindError {
    /// The declaration names a served resource under another kind, plural or scope.
    #[error("{what} declares {declared}, but the API server serves {served}")]
    Mismatch {
        /// Which declaration (`relation \`pods\``, `the primary kind`, `a permission`).
        what: String,
        /// The kind as declared.
        declared: String,
        /// The resource the API server serves under that plural or kind name.
        served: String,
    },
    /// The API server does not serve the kind at all.
    #[error(
        "{what} declares {declared}, which the API server does not serve (is its CRD installed?): the host could not list or watch it"
    )]
    NotServed {
        /// Which declaration.
        what: String,
        /// The kind as declared.
        declared: String,
    },
}

fn shown(api_version: &str, kind: &str, plural: &str, namespaced: bool) -> String {
    let scope = if namespaced {
        "namespaced"
    } else {
        "cluster-scoped"
    };
    format!("{api_version} {kind} (resource `{plural}`, {scope})")
}

/// Every kind `info` declares: which declaration, the kind, and whether it must be served.
fn declared(info: &PluginInfo) -> impl Iterator<Item = (String, &KindRef, bool)> {
    let primary = std::iter::once(("the primary kind".to_string(), &info.primary, true));
    let relations = info
        .relations
        .iter()
        .map(|r| (format!("relation `{}`", r.name), &r.kind, true));
    let permissions = info
        .permissions
        .iter()
        .map(|p| ("a permission".to_string(), &p.kind, false));
    primary.chain(relations).chain(permissions)
}

/// Asks the API server which resources each group version `info` declares serves.
pub async fn discover(client: &Client, info: &PluginInfo) -> Result<Served, kube::Error> {
    let mut served = Served::default();
    for (_, k, _) in declared(info) {
        if served
            .versions
            .contains_key(&(k.group.clone(), k.version.clone()))
        {
            continue;
        }
        let gv = GroupVersion::gv(&k.group, &k.version);
        let resources = match kube::discovery::pinned_group(client, &gv).await {
            Ok(group) => Some(group.versioned_resources(&k.version)),
            Err(kube::Error::Api(s)) if s.code == 404 => None,
            Err(e) => return Err(e),
        };
        served.insert(&k.group, &k.version, resources);
    }
    Ok(served)
}

/// Checks every kind `info` declares against what `served` says (the rules of the module
/// docs); the first refusal names the declaration and the kind.
pub fn check(info: &PluginInfo, served: &Served) -> Result<(), KindError> {
    for (what, k, must_be_served) in declared(info) {
        let declared = || shown(&k.api_version(), &k.kind, &k.plural, k.namespaced);
        match served.resolve(k) {
            Some((ar, caps)) => {
                let namespaced = caps.scope == Scope::Namespaced;
                if ar.kind != k.kind || ar.plural != k.plural || namespaced != k.namespaced {
                    return Err(KindError::Mismatch {
                        what,
                        declared: declared(),
                        served: shown(&ar.api_version, &ar.kind, &ar.plural, namespaced),
                    });
                }
            }
            None if must_be_served => {
                return Err(KindError::NotServed {
                    what,
                    declared: declared(),
                });
            }
            None => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
