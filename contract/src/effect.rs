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

/// One `scheme://host[:port]` pattern, as a plugin declares its outbound hosts and an
/// admin grants them: `https://api.example.com`, `https://*.example.com:8443` (`*.`: one or
/// more labels in front of the rest), `http://127.0.0.1:18080`; no port: the scheme's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OriginPattern {
    scheme: String,
    /// Lower case; `*.rest` for a wildcard.
    host: String,
    port: u16,
}

impl OriginPattern {
    /// Parses `text`; the error says what is wrong with it.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (scheme, rest) = text
            .split_once("://")
            .ok_or_else(|| format!("`{text}`: not scheme://host[:port]"))?;
        let scheme = scheme.to_ascii_lowercase();
        let default_port = match scheme.as_str() {
            "https" => 443,
            "http" => 80,
            other => return Err(format!("`{text}`: scheme `{other}` (http or https)")),
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.is_empty() || rest.contains(['/', '?', '#', '@']) {
            return Err(format!(
                "`{text}`: a host and a port only, no path, query or user"
            ));
        }
        let (host, port) = match rest.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || rest.starts_with('[') => match p.parse::<u16>() {
                Ok(port) if !h.contains(':') || h.starts_with('[') => (h, port),
                _ => (rest, default_port),
            },
            _ => (rest, default_port),
        };
        let host = host.to_ascii_lowercase();
        let bare = host.strip_prefix("*.").unwrap_or(&host);
        if bare.is_empty() || bare.contains('*') {
            return Err(format!(
                "`{text}`: `*.` only in front of a host name (`*.example.com`)"
            ));
        }
        Ok(OriginPattern { scheme, host, port })
    }

    /// Whether an origin matches: `scheme`, `host` (lower case; IPv6 in brackets) and
    /// `port`.
    pub fn matches(&self, scheme: &str, host: &str, port: u16) -> bool {
        if scheme != self.scheme || port != self.port {
            return false;
        }
        match self.host.strip_prefix("*.") {
            Some(rest) => host
                .strip_suffix(rest)
                .is_some_and(|front| front.len() > 1 && front.ends_with('.')),
            None => host == self.host,
        }
    }

    /// Whether the pattern names the origin's host itself (no wildcard): what a loopback
    /// or link-local address needs to be reached.
    pub fn names(&self, scheme: &str, host: &str, port: u16) -> bool {
        !self.host.starts_with("*.") && self.matches(scheme, host, port)
    }

    /// The host (lower case), `*.rest` for a wildcard.
    pub fn host(&self) -> &str {
        &self.host
    }
}

impl std::fmt::Display for OriginPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://{}:{}", self.scheme, self.host, self.port)
    }
}
