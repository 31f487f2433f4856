//! What one shard watches and how it marks what it writes. A shard's primary cache holds
//! the objects labelled for it ([`SHARD_LABEL`]); the caches of `owned` relations hold the
//! owned objects labelled for it too, so a replica caches only its share. The host labels
//! every object a plan creates or applies of an owned kind with its shard and with the
//! controlling primary's UID ([`CONTROLLER_LABEL`]): that is how owned objects follow
//! their owner when it moves (the new shard finds them by that label and relabels them).
//! Namespace-wide relations are not narrowed: a plugin such as ChaosPod sees every pod of
//! its namespace whatever shard made it.

use serde_json::{Value, json};

use crate::plan::guard::Step;
use crate::runtime::{KindRef, Relation, Selection};
use crate::shards::assign::SHARD_LABEL;

/// The label naming the UID of the primary that controls an owned object (set by the host
/// on what a plan creates or applies of an owned kind, when sharding is on).
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

/// `relation` as `shard`'s cache watches it: an owned relation narrowed to the shard's
/// label (with the relation's own selector, if any); anything else as it is.
pub fn relation_for(relation: &Relation, shard: Option<&str>) -> Relation {
    let mut r = relation.clone();
    if let (Some(shard), Selection::Owned) = (shard, relation.selection) {
        let own = shard_selector(shard);
        r.label_selector = Some(match &relation.label_selector {
            Some(s) if !s.trim().is_empty() => format!("{s},{own}"),
            _ => own,
        });
    }
    r
}

/// Labels every object `steps` create or apply of an `owned` kind with `shard` and the
/// controlling primary's `primary_uid`.
pub fn label_steps(steps: &mut [Step], shard: &str, primary_uid: &str, owned: &[KindRef]) {
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
        labels[SHARD_LABEL] = json!(shard);
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
    fn only_owned_relations_are_narrowed_to_the_shard() {
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
        assert_eq!(relation_for(&owned, None), owned);
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
        label_steps(&mut steps, "a", "uid-1", &[pods()]);
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
    }
}
