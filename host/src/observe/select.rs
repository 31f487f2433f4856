//! Which related objects a primary object sees, per declared relation.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::observe::fields::Fields;
use crate::observe::labels::LabelSelector;
use crate::observe::trim::trim_for_guest;
use crate::runtime::{Observed, PluginInfo, Relation, Selection};

fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

/// Whether `object`'s controller ownerReference names the object with `owner_uid`.
pub fn is_controlled_by(object: &Value, owner_uid: &str) -> bool {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| {
            refs.iter().any(|r| {
                r.get("controller").and_then(Value::as_bool) == Some(true)
                    && r.get("uid").and_then(Value::as_str) == Some(owner_uid)
            })
        })
}

fn labels_of(object: &Value) -> BTreeMap<String, String> {
    object
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `object` belongs to `relation` for `primary`: the right kind, the primary's
/// namespace (for namespaced kinds), the selection rule and the label selector.
pub fn in_relation(
    relation: &Relation,
    selector: &LabelSelector,
    primary: &Value,
    object: &Value,
) -> bool {
    let kind_ok = relation.kind.matches(
        str_at(object, "/apiVersion").unwrap_or(""),
        str_at(object, "/kind").unwrap_or(""),
    );
    if !kind_ok {
        return false;
    }
    let ns = str_at(primary, "/metadata/namespace");
    if relation.kind.namespaced && str_at(object, "/metadata/namespace") != ns {
        return false;
    }
    let selected = match relation.selection {
        Selection::Owned => {
            str_at(primary, "/metadata/uid").is_some_and(|uid| is_controlled_by(object, uid))
        }
        Selection::Namespace => true,
    };
    selected && selector.matches(&labels_of(object))
}

/// A cheap necessary condition for [`in_relation`] on an object's metadata alone (the
/// selection rule and the label selector), so that a cache of thousands of objects is not
/// serialised whole for each decision: only objects that pass are converted and checked.
pub fn may_relate(
    relation: &Relation,
    selector: &LabelSelector,
    primary_uid: &str,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> bool {
    let selected = match relation.selection {
        Selection::Owned => meta
            .owner_references
            .as_deref()
            .unwrap_or_default()
            .iter()
            .any(|r| r.controller == Some(true) && r.uid == primary_uid),
        Selection::Namespace => true,
    };
    selected && selector.matches(meta.labels.as_ref().unwrap_or(&BTreeMap::new()))
}

/// [`in_relation`] for an object known to be of the relation's kind (one from the
/// relation's own cache), on its metadata alone: the namespace, then [`may_relate`].
pub fn relates_by_metadata(
    relation: &Relation,
    selector: &LabelSelector,
    primary_uid: &str,
    primary_namespace: Option<&str>,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> bool {
    (!relation.kind.namespaced || meta.namespace.as_deref() == primary_namespace)
        && may_relate(relation, selector, primary_uid, meta)
}

/// The parsed label selector of a relation (empty when it declares none); an error names
/// the relation.
pub fn selector_of(relation: &Relation) -> Result<LabelSelector, String> {
    match &relation.label_selector {
        Some(s) => {
            LabelSelector::parse(s).map_err(|e| format!("relation `{}`: {e}", relation.name))
        }
        None => Ok(LabelSelector::default()),
    }
}

/// The related objects of `primary` among `objects`, per relation, trimmed for the guest.
/// A relation's label selector that does not parse is an error naming the relation.
pub fn related_for<'a>(
    info: &PluginInfo,
    primary: &Value,
    objects: impl Iterator<Item = &'a Value> + Clone,
) -> Result<BTreeMap<String, Vec<Value>>, String> {
    let mut related = BTreeMap::new();
    for relation in &info.relations {
        let selector = selector_of(relation)?;
        let fields = Fields::of(relation);
        let chosen: Vec<Value> = objects
            .clone()
            .filter(|o| in_relation(relation, &selector, primary, o))
            .map(|o| fields.project(trim_for_guest(o.clone())))
            .collect();
        related.insert(relation.name.clone(), chosen);
    }
    Ok(related)
}

/// The observed state of `primary` given every object the host knows of.
pub fn observed_for<'a>(
    info: &PluginInfo,
    primary: &Value,
    objects: impl Iterator<Item = &'a Value> + Clone,
    now_unix_ms: i64,
    seed: u64,
) -> Result<Observed, String> {
    Ok(Observed {
        primary: trim_for_guest(primary.clone()),
        related: related_for(info, primary, objects)?,
        related_json: Default::default(),
        now_unix_ms,
        seed,
        ..Observed::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::KindRef;
    use serde_json::json;

    use crate::runtime::pod_relation as pods;

    fn pod(name: &str, ns: &str, owner: Option<&str>, app: &str) -> Value {
        let mut p = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": {"app": app}}});
        if let Some(uid) = owner {
            p["metadata"]["ownerReferences"] = json!([{"uid": uid, "controller": true, "kind": "X", "name": "x", "apiVersion": "v1"}]);
        }
        p
    }

    #[test]
    fn owned_namespace_and_label_selection() {
        let primary = json!({"metadata": {"name": "x", "namespace": "a", "uid": "U"}});
        let all = [
            pod("mine", "a", Some("U"), "web"),
            pod("foreign", "a", None, "web"),
            pod("other-ns", "b", Some("U"), "web"),
            pod("db", "a", None, "db"),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "a"}}),
        ];
        let names = |r: &Relation| -> Vec<String> {
            let sel = LabelSelector::parse(r.label_selector.as_deref().unwrap_or("")).unwrap();
            all.iter()
                .filter(|o| in_relation(r, &sel, &primary, o))
                .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(names(&pods(Selection::Owned, None)), ["mine"]);
        assert_eq!(
            names(&pods(Selection::Namespace, None)),
            ["mine", "foreign", "db"]
        );
        assert_eq!(names(&pods(Selection::Namespace, Some("app=db"))), ["db"]);
    }

    #[test]
    fn related_objects_carry_the_fields_their_relation_declares() {
        let primary = json!({"metadata": {"name": "x", "namespace": "a", "uid": "U"}});
        let mut mine = pod("mine", "a", Some("U"), "web");
        mine["spec"] = json!({"nodeName": "n"});
        mine["status"] = json!({"phase": "Running", "podIP": "10.0.0.1"});
        let mut relation = pods(Selection::Owned, None);
        relation.fields = Some(vec!["status.phase".into()]);
        let info = PluginInfo {
            name: "p".into(),
            version: "1".into(),
            primary: KindRef::pod(),
            crd: None,
            relations: vec![relation],
            permissions: vec![],
            finalizer: None,
            webhooks: Default::default(),
            outbound_hosts: Vec::new(),
        };
        let related = related_for(&info, &primary, [mine.clone()].iter()).unwrap();
        let mut expected = mine.clone();
        expected.as_object_mut().unwrap().remove("spec");
        expected["status"] = json!({"phase": "Running"});
        assert_eq!(related["pods"], [expected]);
        let mut whole = info.clone();
        whole.relations[0].fields = None;
        assert_eq!(
            related_for(&whole, &primary, [mine.clone()].iter()).unwrap()["pods"],
            [mine]
        );
    }

    #[test]
    fn on_objects_of_its_kind_the_metadata_answer_is_the_full_answer() {
        let primary = json!({"metadata": {"name": "x", "namespace": "a", "uid": "U"}});
        let all = [
            pod("mine", "a", Some("U"), "web"),
            pod("mine-db", "a", Some("U"), "db"),
            pod("mine-elsewhere", "b", Some("U"), "db"),
            pod("foreign", "a", Some("V"), "web"),
            pod("orphan", "a", None, "db"),
            pod("orphan-elsewhere", "b", None, "db"),
        ];
        for relation in [
            pods(Selection::Owned, None),
            pods(Selection::Owned, Some("app=db")),
            pods(Selection::Namespace, None),
            pods(Selection::Namespace, Some("app!=web")),
        ] {
            let sel = selector_of(&relation).unwrap();
            let chosen: Vec<&str> = all
                .iter()
                .filter(|o| {
                    let meta = serde_json::from_value(o["metadata"].clone()).unwrap();
                    let cheap = relates_by_metadata(&relation, &sel, "U", Some("a"), &meta);
                    assert_eq!(cheap, in_relation(&relation, &sel, &primary, o), "{o}");
                    cheap
                })
                .map(|o| o["metadata"]["name"].as_str().unwrap())
                .collect();
            assert!(!chosen.is_empty() && chosen.len() < all.len(), "{chosen:?}");
            // Owned relations keep only the primary's own pods in its namespace.
            if relation.selection == Selection::Owned {
                assert!(chosen.iter().all(|n| n.starts_with("mine")), "{chosen:?}");
            }
        }
    }
}
