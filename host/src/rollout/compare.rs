//! Comparing the outcome of a candidate with the active version's on the same observed
//! value: the whole outcome counts (actions, status, Events, requeue, or the error).

use similar::TextDiff;

use serde_json::Value;

use crate::cases::input::to_yaml;
use crate::runtime::{Action, Outcome};

/// Longest diff kept, in bytes (a divergence goes into the WasmPlugin status).
pub const MAX_DIFF: usize = 4096;
/// The most time the line diff of two large outcomes may take; past it the diff is coarser
/// (whole differing blocks), never slower.
pub const DIFF_BUDGET: std::time::Duration = std::time::Duration::from_millis(100);

/// How a candidate's outcome compares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Comparison {
    /// The same outcome.
    Agree,
    /// A different outcome: the unified diff from the active one (YAML).
    Diverge(String),
    /// The sandbox stopped the candidate's call.
    Fault(String),
}

/// Compares `candidate` with `active`.
pub fn compare(active: &Outcome, candidate: &Outcome) -> Comparison {
    if let Outcome::Fault(why) = candidate {
        return Comparison::Fault(format!("candidate fault: {why}"));
    }
    if active == candidate {
        return Comparison::Agree;
    }
    Comparison::Diverge(diff(active, candidate))
}

/// A unified diff of two outcomes as YAML, from `active` to `candidate`, cut at
/// [`MAX_DIFF`] bytes, computed within [`DIFF_BUDGET`]. CPU work: call it off the async
/// workers.
pub fn diff(active: &Outcome, candidate: &Outcome) -> String {
    let a = to_yaml(&redacted(active)).unwrap_or_else(|e| format!("{e}"));
    let b = to_yaml(&redacted(candidate)).unwrap_or_else(|e| format!("{e}"));
    if a == b {
        return "the outcomes differ only in the data of a Secret (not shown)\n".into();
    }
    let text = TextDiff::configure()
        .timeout(DIFF_BUDGET)
        .diff_lines(&a, &b)
        .unified_diff()
        .context_radius(2)
        .header("active", "candidate")
        .to_string();
    cut(text, MAX_DIFF)
}

/// `o` with the values of every Secret's `data` and `stringData` it applies replaced by
/// `(redacted)`: a diff shows which keys, never what they hold.
fn redacted(o: &Outcome) -> Outcome {
    let Outcome::Plan(plan) = o else {
        return o.clone();
    };
    let mut plan = plan.clone();
    for action in &mut plan.actions {
        if let Action::Apply(object) = action
            && object.get("kind").and_then(Value::as_str) == Some("Secret")
            && object.get("apiVersion").and_then(Value::as_str) == Some("v1")
        {
            for field in ["data", "stringData"] {
                for v in object
                    .get_mut(field)
                    .and_then(Value::as_object_mut)
                    .into_iter()
                    .flat_map(|m| m.values_mut())
                {
                    *v = Value::String("(redacted)".into());
                }
            }
        }
    }
    Outcome::Plan(plan)
}

fn cut(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str("\n… (cut)\n");
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{Plan, ReconcileError};
    use serde_json::json;

    fn pod(labels: serde_json::Value) -> Outcome {
        Outcome::Plan(Plan::new().apply(&json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"generateName": "p-", "labels": labels}})))
    }

    #[test]
    fn a_secret_shows_its_keys_in_a_diff_never_its_data() {
        let secret = |password: &str, extra: bool| {
            let mut data = json!({"password": password});
            if extra {
                data["user"] = json!("admin-name");
            }
            Outcome::Plan(
                Plan::new().apply(&json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "db"}, "stringData": data})),
            )
        };
        let d = diff(&secret("hunter2", false), &secret("correct-horse", true));
        assert!(d.contains("+        user: (redacted)"), "{d}");
        assert!(
            !d.contains("hunter2") && !d.contains("correct-horse") && !d.contains("admin-name"),
            "{d}"
        );
        let same_keys = diff(&secret("hunter2", false), &secret("correct-horse", false));
        assert_eq!(
            same_keys,
            "the outcomes differ only in the data of a Secret (not shown)\n"
        );
    }

    #[test]
    fn equal_outcomes_agree_and_a_label_shows_in_the_diff() {
        let v1 = pod(json!({"app": "x"}));
        assert_eq!(compare(&v1, &v1.clone()), Comparison::Agree);
        let v2 = pod(json!({"app": "x", "version": "v2"}));
        let Comparison::Diverge(d) = compare(&v1, &v2) else {
            panic!("a new label is a divergence");
        };
        assert!(d.starts_with("--- active\n+++ candidate\n"), "{d}");
        assert!(d.contains("+          version: v2"), "{d}");
        assert!(!d.contains("\n-"), "nothing removed: {d}");
    }

    #[test]
    fn errors_and_faults_are_told_apart() {
        let plan = pod(json!({}));
        let err = Outcome::Error(ReconcileError::Transient("later".into()));
        assert!(matches!(compare(&plan, &err), Comparison::Diverge(_)));
        let fault = Outcome::Fault("trap: unreachable".into());
        assert_eq!(
            compare(&plan, &fault),
            Comparison::Fault("candidate fault: trap: unreachable".into())
        );
    }

    #[test]
    fn long_diffs_are_cut_on_a_character_boundary() {
        let s = cut("é".repeat(10), 5);
        assert_eq!(s, "éé\n… (cut)\n");
        assert_eq!(cut("short".into(), 10), "short");
    }
}
