//! The answers held for one primary: kept in an annotation of the primary itself
//! ([`ANNOTATION`]), where the next decision finds them after a restart of the host or a
//! move of the primary to another shard, and which goes with the primary when it is
//! deleted. The guest never sees the annotation: it sees `observed.answers`.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use kube::api::DynamicObject;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::runtime::types::{Answer, Header, Outcome, Response};

/// The annotation of the primary that holds its answers (JSON, bodies in base64).
pub(crate) const ANNOTATION: &str = "wasmop.dev/answers";

/// Answers by key.
pub(crate) type Held = BTreeMap<String, Answer>;

/// One answer as the annotation stores it.
#[derive(Debug, Serialize, Deserialize)]
struct Stored {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    headers: Vec<Header>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    body: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    truncated: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    refused: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    failed: Option<String>,
    at: i64,
}

/// The answers `obj` holds; none when it has no (or an unreadable) annotation.
pub(crate) fn of(obj: &DynamicObject) -> Held {
    obj.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION))
        .map(|text| parse(text))
        .unwrap_or_default()
}

/// Removes the annotation from the primary as the guest sees it.
pub(crate) fn strip(primary: &mut Value) {
    if let Some(annotations) = primary
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.remove(ANNOTATION);
        if annotations.is_empty()
            && let Some(meta) = primary
                .pointer_mut("/metadata")
                .and_then(Value::as_object_mut)
        {
            meta.remove("annotations");
        }
    }
}

fn parse(text: &str) -> Held {
    let Ok(stored) = serde_json::from_str::<BTreeMap<String, Stored>>(text) else {
        tracing::warn!(
            annotation = ANNOTATION,
            "unreadable answers on the primary; they are asked for again"
        );
        return Held::new();
    };
    stored
        .into_iter()
        .map(|(key, s)| {
            let outcome = match (s.refused, s.failed, s.status) {
                (Some(rule), _, _) => Outcome::Refused(rule),
                (None, Some(why), _) => Outcome::Failed(why),
                (None, None, status) => Outcome::Response(Response {
                    status: status.unwrap_or(0),
                    headers: s.headers,
                    body: STANDARD.decode(s.body.as_bytes()).unwrap_or_default(),
                    truncated: s.truncated,
                }),
            };
            let answer = Answer {
                key: key.clone(),
                outcome,
                at_unix_ms: s.at,
            };
            (key, answer)
        })
        .collect()
}

/// The annotation's value for `held`; `None` (the annotation removed) when it is empty.
pub(crate) fn text(held: &Held) -> Option<String> {
    if held.is_empty() {
        return None;
    }
    let stored: BTreeMap<&str, Stored> = held
        .iter()
        .map(|(key, a)| {
            let mut s = Stored {
                status: None,
                headers: Vec::new(),
                body: String::new(),
                truncated: false,
                refused: None,
                failed: None,
                at: a.at_unix_ms,
            };
            match &a.outcome {
                Outcome::Response(r) => {
                    s.status = Some(r.status);
                    s.headers.clone_from(&r.headers);
                    s.body = STANDARD.encode(&r.body);
                    s.truncated = r.truncated;
                }
                Outcome::Refused(rule) => s.refused = Some(rule.clone()),
                Outcome::Failed(why) => s.failed = Some(why.clone()),
            }
            (key.as_str(), s)
        })
        .collect();
    Some(serde_json::to_string(&stored).expect("answers serialize"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer(key: &str, outcome: Outcome) -> (String, Answer) {
        (
            key.to_string(),
            Answer {
                key: key.to_string(),
                outcome,
                at_unix_ms: 1_767_225_600_000,
            },
        )
    }

    #[test]
    fn answers_survive_the_annotation_and_the_guest_never_sees_it() {
        let held: Held = [
            answer(
                "create",
                Outcome::Response(Response {
                    status: 201,
                    headers: vec![Header {
                        name: "etag".into(),
                        value: "\"7\"".into(),
                    }],
                    body: vec![0, 159, 146, 150, b'{'],
                    truncated: true,
                }),
            ),
            answer("peek", Outcome::Refused("not-granted".into())),
            answer("slow", Outcome::Failed("timed out after 10 s".into())),
        ]
        .into_iter()
        .collect();
        let text = text(&held).expect("not empty");
        let mut primary = json!({"metadata": {"name": "p", "annotations": {ANNOTATION: text}}});
        let obj: DynamicObject = serde_json::from_value(primary.clone()).unwrap();
        assert_eq!(of(&obj), held);
        strip(&mut primary);
        assert_eq!(primary, json!({"metadata": {"name": "p"}}));
        assert_eq!(super::text(&Held::new()), None);
    }

    #[test]
    fn an_unreadable_annotation_holds_nothing() {
        let obj: DynamicObject = serde_json::from_value(
            json!({"metadata": {"name": "p", "annotations": {ANNOTATION: "{not json", "x": "y"}}}),
        )
        .unwrap();
        assert!(of(&obj).is_empty());
        let mut primary = serde_json::to_value(&obj).unwrap();
        strip(&mut primary);
        assert_eq!(primary["metadata"]["annotations"], json!({"x": "y"}));
    }
}
