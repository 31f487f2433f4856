//! The guard's `protected` rule: objects no plugin may write, whatever it declares (RBAC
//! objects, ServiceAccounts, WasmPlugins, the host's plugin uploads, Leases and Secrets),
//! and Secrets elsewhere unless the plugin declares them (a permission on the Secrets
//! resource: then its verbs decide, as for any kind).
//!
//! Judged twice: by the group and kind the object names, before the kind is looked up
//! among the declared ones (an undeclared Secret is `protected`, not `undeclared`), and by
//! the resource a request for the declared kind goes to, its group and plural. The plural
//! is what the API server was asked about when the version was offered (discovery refuses
//! a kind declared under another resource's plural, `k8s::kinds::served`), so a kind
//! named `Blob` whose plural is `secrets` is Secrets here too.

use crate::plan::guard::{Guard, KindRef, Violation, violation};
use crate::runtime::PluginInfo;

/// Whether `info` declares a permission on Secrets by their own name (core group, kind
/// `Secret`, plural `secrets`): a kind declared under another name for the resource is no
/// declaration of Secrets, and stays protected.
fn declares_secrets(info: &PluginInfo) -> bool {
    info.permissions
        .iter()
        .any(|p| p.kind.group.is_empty() && p.kind.plural == "secrets" && p.kind.kind == "Secret")
}

impl Guard {
    /// Objects no plugin may ever write, whatever it declares, judged by the object's
    /// `apiVersion` and `kind` (before the kind is looked up among the declared ones).
    pub(super) fn check_protected(
        &self,
        info: &PluginInfo,
        api_version: &str,
        kind: &str,
        ns: Option<&str>,
        name: Option<&str>,
    ) -> Result<(), Violation> {
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        self.check_protected_as(declares_secrets(info), group, kind, None, ns, name)
    }

    /// The same judged by the resource a request for the declared `kind` goes to (its
    /// group and plural): a kind declared under another name is the resource it names.
    pub(super) fn check_protected_resource(
        &self,
        info: &PluginInfo,
        kind: &KindRef,
        ns: Option<&str>,
        name: Option<&str>,
    ) -> Result<(), Violation> {
        let secrets = declares_secrets(info);
        self.check_protected_as(
            secrets,
            &kind.group,
            &kind.kind,
            Some(&kind.plural),
            ns,
            name,
        )
    }

    fn check_protected_as(
        &self,
        secrets_declared: bool,
        group: &str,
        kind: &str,
        plural: Option<&str>,
        ns: Option<&str>,
        name: Option<&str>,
    ) -> Result<(), Violation> {
        let host_ns = self.cfg.host_namespace.as_deref();
        let in_host_ns = host_ns.is_some() && ns == host_ns;
        // The kind by its name, or the resource by its plural.
        let is = |k: &str, p: &str| kind == k || plural == Some(p);
        let why = match group {
            "rbac.authorization.k8s.io" => Some("RBAC objects"),
            "wasmop.dev" => Some("the host's WasmPlugins"),
            "" if is("ServiceAccount", "serviceaccounts") => Some("ServiceAccounts"),
            // The host's own (pull secrets, keys, its webhook certificate) whatever is
            // declared; elsewhere those of a plugin that declares them.
            "" if is("Secret", "secrets") && in_host_ns => {
                Some("the Secrets of the host's namespace")
            }
            "" if is("Secret", "secrets") && !secrets_declared => {
                Some("Secrets unless it declares them")
            }
            "" if is("ConfigMap", "configmaps")
                && in_host_ns
                && name.is_some_and(|n| n.starts_with("wasmplugin-")) =>
            {
                Some("the host's plugin uploads")
            }
            "coordination.k8s.io" if is("Lease", "leases") && in_host_ns => {
                Some("the host's Leases")
            }
            _ => None,
        };
        match why {
            Some(what) => Err(violation(
                "protected",
                format!(
                    "{kind} {}: no plugin may write {what}",
                    name.unwrap_or("(generated)")
                ),
            )),
            None => Ok(()),
        }
    }
}
