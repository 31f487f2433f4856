//! Objects a decision asks for by name or labels (contract 0.4.0), read by the host and
//! handed to the next decision of the same reconcile.

use serde::{Deserialize, Serialize};

use crate::KindRef;

/// Which objects of a kind a requirement selects.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Matching {
    /// The object of this name.
    Name(String),
    /// The objects with these labels (Kubernetes selector syntax).
    Labels(String),
}

/// Objects a decision needs that no relation selects.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Requirement {
    /// The key they come back under in [`crate::Observed`]'s `required`.
    pub name: String,
    /// Their kind.
    pub kind: KindRef,
    /// Their namespace; `None`: the primary's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Which objects.
    pub matching: Matching,
}
