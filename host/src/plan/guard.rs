//! The guard: before anything is sent, a plan is checked against what its plugin declared
//! and against the host's own rules. A plan passes whole or not at all.
//!
//! Rules (the `rule` of a [`Violation`]): `max-actions`, `protected` (RBAC objects,
//! ServiceAccounts, Secrets, WasmPlugins, the host's own ConfigMaps and Leases: never,
//! whatever the plugin declares; judged by the kind the object names and by the resource
//! its request goes to, so `{kind: Blob, plural: secrets}` is Secrets: see `protected`),
//! `undeclared` (kind or verb not in the plugin's permissions), `cluster-scoped` (a
//! namespace on a cluster-scoped object), `namespace` (outside the primary's namespace),
//! `own-pod` (the host's own pod), `owner-reference` (an ownerReference to anything but the
//! primary), `delete-budget` (too many deletions of objects the plugin does not own in the
//! last minute), `malformed` (an object without what the API needs). Two more are judged when the plan is carried out, since they need the
//! cluster: `adoption` (an apply to an existing object that the primary does not control,
//! unless the plugin declares `adopt` on its kind; see the executor) and `api-server` (the
//! API server refused a write: RBAC of the plugin's ServiceAccount, Pod Security, ...).
//!
//! Kubernetes RBAC is the boundary (each plugin acts as its own ServiceAccount); the guard
//! is the early refusal that says which rule, before anything is sent.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::runtime::{Action, KindRef, ObjectRef, Plan, PluginInfo, Verb};

/// Limits and identity the guard enforces.
#[derive(Debug, Clone)]
pub struct GuardConfig {
    /// Largest number of actions in one plan.
    pub max_actions: usize,
    /// Deletions per plugin per minute of objects the plugin does not own.
    pub foreign_deletes_per_minute: usize,
    /// The host's own pod (namespace, name), from the downward API.
    pub own_pod: Option<(String, String)>,
    /// The host's namespace (its uploads and its Lease live there): ConfigMaps named
    /// `wasmplugin-*` and Leases in it are the host's own.
    pub host_namespace: Option<String>,
}

impl Default for GuardConfig {
    fn default() -> Self {
        GuardConfig {
            max_actions: 500,
            foreign_deletes_per_minute: 30,
            own_pod: None,
            host_namespace: None,
        }
    }
}

/// Why a plan was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("plan rejected by rule `{rule}`: {detail}")]
pub struct Violation {
    /// The rule that refused it.
    pub rule: &'static str,
    /// What exactly.
    pub detail: String,
}

impl Violation {
    /// A violation of `rule`.
    pub fn new(rule: &'static str, detail: impl Into<String>) -> Violation {
        Violation {
            rule,
            detail: detail.into(),
        }
    }
}

fn violation(rule: &'static str, detail: impl Into<String>) -> Violation {
    Violation::new(rule, detail)
}

/// One checked step, ready for the executor.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Create an object with a generated name (POST).
    Create {
        /// Its kind.
        kind: KindRef,
        /// The object, namespace and owner reference filled in.
        object: Value,
    },
    /// Server-side apply of a named object.
    Apply {
        /// Its kind.
        kind: KindRef,
        /// The object, namespace and owner reference filled in.
        object: Value,
    },
    /// Delete with a UID precondition (when the plan gave one).
    Delete {
        /// Its kind.
        kind: KindRef,
        /// The target.
        target: ObjectRef,
    },
}

/// The primary object a plan is about.
#[derive(Debug, Clone)]
pub struct PrimaryRef {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// Name.
    pub name: String,
    /// Namespace (absent for cluster-scoped primaries).
    pub namespace: Option<String>,
    /// UID.
    pub uid: String,
}

impl PrimaryRef {
    /// Reads the reference from the primary object.
    pub fn of(primary: &Value) -> Option<PrimaryRef> {
        let s = |p: &str| {
            primary
                .pointer(p)
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        Some(PrimaryRef {
            api_version: s("/apiVersion")?,
            kind: s("/kind")?,
            name: s("/metadata/name")?,
            namespace: s("/metadata/namespace"),
            uid: s("/metadata/uid")?,
        })
    }

    fn controller_reference(&self) -> Value {
        json!({"apiVersion": self.api_version, "kind": self.kind, "name": self.name,
               "uid": self.uid, "controller": true, "blockOwnerDeletion": true})
    }
}

/// Checks plans; keeps the per-plugin deletion budget.
#[derive(Debug)]
pub struct Guard {
    cfg: GuardConfig,
    foreign_deletes: Mutex<HashMap<String, VecDeque<Instant>>>,
}

fn find_kind<'a>(info: &'a PluginInfo, api_version: &str, kind: &str) -> Option<&'a KindRef> {
    info.permissions
        .iter()
        .map(|p| &p.kind)
        .find(|k| k.matches(api_version, kind))
}

