//! The guard's `protected` rule: objects no plugin may write, whatever it declares (RBAC
//! objects, ServiceAccounts, Secrets, WasmPlugins, the host's plugin uploads and Leases).
//!
//! Judged twice: by the group and kind the object names, before the kind is looked up
//! among the declared ones (an undeclared Secret is `protected`, not `undeclared`), and by
//! the resource a request for the declared kind goes to, its group and plural. The plural
//! is what the API server was asked about when the version was offered (discovery refuses
//! a kind declared under another resource's plural, `k8s::kinds::served`), so a kind
//! named `Blob` whose plural is `secrets` is Secrets here too.

use crate::plan::guard::{Guard, KindRef, Violation, violation};

impl Guard {
    /// Objects no plugin may ever write, whatever it declares, judged by the object's
    /// `apiVersion` and `kind` (before the kind is looked up among the declared ones).
    pub(super) fn check_protected(
        &self,
        api_version: &str,
        kind: &str,
        ns: Option<&str>,
        name: Option<&str>,
    ) -> Result<(), Violation> {
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        self.check_protected_as(group, kind, None, ns, name)
    }

    /// The same judged by the resource a request for the declared `kind` goes to (its
    /// group and plural): a kind declared under another name is the resource it names.
    pub(super) fn check_protected_resource(
        &self,
        kind: &KindRef,
        ns: Option<&str>,
        name: Option<&str>,
    ) -> Result<(), Violation> {
        self.check_protected_as(&kind.group, &kind.kind, Some(&kind.plural), ns, name)
    }

    fn check_protected_as(
        &self,
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
            "" if is("Secret", "secrets") => Some("Secrets"),
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
