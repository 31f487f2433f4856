//! One decision offline: a plugin asked about a primary object among other objects, at a
//! given time and seed, as `wasmop plan`, the golden cases and the replay of recorded
//! decisions ask it.

use serde_json::Value;

use crate::observe::observed_for;
pub use crate::runtime::Outcome;
use crate::runtime::{Entry, LoadedPlugin, Sandbox};

/// Parses an RFC 3339 time into milliseconds since the Unix epoch.
pub fn parse_time(text: &str) -> Result<i64, String> {
    text.parse::<jiff::Timestamp>()
        .map(|t| t.as_millisecond())
        .map_err(|e| format!("`{text}` is not an RFC 3339 time (like 2026-01-01T00:00:00Z): {e}"))
}

/// The current time in milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// What a decision observed besides the objects: the objects its plan asked for by name or
/// labels, and the answers to its requests outside the cluster (contract 0.4.0).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Given {
    /// The objects asked for, by requirement name.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub required: std::collections::BTreeMap<String, Vec<Value>>,
    /// The answers held, one per key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub answers: Vec<crate::runtime::types::Answer>,
}

/// Runs one decision of `plugin` for `primary` among `objects`, with what it was `given`.
pub fn decide(
    sandbox: &Sandbox,
    plugin: &LoadedPlugin,
    primary: &Value,
    objects: &[Value],
    now_unix_ms: i64,
    seed: u64,
    given: &Given,
) -> anyhow::Result<Outcome> {
    let primary_kind = &plugin.info.primary;
    let (api_version, kind) = (
        primary
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or(""),
        primary.get("kind").and_then(Value::as_str).unwrap_or(""),
    );
    if !primary_kind.matches(api_version, kind) {
        anyhow::bail!(
            "the object is a {api_version} {kind}, but plugin `{}` reconciles {} {}",
            plugin.info.name,
            primary_kind.api_version(),
            primary_kind.kind
        );
    }
    let mut observed = observed_for(&plugin.info, primary, objects.iter(), now_unix_ms, seed)
        .map_err(anyhow::Error::msg)?;
    observed.required.clone_from(&given.required);
    observed.answers = given
        .answers
        .iter()
        .map(|a| (a.key.clone(), a.clone()))
        .collect();
    let name = primary
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let ns = primary
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    let entry = if primary.pointer("/metadata/deletionTimestamp").is_some()
        && plugin.info.finalizer.is_some()
    {
        Entry::Cleanup
    } else {
        Entry::Reconcile
    };
    Ok(sandbox
        .decide_blocking(plugin, entry, &observed, &format!("{ns}/{name}"))
        .into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cases::input::to_yaml;
    use crate::runtime::{Plan, ReconcileError};

    #[test]
    fn times_parse_or_explain() {
        assert_eq!(parse_time("1970-01-01T00:00:01Z"), Ok(1000));
        assert!(parse_time("tomorrow").unwrap_err().contains("RFC 3339"));
    }

    #[test]
    fn outcome_yaml_shape() {
        let y = to_yaml(&Outcome::Error(ReconcileError::InvalidSpec("x".into()))).unwrap();
        assert_eq!(y, "error:\n  invalidSpec: x\n");
        let plan = Plan::new().apply(&serde_json::json!({"kind": "Pod"}));
        let y = to_yaml(&Outcome::Plan(plan.clone())).unwrap();
        assert_eq!(y, "plan:\n  actions:\n  - apply:\n      kind: Pod\n");
        let back: Outcome = crate::cases::input::from_yaml(&y).unwrap();
        assert_eq!(back, Outcome::Plan(plan));
    }
}
