//! Which related objects a primary object sees, per declared relation.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::observe::fields::Fields;
use crate::observe::labels::LabelSelector;
use crate::observe::trim::trim_for_guest;
use crate::runtime::{Observed, PluginInfo, Reference, Relation, Selection};

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
    let by_name = matches!(relation.selection, Selection::Referenced(_));
    if relation.kind.namespaced && !by_name && str_at(object, "/metadata/namespace") != ns {
        return false;
    }
    let selected = match &relation.selection {
        Selection::Owned => {
            str_at(primary, "/metadata/uid").is_some_and(|uid| is_controlled_by(object, uid))
        }
        Selection::Namespace => true,
        Selection::Referenced(to) => {
            let named = (
                str_at(object, "/metadata/namespace")
                    .filter(|_| relation.kind.namespaced)
                    .map(str::to_string),
                str_at(object, "/metadata/name")
                    .unwrap_or_default()
                    .to_string(),
            );
            referenced_names(to, relation.kind.namespaced, primary).contains(&named)
        }
    };
    selected && selector.matches(&labels_of(object))
}

/// A cheap necessary condition for [`in_relation`] on an object's metadata alone (the
/// selection rule and the label selector), so that a cache of thousands of objects is not
/// serialised whole for each decision: only objects that pass are converted and checked.
/// A referenced object passes whatever its name: its candidates are the ones the primary
/// names ([`referenced_names`]), chosen before.
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
        Selection::Namespace | Selection::Referenced(_) => true,
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
    let by_name = matches!(relation.selection, Selection::Referenced(_));
    (!relation.kind.namespaced || by_name || meta.namespace.as_deref() == primary_namespace)
        && may_relate(relation, selector, primary_uid, meta)
}

/// The values at the dot-separated `path` under `v`, a list on the way giving one value per
/// item (`spec.volumes.secret.secretName`).
fn values_at<'a>(v: &'a Value, path: &[&str]) -> Vec<&'a Value> {
    let Some((first, rest)) = path.split_first() else {
        return match v {
            Value::Array(items) => items.iter().collect(),
            _ => vec![v],
        };
    };
    match v {
        Value::Array(items) => items.iter().flat_map(|i| values_at(i, path)).collect(),
        Value::Object(m) => m.get(*first).map_or_else(Vec::new, |n| values_at(n, rest)),
        _ => Vec::new(),
    }
}

/// The objects `primary` names through `reference`, each as (namespace, name): the
/// namespace read beside the name (from the same list item when the path goes through a
/// list), else the primary's; `None` for a cluster-scoped kind (`namespaced` false). An
/// empty or absent name names nothing; the list is sorted, without repeats.
pub fn referenced_names(
    reference: &Reference,
    namespaced: bool,
    primary: &Value,
) -> Vec<(Option<String>, String)> {
    let name_path: Vec<&str> = reference.name_path.split('.').collect();
    let ns_path: Vec<&str> = reference
        .namespace_path
        .as_deref()
        .map(|p| p.split('.').collect())
        .unwrap_or_default();
    let shared = if ns_path.is_empty() {
        name_path.len().saturating_sub(1)
    } else {
        name_path
            .iter()
            .zip(&ns_path)
            .take_while(|(a, b)| a == b)
            .count()
            .min(name_path.len() - 1)
            .min(ns_path.len() - 1)
    };
    let own_ns = str_at(primary, "/metadata/namespace").map(str::to_string);
    let mut out = Vec::new();
    for item in values_at(primary, &name_path[..shared]) {
        let items: Vec<&Value> = match item {
            Value::Array(items) => items.iter().collect(),
            _ => vec![item],
        };
        for item in items {
            let ns = if !namespaced {
                None
            } else if ns_path.is_empty() {
                own_ns.clone()
            } else {
                values_at(item, &ns_path[shared..])
                    .first()
                    .and_then(|v| v.as_str())
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .or_else(|| own_ns.clone())
            };
            for name in values_at(item, &name_path[shared..]) {
                if let Some(name) = name.as_str().filter(|s| !s.is_empty()) {
                    out.push((ns.clone(), name.to_string()));
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
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

    fn reference(name: &str, ns: Option<&str>) -> Reference {
        Reference {
            name_path: name.into(),
            namespace_path: ns.map(str::to_string),
        }
    }

    #[test]
    fn a_reference_names_one_object_per_field_or_list_item() {
        let primary = json!({"metadata": {"name": "x", "namespace": "a"}, "spec": {
            "configRef": {"name": "settings"},
            "volumes": [{"secret": {"secretName": "s1"}}, {"emptyDir": {}},
                        {"secret": {"secretName": "s2"}}, {"secret": {"secretName": ""}}],
            "refs": [{"name": "r1", "namespace": "b"}, {"name": "r2"}, {"name": "r1", "namespace": "b"}],
        }});
        let names = |r: Reference, namespaced: bool| referenced_names(&r, namespaced, &primary);
        let at = |ns: &str, n: &str| (Some(ns.to_string()), n.to_string());
        assert_eq!(
            names(reference("spec.configRef.name", None), true),
            [at("a", "settings")]
        );
        assert_eq!(
            names(reference("spec.volumes.secret.secretName", None), true),
            [at("a", "s1"), at("a", "s2")],
            "one per list item, the empty name naming none"
        );
        assert_eq!(
            names(
                reference("spec.refs.name", Some("spec.refs.namespace")),
                true
            ),
            [at("a", "r2"), at("b", "r1")],
            "the namespace read from the same item, else the primary's; no repeats"
        );
        assert_eq!(
            names(
                reference("spec.configRef.name", Some("spec.nowhere")),
                false
            ),
            [(None, "settings".to_string())],
            "a cluster-scoped kind has no namespace"
        );
        assert!(names(reference("spec.missing.name", None), true).is_empty());
        assert!(
            names(reference("spec.configRef", None), true).is_empty(),
            "not a string"
        );
    }

    #[test]
    fn a_referenced_relation_selects_the_named_objects_in_any_namespace() {
        let primary = json!({"metadata": {"name": "x", "namespace": "a", "uid": "U"},
            "spec": {"refs": [{"name": "one"}, {"name": "two", "namespace": "b"}]}});
        let relation = pods(
            Selection::Referenced(reference("spec.refs.name", Some("spec.refs.namespace"))),
            None,
        );
        let chosen: Vec<_> = [
            pod("one", "a", None, "web"),
            pod("two", "b", None, "web"),
            pod("two", "a", None, "web"),
            pod("three", "a", Some("U"), "web"),
        ]
        .into_iter()
        .filter(|o| in_relation(&relation, &LabelSelector::default(), &primary, o))
        .map(|o| {
            format!(
                "{}/{}",
                o["metadata"]["namespace"].as_str().unwrap(),
                o["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
        assert_eq!(chosen, ["a/one", "b/two"]);
    }
}
