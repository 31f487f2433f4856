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
    /// Current time, milliseconds since the Unix epoch.
    pub now_unix_ms: i64,
    /// Random seed chosen by the host.
    pub seed: u64,
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
        self.related
            .get(relation)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|v| {
                T::deserialize(v).map_err(|e| {
                    ReconcileError::Other(format!("cannot read a `{relation}` object: {e}"))
                })
            })
            .collect()
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
        let bad = o.primary_as::<Named>().unwrap_err();
        assert!(matches!(bad, ReconcileError::InvalidSpec(_)));
    }
}
