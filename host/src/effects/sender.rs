//! Sending one request outside the cluster, or refusing it before connecting: the URL on a
//! host the plugin declared and an admin granted; no loopback or link-local address unless
//! a grant names the host itself; never the cluster's API server; each redirect checked
//! the same way before it is followed (by hand, at most [`MAX_REDIRECTS`]); names resolved
//! once and connected to as checked (the client's resolver refuses what the check refuses,
//! so a name cannot resolve elsewhere in between). Bounded: concurrency and rate per
//! plugin, a timeout per attempt, a cap on the body kept; sent again with backoff only
//! when the plugin marked the request as one that may be.

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::Url;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::effects::grants::{Pattern, host_port, matches, names};
use crate::runtime::types::{Header, OutboundRequest, Outcome, Response};

/// Most redirects followed for one request.
pub(crate) const MAX_REDIRECTS: usize = 5;

/// The bounds of one plugin's requests.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    /// Longest wait for one attempt (connecting, sending, reading the body).
    pub(crate) timeout: Duration,
    /// The most bytes of a body an answer keeps (the rest is cut, `truncated`).
    pub(crate) max_body: usize,
    /// Requests of one plugin in flight at once.
    pub(crate) concurrency: usize,
    /// Requests of one plugin begun per second.
    pub(crate) per_second: u32,
    /// Attempts after the first, for a request marked `retry`.
    pub(crate) retries: u32,
    /// Requests one plan may carry.
    pub(crate) per_plan: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(10),
            max_body: 8 * 1024,
            concurrency: 8,
            per_second: 50,
            retries: 3,
            per_plan: 16,
        }
    }
}

/// Where the cluster's API server is, as this host reaches it: never a request's target.
#[derive(Debug, Clone, Default)]
pub(crate) struct ApiServer {
    /// Host names (lower case).
    pub(crate) names: HashSet<String>,
    /// Addresses with their ports.
    pub(crate) addrs: HashSet<SocketAddr>,
}

impl ApiServer {
    /// The API server of `cluster_url` (the client's), and the in-cluster names and the
    /// `KUBERNETES_SERVICE_HOST`/`_PORT` address when the host runs in a pod.
    pub(crate) async fn of(cluster_url: &str) -> Self {
        let mut names: HashSet<String> = [
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ]
        .into_iter()
        .map(String::from)
        .collect();
        let mut addrs = HashSet::new();
        let mut targets = Vec::new();
        if let Ok(url) = Url::parse(cluster_url)
            && let Some((host, port)) = host_port(&url)
        {
            targets.push((host, port));
        }
        if let (Ok(h), Ok(p)) = (
            std::env::var("KUBERNETES_SERVICE_HOST"),
            std::env::var("KUBERNETES_SERVICE_PORT"),
        ) && let Ok(port) = p.parse()
        {
            targets.push((h, port));
        }
        for (host, port) in targets {
            let bare = host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string();
            if let Ok(found) = tokio::net::lookup_host((bare.as_str(), port)).await {
                addrs.extend(found);
            }
            if bare.parse::<IpAddr>().is_err() {
                names.insert(host);
            }
        }
        ApiServer { names, addrs }
    }
}

/// Why a request was not sent: the rule, and what broke it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{rule}: {detail}")]
pub(crate) struct Refusal {
    /// The rule (`not-declared`, `not-granted`, `loopback`, `link-local`, `api-server`,
    /// `redirect`, `scheme`, `url`, `method`, `header`, `too-many`, `credential`).
    pub(crate) rule: &'static str,
    /// What broke it.
    pub(crate) detail: String,
}

impl Refusal {
    pub(crate) fn new(rule: &'static str, detail: impl Into<String>) -> Self {
        Refusal {
            rule,
            detail: detail.into(),
        }
    }
}

/// What is loopback, link-local or unspecified: reached only when a grant names the host.
fn internal(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) if v4.is_loopback() || v4.is_unspecified() => Some("loopback"),
        IpAddr::V4(v4) if v4.is_link_local() => Some("link-local"),
        IpAddr::V6(v6) if v6.is_loopback() || v6.is_unspecified() => Some("loopback"),
        IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80 => Some("link-local"),
        IpAddr::V6(v6) => v6.to_ipv4_mapped().and_then(|v4| internal(IpAddr::V4(v4))),
        IpAddr::V4(_) => None,
    }
}

/// The addresses a name may be connected to: the rules that need no port. `by_name`: the
/// name is granted by itself (loopback and link-local allowed).
fn address_allowed(ip: IpAddr, by_name: bool, api: &ApiServer) -> Result<(), Refusal> {
    if let Some(rule) = internal(ip).filter(|_| !by_name) {
        return Err(Refusal::new(
            rule,
            format!("{ip} is a {rule} address and no grant names its host"),
        ));
    }
    // The API server on a routable address: refused whatever the port (it is never an
    // outside API). On loopback (a local control plane) the port tells it apart.
    if internal(ip).is_none() && api.addrs.iter().any(|a| a.ip() == ip) {
        return Err(Refusal::new(
            "api-server",
            format!("{ip} is the cluster's API server"),
        ));
    }
    Ok(())
}

