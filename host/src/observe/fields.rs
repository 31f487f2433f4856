//! Which parts of a related object a guest sees: `apiVersion`, `kind`, `metadata` and the
//! paths its plugin declared (`Relation::fields`), and how an object is cut down to them.
//! A decision's cost is mostly the guest parsing its input, and a pod's spec and status are
//! most of a pod: a plugin that reads a pod's phase gets its phase, not its containers.

use std::collections::BTreeMap;

use serde_json::Value;

/// Kept keys: `None` keeps everything below the key, `Some` only its own kept keys.
type Tree = BTreeMap<String, Option<Node>>;

/// The kept keys below one key.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Node(Tree);

/// The parts of objects a cache keeps and a guest sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fields {
    /// Whole objects.
    Whole,
    /// `apiVersion`, `kind`, `metadata` and the declared paths.
    Paths(Node),
}

/// Keys every guest view keeps: an object's identity and metadata.
const ALWAYS: [&str; 3] = ["apiVersion", "kind", "metadata"];

impl Node {
    fn insert(&mut self, keys: &[&str]) {
        let Some((first, rest)) = keys.split_first() else {
            return;
        };
        if rest.is_empty() {
            self.0.insert(first.to_string(), None);
            return;
        }
        match self
            .0
            .entry(first.to_string())
            .or_insert_with(|| Some(Node::default()))
        {
            None => {} // already kept whole
            Some(below) => below.insert(rest),
        }
    }

    fn covers(&self, other: &Node) -> bool {
        other.0.iter().all(|(key, theirs)| match self.0.get(key) {
            None => false,
            Some(None) => true,
            Some(Some(ours)) => theirs.as_ref().is_some_and(|t| ours.covers(t)),
        })
    }

    fn merge(&mut self, other: &Node) {
        for (key, theirs) in &other.0 {
            match (self.0.get_mut(key), theirs) {
                (None, _) => {
                    self.0.insert(key.clone(), theirs.clone());
                }
                (Some(None), _) => {}
                (Some(ours), None) => *ours = None,
                (Some(Some(ours)), Some(t)) => ours.merge(t),
            }
        }
    }

    fn keep(&self, value: Value) -> Value {
        match value {
            Value::Object(map) => Value::Object(
                map.into_iter()
                    .filter_map(|(k, v)| match self.0.get(&k)? {
                        None => Some((k, v)),
                        Some(below) => Some((k, below.keep(v))),
                    })
                    .collect(),
            ),
            Value::Array(items) => Value::Array(items.into_iter().map(|v| self.keep(v)).collect()),
            scalar => scalar,
        }
    }
}

impl Fields {
    /// The view a relation declares: `None` whole objects, else the identity, the metadata
    /// and the given paths (assumed checked by [`crate::runtime::validate::check_path`]).
    pub fn declared(paths: Option<&[String]>) -> Fields {
        let Some(paths) = paths else {
            return Fields::Whole;
        };
        let mut node = Node::default();
        for key in ALWAYS {
            node.insert(&[key]);
        }
        for path in paths {
            node.insert(&path.split('.').collect::<Vec<_>>());
        }
        Fields::Paths(node)
    }

    /// The view `relation` declares (its `fields`).
    pub fn of(relation: &crate::runtime::Relation) -> Fields {
        Fields::declared(relation.fields.as_deref())
    }

    /// Whether an object cut to `self` holds everything `other` keeps.
    pub fn covers(&self, other: &Fields) -> bool {
        match (self, other) {
            (Fields::Whole, _) => true,
            (Fields::Paths(_), Fields::Whole) => false,
            (Fields::Paths(ours), Fields::Paths(theirs)) => ours.covers(theirs),
        }
    }

    /// The smallest view that covers both.
    pub fn union(&self, other: &Fields) -> Fields {
        match (self, other) {
            (Fields::Paths(a), Fields::Paths(b)) => {
                let mut merged = a.clone();
                merged.merge(b);
                Fields::Paths(merged)
            }
            _ => Fields::Whole,
        }
    }

    /// `object` cut down to this view.
    pub fn project(&self, object: Value) -> Value {
        match self {
            Fields::Whole => object,
            Fields::Paths(node) => node.keep(object),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paths(p: &[&str]) -> Fields {
        Fields::declared(Some(&p.iter().map(|s| s.to_string()).collect::<Vec<_>>()))
    }

    fn pod() -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "a", "labels": {"x": "y"}},
            "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "i"}, {"name": "d", "image": "j"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1",
                "conditions": [{"type": "Ready", "status": "True", "lastProbeTime": null}]}})
    }

    #[test]
    fn keeps_identity_metadata_and_the_declared_paths_through_lists() {
        let seen = paths(&["status.phase", "spec.containers.image"]).project(pod());
        assert_eq!(
            seen,
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "a", "labels": {"x": "y"}},
                "spec": {"containers": [{"image": "i"}, {"image": "j"}]},
                "status": {"phase": "Running"}})
        );
        // No paths: the metadata only. No declaration: the whole object.
        assert_eq!(
            paths(&[]).project(pod()),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "labels": {"x": "y"}}})
        );
        assert_eq!(Fields::Whole.project(pod()), pod());
        // A path to what the object lacks keeps nothing; a prefix keeps the whole subtree.
        assert_eq!(
            paths(&["status", "status.phase", "spec.missing.deeper"]).project(pod())["status"],
            pod()["status"]
        );
        assert_eq!(
            paths(&["spec.missing.deeper"]).project(pod())["spec"],
            json!({})
        );
    }

    #[test]
    fn union_covers_both_and_projects_like_declaring_both() {
        let a = paths(&["status.phase"]);
        let b = paths(&["status.conditions", "spec.nodeName"]);
        let u = a.union(&b);
        assert!(u.covers(&a) && u.covers(&b) && u.covers(&paths(&[])));
        assert!(!a.covers(&b) && !b.covers(&a) && !u.covers(&Fields::Whole));
        assert_eq!(
            u,
            paths(&["status.phase", "status.conditions", "spec.nodeName"])
        );
        assert_eq!(
            u.project(pod()),
            paths(&["spec.nodeName", "status.conditions", "status.phase"]).project(pod())
        );
        assert!(paths(&["status"]).covers(&a) && !a.covers(&paths(&["status"])));
        assert_eq!(a.union(&Fields::Whole), Fields::Whole);
        assert!(Fields::Whole.covers(&u));
        // Projecting to a covering view and then to the narrower one is the narrower view.
        assert_eq!(a.project(u.project(pod())), a.project(pod()));
    }
}
