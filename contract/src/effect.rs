//! Effects outside the cluster (contract 0.4.0): requests a plan carries, and the answers
//! the next decision observes.

use serde::{Deserialize, Serialize};

/// One HTTP header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// Its name.
    pub name: String,
    /// Its value.
    pub value: String,
}

/// A header the host fills from a Secret the guest never sees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credential {
    /// The header's name.
    pub header: String,
    /// Text before the value (`Bearer `).
    #[serde(default)]
    pub prefix: String,
    /// The Secret, in the primary's namespace.
    pub secret: String,
    /// Its key.
    pub key: String,
}

/// A request outside the cluster, under the plugin's key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutboundRequest {
    /// The plugin's key; not sent again while its answer is held.
    pub key: String,
    /// The HTTP method.
    pub method: String,
    /// An absolute URL.
    pub url: String,
    /// Headers to send.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<Header>,
    /// The body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Vec<u8>>,
    /// A header filled from a Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<Credential>,
    /// Sent as `Idempotency-Key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// Whether the host may send it again after a failure.
    #[serde(default)]
    pub retry: bool,
    /// Response headers the answer keeps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keep_headers: Vec<String>,
}

/// A response from outside the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    /// The HTTP status.
    pub status: u16,
    /// The headers kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<Header>,
    /// The body, at most the host's cap.
    #[serde(default)]
    pub body: Vec<u8>,
    /// Whether the body was cut at the cap.
    #[serde(default)]
    pub truncated: bool,
}

/// What came of a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    /// An answer came.
    Response(Response),
    /// The host refused to send it: the rule.
    Refused(String),
    /// It failed: timeout, connection, TLS.
    Failed(String),
}

/// The answer to a request, under its key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Answer {
    /// The request's key.
    pub key: String,
    /// What came of it.
    pub outcome: Outcome,
    /// When, milliseconds since the Unix epoch.
    pub at_unix_ms: i64,
}
