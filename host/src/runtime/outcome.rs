//! The result of one decision in a form that can be stored, compared and printed: a plan,
//! the plugin's error, or the sandbox's fault as text. Golden cases, recorded decisions and
//! shadow comparisons all use it.

use serde::{Deserialize, Serialize};

use crate::runtime::error::CallError;
use crate::runtime::types::{Plan, ReconcileError};

/// The result of one decision, in the form printed and compared by golden cases.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    /// The plugin returned a plan.
    Plan(Plan),
    /// The plugin answered with an error.
    Error(ReconcileError),
    /// The sandbox stopped the call (timeout, out of memory, trap, invalid output).
    Fault(String),
}

impl Outcome {
    /// The outcome of a call, without consuming it.
    pub fn of(r: &Result<Result<Plan, ReconcileError>, CallError>) -> Self {
        match r {
            Ok(Ok(plan)) => Outcome::Plan(plan.clone()),
            Ok(Err(e)) => Outcome::Error(e.clone()),
            Err(e) => Outcome::Fault(e.to_string()),
        }
    }

    /// Whether the sandbox stopped the call.
    pub fn is_fault(&self) -> bool {
        matches!(self, Outcome::Fault(_))
    }
}

impl From<Result<Result<Plan, ReconcileError>, CallError>> for Outcome {
    fn from(r: Result<Result<Plan, ReconcileError>, CallError>) -> Self {
        match r {
            Ok(Ok(plan)) => Outcome::Plan(plan),
            Ok(Err(e)) => Outcome::Error(e),
            Err(e) => Outcome::Fault(e.to_string()),
        }
    }
}
