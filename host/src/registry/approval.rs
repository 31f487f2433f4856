//! Approval of an offered version, active or candidate, once it loaded and before anything
//! changes (off the hot path: once per version). Three questions to the API server, in
//! order; the first refusal is the verdict, a [`Rejection`] whose message names the kind or
//! the rule:
//! 0. Its relations' label selectors parse as the API server parses them (`InvalidInfo`).
//! 1. Its kinds, resolved through discovery (`k8s::kinds::served`): a kind declared
//!    under another resource's plural or scope is `KindMismatch`; a primary kind or a
//!    relation to a kind the API server does not serve (a missing CRD) is `KindNotServed`,
//!    but for a primary kind whose CRD the plugin declares on a host that installs CRDs:
//!    the host installs it first.
//! 2. The host's own reads (`principals::host_reads`): list and watch (sharded: patch) of
//!    the primary kind and each related kind, where the host watches; `HostCannotWatch`.
//! 3. The plugin's own ServiceAccount holds every rule the version declares
//!    (`principals::review`); `PermissionsMissing`.
//!
//! A question the API server did not answer is `KindsUnchecked` or `PermissionsUnchecked`.
//! A refused version leaves the running one deciding. Every refusal but `KindMismatch`
//! ends once an admin installs the CRD or grants the RBAC: the version's source offers it
//! again ([`crate::registry::sources::waits_for_permissions`]).

use kube::Client;

use crate::k8s::kinds::served;
use crate::principals::identity::Principals;
use crate::principals::{host_reads, review};
use crate::registry::refusal::{Reason, Rejection};
use crate::runtime::PluginInfo;

/// Approves `info`, or says why not (module docs): the questions are asked with `reviewer`
/// (the host's own client), about the plugins' ServiceAccounts named by `principals`, in
/// namespace `ns` (`None`: cluster-wide); a sharding host also patches what it watches.
pub(crate) async fn approve(
    reviewer: &Client,
    principals: &Principals,
    (ns, sharding, installer): (Option<&str>, bool, Option<&Client>),
    info: &PluginInfo,
) -> Result<(), Rejection> {
    // Selectors as the API server parses them: one it refuses would leave the version's
    // caches waiting for ever.
    for relation in &info.relations {
        crate::observe::selector_of(relation)
            .map_err(|e| Rejection::new(Reason::InvalidInfo, e))?;
    }
    let unchecked = |what: &str, e: kube::Error| {
        Rejection::new(
            Reason::KindsUnchecked,
            format!(
                "could not ask the API server about {what} of {} {}: {e}",
                info.name, info.version
            ),
        )
    };
    let mut found = served::discover(reviewer, info)
        .await
        .map_err(|e| unchecked("the kinds", e))?;
    // A primary kind not served whose CRD the plugin declares: installed now by a host
    // that installs CRDs (`--install-crds`), else refused below (`KindNotServed`).
    if let (Some(installer), Some(crd)) = (installer, &info.crd)
        && found.resolve(&info.primary).is_none()
    {
        crate::k8s::crds::install_crd(installer, crd)
            .await
            .map_err(|e| {
                Rejection::new(
                    Reason::KindNotServed,
                    format!("installing the CRD {} declares: {e:#}", info.name),
                )
            })?;
        found = served::discover(reviewer, info)
            .await
            .map_err(|e| unchecked("the kinds", e))?;
    }
    served::check(info, &found).map_err(|e| {
        let reason = match e {
            served::KindError::Mismatch { .. } => Reason::KindMismatch,
            served::KindError::NotServed { .. } => Reason::KindNotServed,
        };
        Rejection::new(reason, e.to_string())
    })?;
    let lacking = host_reads::missing(reviewer, info, sharding, ns)
        .await
        .map_err(|e| unchecked("the host's reads (SelfSubjectAccessReview)", e))?;
    if !lacking.is_empty() {
        return Err(Rejection::new(
            Reason::HostCannotWatch,
            host_reads::report(info, &lacking, sharding, ns),
        ));
    }
    let naming = principals.naming();
    let missing = review::missing(reviewer, naming, info, ns)
        .await
        .map_err(|e| {
            Rejection::new(
                Reason::PermissionsUnchecked,
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
        Reason::PermissionsMissing,
        review::report(naming, &info.name, &missing, ns),
    ))
}
