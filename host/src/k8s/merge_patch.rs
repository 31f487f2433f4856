//! JSON merge patches (RFC 7386) from one document to another: how a plugin's desired status
//! is written. The API server applies a merge patch for less than a server-side apply of
//! the same status costs it (no structured merge over the object, no field ownership to
//! work out).

use serde_json::{Map, Value};

/// The merge patch that turns `from` into `to`: members of `to` that differ, `null` for
/// each member of `from` that `to` lacks, objects patched member by member and everything
/// else (lists included) replaced whole. Applied to `from` it gives `to`, provided `to`
/// holds no `null` member (a merge patch reads `null` as "remove", which is what a `null`
/// status field means anyway). Equal documents give `{}`.
pub fn between(from: &Value, to: &Value) -> Value {
    let (Value::Object(old), Value::Object(new)) = (from, to) else {
        return to.clone();
    };
    let mut patch = Map::new();
    for key in old.keys().filter(|k| !new.contains_key(*k)) {
        patch.insert(key.clone(), Value::Null);
    }
    for (key, value) in new {
        match old.get(key) {
            Some(previous) if previous == value => {}
            Some(previous) if previous.is_object() && value.is_object() => {
                patch.insert(key.clone(), between(previous, value));
            }
            _ => {
                patch.insert(key.clone(), value.clone());
            }
        }
    }
    Value::Object(patch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// RFC 7386's merge, to check that a patch turns `from` into `to`.
    fn apply(target: &Value, patch: &Value) -> Value {
        let Value::Object(members) = patch else {
            return patch.clone();
        };
        let mut out = match target {
            Value::Object(m) => m.clone(),
            _ => Map::new(),
        };
        for (key, value) in members {
            if value.is_null() {
                out.remove(key);
            } else {
                let merged = apply(out.get(key).unwrap_or(&Value::Null), value);
                out.insert(key.clone(), merged);
            }
        }
        Value::Object(out)
    }

    #[test]
    fn a_patch_turns_the_old_status_into_the_new() {
        let from = json!({
            "pods": ["a", "b"], "replicas": 2, "gone": {"x": 1},
            "nested": {"keep": 1, "drop": 2, "change": {"deep": true}},
            "conditions": [{"type": "Ready", "status": "False"}]
        });
        let to = json!({
            "pods": ["a", "b", "c"], "replicas": 3,
            "nested": {"keep": 1, "change": {"deep": false}, "add": "n"},
            "conditions": [{"type": "Ready", "status": "True"}]
        });
        let patch = between(&from, &to);
        assert_eq!(
            patch,
            json!({
                "pods": ["a", "b", "c"], "replicas": 3, "gone": null,
                "nested": {"drop": null, "change": {"deep": false}, "add": "n"},
                "conditions": [{"type": "Ready", "status": "True"}]
            })
        );
        assert_eq!(apply(&from, &patch), to);
    }

    #[test]
    fn equal_documents_give_an_empty_patch() {
        let doc = json!({"a": [1, 2], "b": {"c": "d"}});
        assert_eq!(between(&doc, &doc), json!({}));
    }

    #[test]
    fn no_status_yet_or_another_shape_sends_the_whole_new_one() {
        let to = json!({"replicas": 1});
        assert_eq!(between(&Value::Null, &to), to);
        assert_eq!(
            between(&json!({"replicas": 1, "x": {"y": 1}}), &json!({"x": 2})),
            json!({"replicas": null, "x": 2})
        );
        assert_eq!(apply(&json!(["a"]), &between(&json!(["a"]), &to)), to);
    }
}
