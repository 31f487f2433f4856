//! Approval of an offered version, active or candidate, once it loaded and before anything
//! changes (off the hot path: once per version). Three questions to the API server, in
//! order; the first refusal is the verdict, a [`Rejection`] whose message names the kind or
//! the rule:
//! 1. Its kinds, resolved through discovery (`operator::kinds::served`): a kind declared
//!    under another resource's plural or scope is `KindMismatch`; a relation to a kind the
//!    API server does not serve (a missing CRD) is `KindNotServed`.
//! 2. The host's own reads (`principals::host_reads`): list and watch (sharded: patch) of
//!    the primary kind and each related kind, where the host watches; `HostCannotWatch`.
//! 3. The plugin's own ServiceAccount holds every rule the version declares
//!    (`principals::review`); `PermissionsMissing`.
//!
//! A question the API server did not answer is `KindsUnchecked` or `PermissionsUnchecked`.
//! A refused version leaves the running one deciding. Every refusal but `KindMismatch`
//! ends once an admin installs the CRD or grants the RBAC: the version's source offers it
//! again ([`super::sources::waits_for_permissions`]).

use super::manager::Rejection;
use crate::operator::controller::ControllerDeps;
use crate::operator::kinds::served;
use crate::principals::{host_reads, review};
use crate::runtime::PluginInfo;

/// Approves `info` for the host of `deps`, or says why not (module docs).
pub(crate) async fn approve(deps: &ControllerDeps, info: &PluginInfo) -> Result<(), Rejection> {
    let ns = deps.namespace.as_deref();
    let unchecked = |what: &str, e: kube::Error| {
        Rejection::new(
            "KindsUnchecked",
            format!(
                "could not ask the API server about {what} of {} {}: {e}",
                info.name, info.version
            ),
        )
    };
    let found = served::discover(&deps.reviewer, info)
        .await
        .map_err(|e| unchecked("the kinds", e))?;
    served::check(info, &found).map_err(|e| Rejection::new(e.reason(), e.to_string()))?;
    let sharding = deps.shard.is_some();
    let lacking = host_reads::missing(&deps.reviewer, info, sharding, ns)
        .await
        .map_err(|e| unchecked("the host's reads (SelfSubjectAccessReview)", e))?;
    if !lacking.is_empty() {
        return Err(Rejection::new(
            "HostCannotWatch",
            host_reads::report(info, &lacking, sharding, ns),
        ));
    }
    let naming = deps.principals.naming();
    let missing = review::missing(&deps.reviewer, naming, info, ns)
        .await
        .map_err(|e| {
            Rejection::new(
                "PermissionsUnchecked",
                format!(
                    "could not ask the API server what ServiceAccount {} may do (the host needs `create subjectaccessreviews`): {e}",
                    naming.user(&info.name)
                ),
            )
        })?;
    if missing.is_empty() {
        return Ok(());
    }
    Err(Rejection::new(
        "PermissionsMissing",
        review::report(naming, &info.name, &missing, ns),
    ))
}
