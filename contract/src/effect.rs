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
/// more labels in front of the rest), `http://127.0.0.1:18080`, `http://127.0.0.1:*` (any
/// port); no port: the scheme's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OriginPattern {
    scheme: String,
    /// Lower case; `*.rest` for a wildcard.
    host: String,
    /// `None`: any port.
    port: Option<u16>,
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
            Some((h, "*")) if !h.contains(':') || h.starts_with('[') => (h, None),
            Some((h, p)) if !h.ends_with(']') || rest.starts_with('[') => match p.parse::<u16>() {
                Ok(port) if !h.contains(':') || h.starts_with('[') => (h, Some(port)),
                _ => (rest, Some(default_port)),
            },
            _ => (rest, Some(default_port)),
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
        if scheme != self.scheme || self.port.is_some_and(|p| p != port) {
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
        match self.port {
            Some(port) => write!(f, "{}://{}:{port}", self.scheme, self.host),
            None => write!(f, "{}://{}:*", self.scheme, self.host),
        }
    }
}

impl OutboundRequest {
    /// A request under `key`: `method` (`GET`, `POST`, `PUT`, `PATCH`, `DELETE`) to `url`.
    pub fn new(key: impl Into<String>, method: &str, url: impl Into<String>) -> Self {
        OutboundRequest {
            key: key.into(),
            method: method.to_ascii_uppercase(),
            url: url.into(),
            headers: Vec::new(),
            body: None,
            credential: None,
            idempotency_key: None,
            retry: false,
            keep_headers: Vec::new(),
        }
    }

    /// `GET url` under `key`.
    pub fn get(key: impl Into<String>, url: impl Into<String>) -> Self {
        Self::new(key, "GET", url)
    }

    /// `POST url` under `key`.
    pub fn post(key: impl Into<String>, url: impl Into<String>) -> Self {
        Self::new(key, "POST", url)
    }

    /// `PUT url` under `key`.
    pub fn put(key: impl Into<String>, url: impl Into<String>) -> Self {
        Self::new(key, "PUT", url)
    }

    /// `DELETE url` under `key`.
    pub fn delete(key: impl Into<String>, url: impl Into<String>) -> Self {
        Self::new(key, "DELETE", url)
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push(Header {
            name: name.into(),
            value: value.into(),
        });
        self
    }

    /// `value` as a JSON body, with `Content-Type: application/json`.
    pub fn json(mut self, value: &impl Serialize) -> Self {
        self.body = Some(serde_json::to_vec(value).expect("a JSON value serializes"));
        self.header("content-type", "application/json")
    }

    /// Sends `key` as `Idempotency-Key`.
    pub fn idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }

    /// Lets the host send it again after a failure, a 429 or a 5xx (with backoff).
    pub fn retry(mut self) -> Self {
        self.retry = true;
        self
    }

    /// Keeps the response header `name` in the answer.
    pub fn keep_header(mut self, name: &str) -> Self {
        self.keep_headers.push(name.into());
        self
    }

    /// Fills `header` from key `key` of Secret `secret` (the primary's namespace), after
    /// `prefix`: `.credential("Authorization", "Bearer ", "dns-token", "token")`.
    pub fn credential(mut self, header: &str, prefix: &str, secret: &str, key: &str) -> Self {
        self.credential = Some(Credential {
            header: header.into(),
            prefix: prefix.into(),
            secret: secret.into(),
            key: key.into(),
        });
        self
    }
}

impl Answer {
    /// The response, when one came.
    pub fn response(&self) -> Option<&Response> {
        match &self.outcome {
            Outcome::Response(r) => Some(r),
            _ => None,
        }
    }

    /// The response, when one came with a 2xx status.
    pub fn success(&self) -> Option<&Response> {
        self.response().filter(|r| (200..300).contains(&r.status))
    }

    /// The rule that refused it, when the host refused to send it.
    pub fn refused(&self) -> Option<&str> {
        match &self.outcome {
            Outcome::Refused(rule) => Some(rule),
            _ => None,
        }
    }

    /// Whether asking again may help: it failed (timeout, connection) or the answer was
    /// 429 or 5xx. A refusal or a 4xx stays as it is until the request changes.
    pub fn retryable(&self) -> bool {
        match &self.outcome {
            Outcome::Failed(_) => true,
            Outcome::Response(r) => r.status == 429 || r.status >= 500,
            Outcome::Refused(_) => false,
        }
    }
}

impl Response {
    /// The body as JSON of type `T`.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, String> {
        serde_json::from_slice(&self.body).map_err(|e| format!("the answer's body: {e}"))
    }

    /// The first kept header named `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value.as_str())
    }
}
