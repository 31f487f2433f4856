//! Admission (contract 0.4.0): what `validate` is asked and answers.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The operation an admission request is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    /// A create.
    Create,
    /// An update.
    Update,
    /// A delete.
    Delete,
}

/// A create, update or delete of an object of the primary kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRequest {
    /// The operation.
    pub operation: Operation,
    /// The object as it would be stored; `None` on delete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<Value>,
    /// The object before, on update and delete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_object: Option<Value>,
    /// The user asking.
    #[serde(default)]
    pub user: String,
    /// Whether nothing will be stored.
    #[serde(default)]
    pub dry_run: bool,
}

/// What is wrong with one field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FieldError {
    /// The field's path (`spec.schedule`).
    pub path: String,
    /// The value refused; `None` leaves it out of the message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// Why.
    pub detail: String,
}

/// The answer of `validate`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    /// Whether the operation may go on.
    pub allowed: bool,
    /// For a refusal: what is wrong with which field.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<FieldError>,
    /// For a refusal with no field to blame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Warnings shown to the client.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl Verdict {
    /// Allowed, with no warning.
    pub fn allow() -> Verdict {
        Verdict {
            allowed: true,
            fields: Vec::new(),
            message: None,
            warnings: Vec::new(),
        }
    }

    /// Refused for these fields.
    pub fn invalid(fields: Vec<FieldError>) -> Verdict {
        Verdict {
            allowed: false,
            fields,
            ..Verdict::allow()
        }
    }

    /// Refused with a message.
    pub fn deny(message: impl Into<String>) -> Verdict {
        Verdict {
            allowed: false,
            message: Some(message.into()),
            ..Verdict::allow()
        }
    }

    /// The same, with a warning added.
    pub fn warn(mut self, warning: impl Into<String>) -> Verdict {
        self.warnings.push(warning.into());
        self
    }

    /// The refusal worded as the API server words an invalid object:
    /// `Kind.group "name" is invalid: [path: Invalid value: "v": detail, …]`.
    pub fn message_for(&self, kind: &str, group: &str, name: &str) -> String {
        if let Some(m) = &self.message {
            return m.clone();
        }
        let qualified = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let each: Vec<String> = self
            .fields
            .iter()
            .map(|f| match &f.value {
                Some(v) => format!("{}: Invalid value: {}: {}", f.path, v, f.detail),
                None => format!("{}: {}", f.path, f.detail),
            })
            .collect();
        let errors = match each.len() {
            1 => each[0].clone(),
            _ => format!("[{}]", each.join(", ")),
        };
        format!("{qualified} \"{name}\" is invalid: {errors}")
    }
}