/// The client's resolver: refuses a name whose addresses the checks refuse, so the
/// connection goes only where [`Sender::check_addresses`] looked.
struct CheckedResolver {
    by_name: Arc<HashSet<String>>,
    api: Arc<ApiServer>,
}

impl reqwest::dns::Resolve for CheckedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_ascii_lowercase();
        let by_name = self.by_name.contains(&host);
        let api = self.api.clone();
        Box::pin(async move {
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            for a in &found {
                address_allowed(a.ip(), by_name, &api)?;
            }
            let addrs: reqwest::dns::Addrs = Box::new(found.into_iter());
            Ok(addrs)
        })
    }
}

/// One plugin's sender: its grants, its client, its bounds.
pub(crate) struct Sender {
    client: reqwest::Client,
    grants: Vec<Pattern>,
    limits: Limits,
    api: Arc<ApiServer>,
    permits: tokio::sync::Semaphore,
    /// When the next request may begin (the rate).
    next_start: Mutex<Instant>,
}

impl Sender {
    /// A sender with `grants` (the admin's patterns for the plugin).
    pub(crate) fn new(
        grants: Vec<Pattern>,
        limits: Limits,
        api: Arc<ApiServer>,
    ) -> Result<Self, String> {
        let by_name: HashSet<String> = grants
            .iter()
            .map(|g| {
                g.host()
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_string()
            })
            .filter(|h| !h.starts_with("*."))
            .collect();
        // The process's one TLS stack (main installs it; a test may come here first).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(CheckedResolver {
                by_name: Arc::new(by_name),
                api: api.clone(),
            })
            .user_agent(concat!("wasmop/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("building the HTTP client: {e}"))?;
        Ok(Sender {
            client,
            grants,
            permits: tokio::sync::Semaphore::new(limits.concurrency.max(1)),
            next_start: Mutex::new(Instant::now()),
            limits,
            api,
        })
    }

    /// The bounds in force.
    pub(crate) fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The rules a URL alone breaks: scheme, declared, granted, the API server's names.
    pub(crate) fn check_url(&self, declared: &[Pattern], url: &Url) -> Result<(), Refusal> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Refusal::new(
                "scheme",
                format!("`{}` is not http or https", url.scheme()),
            ));
        }
        let Some((host, _)) = host_port(url) else {
            return Err(Refusal::new("url", format!("{url} has no host")));
        };
        if self.api.names.contains(&host) {
            return Err(Refusal::new(
                "api-server",
                format!("{host} is the cluster's API server"),
            ));
        }
        let origin = origin(url);
        if !declared.iter().any(|p| matches(p, url)) {
            return Err(Refusal::new(
                "not-declared",
                format!("{origin} is not among the plugin's outbound hosts"),
            ));
        }
        if !self.grants.iter().any(|p| matches(p, url)) {
            return Err(Refusal::new(
                "not-granted",
                format!("{origin} is declared but not granted to the plugin (--outbound-grant)"),
            ));
        }
        Ok(())
    }

    /// The rules the URL's addresses break: loopback and link-local unless a grant names
    /// the host, the API server (on loopback, by its port).
    pub(crate) async fn check_addresses(&self, url: &Url) -> Result<(), Refusal> {
        let Some((host, port)) = host_port(url) else {
            return Err(Refusal::new("url", format!("{url} has no host")));
        };
        let by_name = self.grants.iter().any(|g| names(g, url));
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let found: Vec<SocketAddr> = match tokio::net::lookup_host((bare, port)).await {
            Ok(found) => found.collect(),
            // Not refused: the send fails the same way and says so.
            Err(_) => return Ok(()),
        };
        for a in &found {
            if self.api.addrs.contains(a) {
                return Err(Refusal::new(
                    "api-server",
                    format!("{a} is the cluster's API server"),
                ));
            }
            address_allowed(a.ip(), by_name, &self.api)?;
        }
        Ok(())
    }

    /// Waits for a slot under the rate.
    async fn paced(&self) {
        let wait = {
            let mut next = self.next_start.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            let start = (*next).max(now);
            *next = start + Duration::from_secs(1) / self.limits.per_second.max(1);
            start - now
        };
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }

    /// Sends `request` (with `credential`, the header's value, when it names one) and
    /// answers what came of it: a response, a refusal (nothing sent), or a failure.
    pub(crate) async fn send(
        &self,
        declared: &[Pattern],
        request: &OutboundRequest,
        credential: Option<(&str, String)>,
    ) -> Outcome {
        let mut attempt = 0;
        loop {
            let outcome = self.send_once(declared, request, credential.as_ref()).await;
            let again = request.retry
                && attempt < self.limits.retries
                && match &outcome {
                    Outcome::Failed(_) => true,
                    Outcome::Response(r) => matches!(r.status, 429 | 500 | 502 | 503 | 504),
                    Outcome::Refused(_) => false,
                };
            if !again {
                return outcome;
            }
            attempt += 1;
            tokio::time::sleep(Duration::from_millis(200) * 2u32.pow(attempt - 1)).await;
        }
    }

    async fn send_once(
        &self,
        declared: &[Pattern],
        request: &OutboundRequest,
        credential: Option<&(&str, String)>,
    ) -> Outcome {
        let method = match request.method.to_ascii_uppercase().as_str() {
            "GET" => reqwest::Method::GET,
            "POST" => reqwest::Method::POST,
            "PUT" => reqwest::Method::PUT,
            "PATCH" => reqwest::Method::PATCH,
            "DELETE" => reqwest::Method::DELETE,
            other => {
                return refused(Refusal::new(
                    "method",
                    format!("`{other}` (GET, POST, PUT, PATCH or DELETE)"),
                ));
            }
        };
        let mut url = match Url::parse(&request.url) {
            Ok(u) => u,
            Err(e) => return refused(Refusal::new("url", format!("`{}`: {e}", request.url))),
        };
        let mut headers = match headers_of(request) {
            Ok(h) => h,
            Err(r) => return refused(r),
        };
        let first_origin = origin(&url);
        let mut method = method;
        let mut body = request.body.clone();
        let _permit = self.permits.acquire().await.expect("never closed");
        self.paced().await;
        for hop in 0..=MAX_REDIRECTS {
            if let Err(r) = self.check_url(declared, &url) {
                return refused(if hop == 0 {
                    r
                } else {
                    Refusal::new("redirect", format!("to {}: {r}", origin(&url)))
                });
            }
            if let Err(r) = self.check_addresses(&url).await {
                return refused(if hop == 0 {
                    r
                } else {
                    Refusal::new("redirect", format!("to {}: {r}", origin(&url)))
                });
            }
            let mut builder = self
                .client
                .request(method.clone(), url.clone())
                .headers(headers.clone());
            // The credential goes only to the origin the plugin named.
            if let Some((name, value)) = credential.filter(|_| origin(&url) == first_origin) {
                let Ok(mut value) = HeaderValue::from_str(value) else {
                    return refused(Refusal::new(
                        "credential",
                        "the Secret's value is not a valid header value",
                    ));
                };
                value.set_sensitive(true);
                builder = builder.header(*name, value);
            }
            if let Some(b) = &body {
                builder = builder.body(b.clone());
            }
            let answer = tokio::time::timeout(self.limits.timeout, async {
                let response = builder.send().await.map_err(|e| failure(&e))?;
                let status = response.status();
                if status.is_redirection()
                    && let Some(location) = response.headers().get(reqwest::header::LOCATION)
                {
                    let next = location
                        .to_str()
                        .ok()
                        .and_then(|l| url.join(l).ok())
                        .ok_or_else(|| {
                            Outcome::Refused("redirect: an unreadable Location".into())
                        })?;
                    return Ok(Err((status.as_u16(), next)));
                }
                Ok(Ok(self.read(response, &request.keep_headers).await))
            })
            .await;
            match answer {
                Err(_) => {
                    return Outcome::Failed(format!(
                        "timed out after {} ms",
                        self.limits.timeout.as_millis()
                    ));
                }
                Ok(Err(outcome)) => return outcome,
                Ok(Ok(Ok(outcome))) => return outcome,
                Ok(Ok(Err((status, next)))) => {
                    // 303, and 301/302 after a POST, go on as GET without a body.
                    if status == 303
                        || (matches!(status, 301 | 302) && method == reqwest::Method::POST)
                    {
                        method = reqwest::Method::GET;
                        body = None;
                        headers.remove(reqwest::header::CONTENT_TYPE);
                    }
                    url = next;
                }
            }
        }
        Outcome::Failed(format!("more than {MAX_REDIRECTS} redirects"))
    }

    /// The response as an answer: status, the headers asked for, the body up to the cap.
    async fn read(&self, mut response: reqwest::Response, keep: &[String]) -> Outcome {
        let status = response.status().as_u16();
        let headers = keep
            .iter()
            .filter_map(|name| {
                let v = response.headers().get(name.as_str())?;
                Some(Header {
                    name: name.to_ascii_lowercase(),
                    value: String::from_utf8_lossy(v.as_bytes()).into_owned(),
                })
            })
            .collect();
        let mut body = Vec::new();
        let mut truncated = false;
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    let room = self.limits.max_body - body.len();
                    if chunk.len() > room {
                        body.extend_from_slice(&chunk[..room]);
                        truncated = true;
                        break;
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => {
                    return Outcome::Failed(format!("reading the body: {}", failure_text(&e)));
                }
            }
        }
        Outcome::Response(Response {
            status,
            headers,
            body,
            truncated,
        })
    }
}

