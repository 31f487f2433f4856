//! The observed state handed to a decision, with typed accessors.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::ReconcileError;

/// Everything a decision may depend on.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Observed {
    /// The primary object.
    pub primary: Value,
    /// Related objects by relation name.
    pub related: BTreeMap<String, Vec<Value>>,
    /// Related objects still as JSON text, by relation name: the form in which they cross
    /// the wasm boundary. [`Observed::related_as`] reads them straight into typed structs
    /// without building `Value`s first (that was most of a sandboxed decision's time);
    /// [`Observed::related_values`] parses them on demand. Read related objects through
    /// those two methods: they see both fields.
    pub related_json: BTreeMap<String, Vec<String>>,
    /// Current time, milliseconds since the Unix epoch.
    pub now_unix_ms: i64,
    /// Random seed chosen by the host.
    pub seed: u64,
    /// Objects the plan's `requires` asked for, by requirement name (contract 0.4.0).
    pub required: BTreeMap<String, Vec<Value>>,
    /// Answers to the requests earlier plans sent, by key (contract 0.4.0).
    pub answers: BTreeMap<String, crate::Answer>,
}

impl Observed {
    /// An observed state with only a primary object (related sets empty, time 0, seed 0).
    pub fn new(primary: Value) -> Self {
        Observed {
            primary,
            ..Observed::default()
        }
    }

    /// Adds related objects under `relation` (builder style, for tests).
    pub fn with_related(mut self, relation: &str, objects: Vec<Value>) -> Self {
        self.related
            .entry(relation.to_string())
            .or_default()
            .extend(objects);
        self
    }

    /// Sets the time (builder style, for tests).
    pub fn at(mut self, now_unix_ms: i64) -> Self {
        self.now_unix_ms = now_unix_ms;
        self
    }

    /// Sets the seed (builder style, for tests).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Adds required objects under `requirement` (builder style, for tests).
    pub fn with_required(mut self, requirement: &str, objects: Vec<Value>) -> Self {
        self.required
            .entry(requirement.to_string())
            .or_default()
            .extend(objects);
        self
    }

    /// Adds an answer (builder style, for tests).
    pub fn with_answer(mut self, answer: crate::Answer) -> Self {
        self.answers.insert(answer.key.clone(), answer);
        self
    }

    /// The objects a requirement brought, `None` before the host read them.
    pub fn required(&self, requirement: &str) -> Option<&[Value]> {
        self.required.get(requirement).map(Vec::as_slice)
    }

    /// The answer held under `key`, if any.
    pub fn answer(&self, key: &str) -> Option<&crate::Answer> {
        self.answers.get(key)
    }

    /// The primary object as `T`. A mismatch is an invalid spec: the API server accepted
    /// an object the plugin's types do not describe.
    pub fn primary_as<T: DeserializeOwned>(&self) -> Result<T, ReconcileError> {
        T::deserialize(&self.primary)
            .map_err(|e| ReconcileError::InvalidSpec(format!("cannot read the object: {e}")))
    }

    /// The objects of one relation as `T`, skipping none: an object that does not parse
    /// is an error.
    pub fn related_as<T: DeserializeOwned>(
        &self,
        relation: &str,
    ) -> Result<Vec<T>, ReconcileError> {
        let err = |e: serde_json::Error| {
            ReconcileError::Other(format!("cannot read a `{relation}` object: {e}"))
        };
        let values = self
            .related
            .get(relation)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let texts = self
            .related_json
            .get(relation)
            .map(Vec::as_slice)
            .unwrap_or_default();
        values
            .iter()
            .map(|v| T::deserialize(v).map_err(err))
            .chain(texts.iter().map(|t| serde_json::from_str(t).map_err(err)))
            .collect()
    }

    /// The objects of one relation as JSON values.
    pub fn related_values(&self, relation: &str) -> Result<Vec<Value>, ReconcileError> {
        self.related_as(relation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn typed_access_to_primary_and_related() {
        let o = Observed::new(json!({"spec": {"size": 2}}))
            .with_related("pods", vec![json!({"name": "a"}), json!({"name": "b"})]);
        #[derive(Debug, serde::Deserialize)]
        struct Named {
            name: String,
        }
        let names: Vec<Named> = o.related_as("pods").unwrap();
        assert_eq!(names[1].name, "b");
        assert!(o.related_as::<Named>("none").unwrap().is_empty());
        let mut raw = o.clone();
        raw.related_json
            .insert("pods".into(), vec![r#"{"name": "c"}"#.into()]);
        let names: Vec<Named> = raw.related_as("pods").unwrap();
        assert_eq!(
            names.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(),
            ["a", "b", "c"]
        );
        assert_eq!(
            raw.related_values("pods").unwrap()[2],
            serde_json::json!({"name": "c"})
        );
        raw.related_json
            .insert("bad".into(), vec!["{not json".into()]);
        assert!(raw.related_values("bad").is_err());
        let bad = o.primary_as::<Named>().unwrap_err();
        assert!(matches!(bad, ReconcileError::InvalidSpec(_)));
    }
}