impl Guard {
    /// A guard with these limits.
    pub fn new(cfg: GuardConfig) -> Self {
        Guard {
            cfg,
            foreign_deletes: Mutex::default(),
        }
    }

    /// A pod of the host: its own, or another of its Deployment's (in its namespace, named
    /// like it up to the ReplicaSet's hash and the pod's suffix: `wasmop-7d9f8c6b5-x2x9z`
    /// makes `wasmop-*` the host's, every replica and every ReplicaSet of a rollout).
    /// Judged by the resource (core `pods`) as well as by the kind's name.
    fn is_own_pod(&self, kind: &KindRef, ns: Option<&str>, name: &str) -> bool {
        let Some((own_ns, own)) = self.cfg.own_pod.as_ref() else {
            return false;
        };
        let deployment = own.rsplitn(3, '-').nth(2).filter(|d| !d.is_empty());
        kind.group.is_empty()
            && (kind.kind == "Pod" || kind.plural == "pods")
            && Some(own_ns.as_str()) == ns
            && (own == name
                || deployment.is_some_and(|d| {
                    name.strip_prefix(d)
                        .is_some_and(|rest| rest.starts_with('-'))
                }))
    }

    fn check_namespace(
        &self,
        kind: &KindRef,
        ns: Option<&str>,
        primary: &PrimaryRef,
    ) -> Result<(), Violation> {
        if !kind.namespaced && ns.is_some() {
            return Err(violation(
                "cluster-scoped",
                format!(
                    "{} is cluster-scoped and cannot be given namespace `{}`",
                    kind.kind,
                    ns.unwrap_or_default()
                ),
            ));
        }
        if kind.namespaced && ns.is_some() && ns != primary.namespace.as_deref() {
            return Err(violation(
                "namespace",
                format!(
                    "{} in namespace `{}`, outside the primary's namespace `{}`",
                    kind.kind,
                    ns.unwrap_or_default(),
                    primary.namespace.as_deref().unwrap_or_default()
                ),
            ));
        }
        Ok(())
    }