fn refused(r: Refusal) -> Outcome {
    Outcome::Refused(r.to_string())
}

/// `scheme://host:port` of `url`.
pub(crate) fn origin(url: &Url) -> String {
    match host_port(url) {
        Some((h, p)) => format!("{}://{h}:{p}", url.scheme()),
        None => url.scheme().to_string(),
    }
}

/// The origin of a URL given as text, for logs (a path or query may carry data; an origin
/// does not).
pub(crate) fn origin_of(url: &str) -> String {
    Url::parse(url).map_or_else(|_| "an unreadable URL".to_string(), |u| origin(&u))
}

/// The request's headers, and its idempotency key; `Host` and hop-by-hop headers refused.
fn headers_of(request: &OutboundRequest) -> Result<HeaderMap, Refusal> {
    let mut map = HeaderMap::new();
    for h in &request.headers {
        let name = HeaderName::from_bytes(h.name.as_bytes())
            .map_err(|_| Refusal::new("header", format!("`{}` is not a header name", h.name)))?;
        if matches!(
            name.as_str(),
            "host" | "connection" | "transfer-encoding" | "content-length" | "upgrade" | "te"
        ) {
            return Err(Refusal::new(
                "header",
                format!("`{name}` is set by the host, never by a plugin"),
            ));
        }
        let value = HeaderValue::from_str(&h.value)
            .map_err(|_| Refusal::new("header", format!("`{name}`: not a header value")))?;
        map.append(name, value);
    }
    if let Some(key) = &request.idempotency_key {
        let value = HeaderValue::from_str(key)
            .map_err(|_| Refusal::new("header", "the idempotency key is not a header value"))?;
        map.insert("idempotency-key", value);
    }
    Ok(map)
}

