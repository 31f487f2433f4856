//! What a replica watches and how it marks what it writes. The host labels every object a
//! plan creates or applies of an owned kind with the controlling primary's UID
//! ([`CONTROLLER_LABEL`]), and the caches of `owned` relations hold only objects with that
//! label: a host beside thousands of unrelated objects of an owned kind (pods) neither lists
//! nor watches them. Objects made before (by a host that did not label) are labelled once
//! when the controller starts ([`crate::shards::migrate`]).
//!
//! Sharded, a shard's primary cache holds the objects labelled for it ([`SHARD_LABEL`]);
//! the caches of `owned` relations hold the owned objects labelled for it too, so a replica
//! caches only its share, and what a plan makes carries the shard's label beside the
//! controller's: that is how owned objects follow their owner when it moves (the new shard
//! finds them by the controller label and relabels them). Namespace-wide relations are not
//! narrowed: a plugin such as ChaosPod sees every pod of its namespace whatever made it.

use serde_json::{Value, json};

use crate::plan::guard::Step;
use crate::runtime::{KindRef, Relation, Selection};
use crate::shards::assign::SHARD_LABEL;

/// The label naming the UID of the primary that controls an owned object (set by the host
/// on what a plan creates or applies of an owned kind; its owned caches select on it).
pub const CONTROLLER_LABEL: &str = "shard.wasmop.dev/controller";

/// The annotation the sharder leaves on an object it moved from another shard (value: that
/// shard): the new shard takes over the owned objects before it decides, then removes it.
pub const HANDOVER_ANNOTATION: &str = "shard.wasmop.dev/handover";

/// The label selector of `shard`'s objects.
pub fn shard_selector(shard: &str) -> String {
    format!("{SHARD_LABEL}={shard}")
}

/// The label selector of the objects controlled by the primary with `uid`.
pub fn controller_selector(uid: &str) -> String {
    format!("{CONTROLLER_LABEL}={uid}")
}

/// `relation` as this replica's cache watches it: an owned relation narrowed to the objects
/// labelled with their controller, or sharded to `shard`'s label (either beside the
/// relation's own selector, if any); anything else as it is.
pub fn relation_for(relation: &Relation, shard: Option<&str>) -> Relation {
    let mut r = relation.clone();
    if relation.selection == Selection::Owned {
        let own = match shard {
            Some(shard) => shard_selector(shard),
            None => CONTROLLER_LABEL.to_string(),
        };
        r.label_selector = Some(match &relation.label_selector {
            Some(s) if !s.trim().is_empty() => format!("{s},{own}"),
            _ => own,
        });
    }
    r
}

/// Labels every object `steps` create or apply of an `owned` kind with the controlling
/// primary's `primary_uid` and, sharded, with `shard`.
pub fn label_steps(steps: &mut [Step], shard: Option<&str>, primary_uid: &str, owned: &[KindRef]) {
    for step in steps {
        let (Step::Create { kind, object } | Step::Apply { kind, object }) = step else {
            continue;
        };
        if !owned.contains(kind) {
            continue;
        }
        let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
            continue;
        };
        let labels = meta.entry("labels").or_insert_with(|| json!({}));
        if !labels.is_object() {
            *labels = json!({});
        }
        if let Some(shard) = shard {
            labels[SHARD_LABEL] = json!(shard);
        }
        labels[CONTROLLER_LABEL] = json!(primary_uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::ObjectRef;

    fn pods() -> KindRef {
        KindRef::pod()
    }

    fn relation(selection: Selection, selector: Option<&str>) -> Relation {
        Relation {
            name: "pods".into(),
            kind: pods(),
            selection,
            label_selector: selector.map(str::to_string),
            fields: None,
        }
    }

    #[test]
    fn only_owned_relations_are_narrowed_to_the_controller_label_or_the_shard() {
        let owned = relation(Selection::Owned, None);
        assert_eq!(
            relation_for(&owned, Some("a")).label_selector.as_deref(),
            Some("shard.wasmop.dev/owner=a")
        );
        let selected = relation(Selection::Owned, Some("app=x"));
        assert_eq!(
            relation_for(&selected, Some("a")).label_selector.as_deref(),
            Some("app=x,shard.wasmop.dev/owner=a")
        );
        let ns = relation(Selection::Namespace, Some("app=x"));
        assert_eq!(relation_for(&ns, Some("a")), ns);
        assert_eq!(relation_for(&ns, None), ns);
        assert_eq!(
            relation_for(&owned, None).label_selector.as_deref(),
            Some("shard.wasmop.dev/controller")
        );
        assert_eq!(
            relation_for(&selected, None).label_selector.as_deref(),
            Some("app=x,shard.wasmop.dev/controller")
        );
    }

    #[test]
    fn created_and_applied_objects_of_owned_kinds_are_labelled() {
        let cm = KindRef {
            kind: "ConfigMap".into(),
            plural: "configmaps".into(),
            ..pods()
        };
        let mut steps = vec![
            Step::Create {
                kind: pods(),
                object: json!({"metadata": {"generateName": "p-", "labels": {"app": "x"}}}),
            },
            Step::Apply {
                kind: pods(),
                object: json!({"metadata": {"name": "q"}}),
            },
            Step::Apply {
                kind: cm.clone(),
                object: json!({"metadata": {"name": "c"}}),
            },
            Step::Delete {
                kind: pods(),
                target: ObjectRef {
                    api_version: "v1".into(),
                    kind: "Pod".into(),
                    namespace: None,
                    name: "r".into(),
                    uid: None,
                },
            },
        ];
        let mut plain = steps.clone();
        label_steps(&mut steps, Some("a"), "uid-1", &[pods()]);
        let labels = |i: usize| match &steps[i] {
            Step::Create { object, .. } | Step::Apply { object, .. } => {
                object["metadata"]["labels"].clone()
            }
            Step::Delete { .. } => Value::Null,
        };
        assert_eq!(
            labels(0),
            json!({"app": "x", SHARD_LABEL: "a", CONTROLLER_LABEL: "uid-1"})
        );
        assert_eq!(
            labels(1),
            json!({SHARD_LABEL: "a", CONTROLLER_LABEL: "uid-1"})
        );
        assert_eq!(labels(2), Value::Null, "not an owned kind");
        label_steps(&mut plain, None, "uid-1", &[pods()]);
        let Step::Create { object, .. } = &plain[0] else {
            unreachable!()
        };
        assert_eq!(
            object["metadata"]["labels"],
            json!({"app": "x", CONTROLLER_LABEL: "uid-1"}),
            "unsharded: the controller's label only"
        );
    }
}
