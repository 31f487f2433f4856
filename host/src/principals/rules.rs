//! The RBAC a plugin needs, derived from what it declares: the rules of its own
//! ServiceAccount (what its plans do) and, separately, the reads the host makes for it
//! (watching its primary and related kinds).

use std::collections::BTreeSet;
use std::fmt;

use crate::runtime::{KindRef, PluginInfo, Verb};

/// One RBAC rule: verbs on a resource (or subresource) of an API group.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rule {
    /// API group (empty for the core group).
    pub group: String,
    /// Resource, or `resource/subresource`.
    pub resource: String,
    /// Verbs, as RBAC spells them.
    pub verbs: BTreeSet<&'static str>,
    /// Whether the resource is cluster-scoped (needs a ClusterRole).
    pub cluster_scoped: bool,
}

impl Rule {
    fn new(kind: &KindRef, sub: Option<&str>, verbs: &[&'static str]) -> Rule {
        Rule {
            group: kind.group.clone(),
            resource: match sub {
                Some(s) => format!("{}/{s}", kind.plural),
                None => kind.plural.clone(),
            },
            verbs: verbs.iter().copied().collect(),
            cluster_scoped: !kind.namespaced,
        }
    }

    /// The resource without its subresource, and the subresource.
    pub fn resource_parts(&self) -> (&str, Option<&str>) {
        match self.resource.split_once('/') {
            Some((r, s)) => (r, Some(s)),
            None => (&self.resource, None),
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let group = if self.group.is_empty() {
            "\"\""
        } else {
            &self.group
        };
        let verbs: Vec<&str> = self.verbs.iter().copied().collect();
        write!(f, "{} {} [{}]", group, self.resource, verbs.join(","))
    }
}

/// Adds `rule`, merging verbs into a rule of the same resource.
fn add(rules: &mut Vec<Rule>, rule: Rule) {
    match rules
        .iter_mut()
        .find(|r| r.group == rule.group && r.resource == rule.resource)
    {
        Some(r) => r.verbs.extend(rule.verbs),
        None => rules.push(rule),
    }
}

/// The Events kind every plugin's plans (and the host's reports about them) write.
pub fn events_kind() -> KindRef {
    KindRef {
        group: "events.k8s.io".into(),
        version: "v1".into(),
        kind: "Event".into(),
        plural: "events".into(),
        namespaced: true,
    }
}

/// What the plugin's own ServiceAccount needs: its declared verbs (`get` too where it
/// patches or updates: the host reads an object before applying to it, to refuse an
/// adoption), its primary's status, its Events, `update` on the primary's finalizers (the
/// controller references the host sets block the owner's deletion, which the API server
/// allows only to who may set the owner's finalizers) and `patch` on the primary when it
/// declares a finalizer or outbound hosts (the answers to its requests are kept on the
/// primary). `adopt` is the host's own verb and never a rule.
pub fn plugin_rules(info: &PluginInfo) -> Vec<Rule> {
    let mut rules = Vec::new();
    let mut owns_children = false;
    for p in &info.permissions {
        let mut verbs: Vec<&'static str> = p
            .verbs
            .iter()
            .filter(|v| **v != Verb::Adopt)
            .map(|v| v.as_str())
            .collect();
        if p.verbs.contains(&Verb::Patch) || p.verbs.contains(&Verb::Update) {
            verbs.push("get");
        }
        if verbs.is_empty() {
            continue;
        }
        if p.kind.namespaced && (p.verbs.contains(&Verb::Create) || p.verbs.contains(&Verb::Patch))
        {
            owns_children = true;
        }
        add(&mut rules, Rule::new(&p.kind, None, &verbs));
    }
    add(
        &mut rules,
        Rule::new(&info.primary, Some("status"), &["patch"]),
    );
    if owns_children {
        add(
            &mut rules,
            Rule::new(&info.primary, Some("finalizers"), &["update"]),
        );
    }
    if info.finalizer.is_some() || !info.outbound_hosts.is_empty() {
        add(&mut rules, Rule::new(&info.primary, None, &["patch"]));
    }
    add(
        &mut rules,
        Rule::new(&events_kind(), None, &["create", "patch"]),
    );
    rules
}

/// What the host's own ServiceAccount needs to run the plugin: list and watch its primary
/// kind and every related kind (get too for a referenced one: it reads the objects
/// primaries name, watching only the kind's metadata), and patch the objects of owned kinds (it labels owned
/// objects made before it labelled what it makes with their controller,
/// [`crate::shards::migrate`]); with `sharding`, patch the primaries too (the shard labels:
/// the assignment, the drain and its acknowledgement, owned objects following their owner
/// to its new shard).
pub fn host_rules(info: &PluginInfo, sharding: bool) -> Vec<Rule> {
    let mut rules = Vec::new();
    let watch: &[&'static str] = &["list", "watch"];
    let label: &[&'static str] = &["list", "watch", "patch"];
    add(
        &mut rules,
        Rule::new(&info.primary, None, if sharding { label } else { watch }),
    );
    let read: &[&'static str] = &["get", "list", "watch"];
    for r in &info.relations {
        let verbs = match r.selection {
            crate::runtime::Selection::Owned => label,
            crate::runtime::Selection::Namespace => watch,
            crate::runtime::Selection::Referenced(_) => read,
        };
        add(&mut rules, Rule::new(&r.kind, None, verbs));
    }
    rules
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{Permission, Relation, Selection};

    fn primary() -> KindRef {
        KindRef {
            group: "app.example.com".into(),
            version: "v1alpha1".into(),
            kind: "PodReplica".into(),
            plural: "podreplicas".into(),
            namespaced: true,
        }
    }

    fn info(perms: Vec<Permission>, finalizer: bool) -> PluginInfo {
        PluginInfo {
            name: "podreplica".into(),
            version: "1".into(),
            primary: primary(),
            crd: None,
            relations: vec![Relation {
                name: "pods".into(),
                kind: KindRef::pod(),
                selection: Selection::Owned,
                label_selector: None,
                fields: None,
            }],
            permissions: perms,
            finalizer: finalizer.then(|| "example.com/cleanup".into()),
            webhooks: Default::default(),
            outbound_hosts: Vec::new(),
        }
    }

    fn shown(rules: &[Rule]) -> Vec<String> {
        rules.iter().map(Rule::to_string).collect()
    }

    #[test]
    fn plan_verbs_status_events_and_the_owner_finalizers() {
        let i = info(
            vec![Permission {
                kind: KindRef::pod(),
                verbs: vec![Verb::Create, Verb::Delete],
            }],
            false,
        );
        assert_eq!(
            shown(&plugin_rules(&i)),
            [
                "\"\" pods [create,delete]",
                "app.example.com podreplicas/status [patch]",
                "app.example.com podreplicas/finalizers [update]",
                "events.k8s.io events [create,patch]",
            ]
        );
        assert_eq!(
            shown(&host_rules(&i, false)),
            [
                "app.example.com podreplicas [list,watch]",
                "\"\" pods [list,patch,watch]"
            ],
            "the host labels owned pods made before it labelled them"
        );
        // Sharded, the host labels the primaries too.
        assert_eq!(
            shown(&host_rules(&i, true)),
            [
                "app.example.com podreplicas [list,patch,watch]",
                "\"\" pods [list,patch,watch]"
            ]
        );
    }

    #[test]
    fn patch_brings_get_adopt_is_no_rule_and_a_finalizer_needs_patch() {
        let cm = KindRef {
            kind: "ConfigMap".into(),
            plural: "configmaps".into(),
            ..KindRef::pod()
        };
        let i = info(
            vec![Permission {
                kind: cm,
                verbs: vec![Verb::Patch, Verb::Adopt],
            }],
            true,
        );
        let rules = shown(&plugin_rules(&i));
        assert_eq!(rules[0], "\"\" configmaps [get,patch]");
        assert!(rules.contains(&"app.example.com podreplicas [patch]".to_string()));
        assert!(!rules.iter().any(|r| r.contains("adopt")));
    }

    #[test]
    fn cluster_scoped_kinds_are_marked() {
        let ns = KindRef {
            kind: "Namespace".into(),
            plural: "namespaces".into(),
            namespaced: false,
            ..KindRef::pod()
        };
        let i = info(
            vec![Permission {
                kind: ns,
                verbs: vec![Verb::Create],
            }],
            false,
        );
        let r = plugin_rules(&i);
        assert!(r[0].cluster_scoped);
        assert!(!r[1].cluster_scoped);
        // Only namespaced children need the owner's finalizers.
        assert!(!r.iter().any(|r| r.resource.ends_with("/finalizers")));
    }
}