/// A failed send, or a refusal the resolver made (a name that resolves where it may not).
fn failure(e: &reqwest::Error) -> Outcome {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(r) = s.downcast_ref::<Refusal>() {
            return Outcome::Refused(r.to_string());
        }
        source = s.source();
    }
    Outcome::Failed(failure_text(e))
}

/// A failure's words, the causes included, on one line (never a header: reqwest's errors
/// name the URL at most).
fn failure_text(e: &reqwest::Error) -> String {
    let mut text = if e.is_timeout() {
        "timed out".to_string()
    } else if e.is_connect() {
        "connecting".to_string()
    } else {
        "sending".to_string()
    };
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_addresses_need_a_grant_by_name_and_the_api_server_never() {
        let api = ApiServer {
            names: HashSet::new(),
            addrs: [
                "10.96.0.1:443".parse().unwrap(),
                "127.0.0.1:6443".parse().unwrap(),
            ]
            .into_iter()
            .collect(),
        };
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(
            address_allowed(ip("127.0.0.1"), false, &api)
                .unwrap_err()
                .rule,
            "loopback"
        );
        assert_eq!(
            address_allowed(ip("169.254.169.254"), false, &api)
                .unwrap_err()
                .rule,
            "link-local"
        );
        assert_eq!(
            address_allowed(ip("::ffff:169.254.169.254"), false, &api)
                .unwrap_err()
                .rule,
            "link-local"
        );
        assert_eq!(
            address_allowed(ip("fe80::1"), false, &api)
                .unwrap_err()
                .rule,
            "link-local"
        );
        assert!(address_allowed(ip("127.0.0.1"), true, &api).is_ok());
        assert!(address_allowed(ip("93.184.216.34"), false, &api).is_ok());
        // Routable: the API server's address is refused on any port, even granted.
        assert_eq!(
            address_allowed(ip("10.96.0.1"), true, &api)
                .unwrap_err()
                .rule,
            "api-server"
        );
    }

    #[test]
    fn a_plugin_may_not_set_the_host_or_framing_headers() {
        let mut r = OutboundRequest {
            key: "k".into(),
            method: "POST".into(),
            url: "https://api.example.com/".into(),
            headers: vec![Header {
                name: "Host".into(),
                value: "evil.net".into(),
            }],
            body: None,
            credential: None,
            idempotency_key: Some("abc".into()),
            retry: false,
            keep_headers: Vec::new(),
        };
        assert_eq!(headers_of(&r).unwrap_err().rule, "header");
        r.headers[0].name = "x-zone".into();
        let h = headers_of(&r).unwrap();
        assert_eq!(h["idempotency-key"], "abc");
        assert_eq!(h["x-zone"], "evil.net");
    }
}