    fn prepare_object(
        &self,
        info: &PluginInfo,
        primary: &PrimaryRef,
        mut object: Value,
    ) -> Result<Step, Violation> {
        let s = |p: &str| {
            object
                .pointer(p)
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let (api_version, kind_name) = match (s("/apiVersion"), s("/kind")) {
            (Some(a), Some(k)) => (a, k),
            _ => {
                return Err(violation(
                    "malformed",
                    "applied object without apiVersion or kind",
                ));
            }
        };
        let name = s("/metadata/name");
        let generate = s("/metadata/generateName");
        let ns = s("/metadata/namespace");
        self.check_protected(
            info,
            &api_version,
            &kind_name,
            ns.as_deref().or(primary.namespace.as_deref()),
            name.as_deref(),
        )?;
        let kind = find_kind(info, &api_version, &kind_name)
            .ok_or_else(|| {
                violation(
                    "undeclared",
                    format!("kind {api_version} {kind_name} is not declared"),
                )
            })?
            .clone();
        self.check_protected_resource(
            info,
            &kind,
            ns.as_deref().or(primary.namespace.as_deref()),
            name.as_deref(),
        )?;
        self.check_namespace(&kind, ns.as_deref(), primary)?;
        let create = name.is_none();
        if create && generate.is_none() {
            return Err(violation(
                "malformed",
                format!("{kind_name} without name or generateName"),
            ));
        }
        let verb = if create { Verb::Create } else { Verb::Patch };
        if !info.allows(&api_version, &kind_name, verb) {
            return Err(violation(
                "undeclared",
                format!("verb `{}` on {kind_name} is not declared", verb.as_str()),
            ));
        }
        if let Some(n) = &name
            && self.is_own_pod(&kind, ns.as_deref().or(primary.namespace.as_deref()), n)
        {
            return Err(violation(
                "own-pod",
                format!("plan touches the host's own pod `{n}`"),
            ));
        }
        let refs = object["metadata"]
            .get("ownerReferences")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if let Some(foreign) = refs
            .iter()
            .find(|r| r.get("uid").and_then(Value::as_str) != Some(primary.uid.as_str()))
        {
            return Err(violation(
                "owner-reference",
                format!(
                    "{kind_name} names owner {} {} (uid {}): a plugin may only reference its primary",
                    foreign["kind"].as_str().unwrap_or("?"),
                    foreign["name"].as_str().unwrap_or("?"),
                    foreign["uid"].as_str().unwrap_or("none")
                ),
            ));
        }
        if kind.namespaced {
            object["metadata"]["namespace"] = json!(primary.namespace);
            if !refs
                .iter()
                .any(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
            {
                let mut refs = refs;
                refs.push(primary.controller_reference());
                object["metadata"]["ownerReferences"] = Value::Array(refs);
            }
        }
        Ok(if create {
            Step::Create { kind, object }
        } else {
            Step::Apply { kind, object }
        })
    }

    /// Checks `plan` of plugin `info` for `primary`. `owned_uids` are the UIDs of objects
    /// the primary controls (deleting others spends the budget). On success the steps come
    /// back in plan order, with namespaces and owner references filled in.
    pub fn check(
        &self,
        info: &PluginInfo,
        primary: &PrimaryRef,
        plan: &Plan,
        owned_uids: &HashSet<String>,
    ) -> Result<Vec<Step>, Violation> {
        if plan.actions.len() > self.cfg.max_actions {
            return Err(violation(
                "max-actions",
                format!(
                    "{} actions, at most {} allowed",
                    plan.actions.len(),
                    self.cfg.max_actions
                ),
            ));
        }
        let mut steps = Vec::with_capacity(plan.actions.len());
        let mut foreign = 0;
        for action in &plan.actions {
            match action {
                Action::Apply(object) => {
                    steps.push(self.prepare_object(info, primary, object.clone())?)
                }
                Action::Delete(target) => {
                    self.check_protected(
                        info,
                        &target.api_version,
                        &target.kind,
                        target.namespace.as_deref().or(primary.namespace.as_deref()),
                        Some(&target.name),
                    )?;
                    let kind = find_kind(info, &target.api_version, &target.kind)
                        .ok_or_else(|| {
                            violation(
                                "undeclared",
                                format!(
                                    "kind {} {} is not declared",
                                    target.api_version, target.kind
                                ),
                            )
                        })?
                        .clone();
                    self.check_protected_resource(
                        info,
                        &kind,
                        target.namespace.as_deref().or(primary.namespace.as_deref()),
                        Some(&target.name),
                    )?;
                    if !info.allows(&target.api_version, &target.kind, Verb::Delete) {
                        return Err(violation(
                            "undeclared",
                            format!("verb `delete` on {} is not declared", target.kind),
                        ));
                    }
                    self.check_namespace(&kind, target.namespace.as_deref(), primary)?;
                    let ns = target.namespace.as_deref().or(primary.namespace.as_deref());
                    if self.is_own_pod(&kind, ns, &target.name) {
                        return Err(violation(
                            "own-pod",
                            format!("plan deletes the host's own pod `{}`", target.name),
                        ));
                    }
                    if !target.uid.as_ref().is_some_and(|u| owned_uids.contains(u)) {
                        foreign += 1;
                    }
                    let mut target = target.clone();
                    if kind.namespaced {
                        target.namespace = primary.namespace.clone();
                    }
                    steps.push(Step::Delete { kind, target });
                }
            }
        }
        if foreign > 0 {
            self.spend_budget(&info.name, foreign)?;
        }
        Ok(steps)
    }

    fn spend_budget(&self, plugin: &str, n: usize) -> Result<(), Violation> {
        let mut all = self.foreign_deletes.lock().expect("budget lock");
        let window = all.entry(plugin.to_string()).or_default();
        let now = Instant::now();
        while window
            .front()
            .is_some_and(|t| now.duration_since(*t) > Duration::from_secs(60))
        {
            window.pop_front();
        }
        let limit = self.cfg.foreign_deletes_per_minute;
        if window.len() + n > limit {
            return Err(violation(
                "delete-budget",
                format!(
                    "{n} deletion(s) of objects the plugin does not own; {} of {limit} per minute already spent",
                    window.len()
                ),
            ));
        }
        window.extend(std::iter::repeat_n(now, n));
        Ok(())
    }
}

mod protected;
#[cfg(test)]
mod tests;
