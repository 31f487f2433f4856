//! The host's reads from one registry, every one bounded before it is held: a manifest at
//! most [`MAX_MANIFEST_BYTES`] (the OCI distribution spec's recommended limit), an error
//! body at most [`MAX_ERROR_BYTES`] (only the registry's error messages reach a status, cut
//! to [`MAX_DETAIL_CHARS`]), a token answer at most [`MAX_TOKEN_BYTES`], a blob at most the
//! caller's cap; redirects only to the registry the reference names, unless the host allows
//! more ([`Redirects::Anywhere`]), and never to a loopback, link-local or unspecified
//! address the reference did not name. Every read is also bounded in time by the caller.
//!
//! The host pulls through this reader; `wasmop publish` (the author's own tool, against the
//! registry the author names) pushes with `oci-client`.

use std::net::IpAddr;
use std::sync::Mutex;

use http::StatusCode;
use http::header::{ACCEPT, AUTHORIZATION, HeaderMap, WWW_AUTHENTICATE};
use oci_client::Reference;

use crate::oci::credentials::Credentials;
use crate::oci::error::PullError;

/// The largest manifest read (the OCI distribution spec asks registries to accept at
/// least this much, and clients to expect no more).
pub(crate) const MAX_MANIFEST_BYTES: u64 = 4 << 20;
/// The most of an error answer read.
pub(crate) const MAX_ERROR_BYTES: u64 = 4 << 10;
/// The largest token answer read.
pub(crate) const MAX_TOKEN_BYTES: u64 = 64 << 10;
/// The most characters of a registry's own words that reach a message.
pub(crate) const MAX_DETAIL_CHARS: usize = 200;
/// Most redirects followed for one request.
const MAX_REDIRECTS: usize = 5;

/// Where a registry may send the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Redirects {
    /// Only to the registry the reference names (its host and port).
    #[default]
    SameRegistry,
    /// Anywhere but a loopback, link-local or unspecified address the reference did not
    /// name (registries that serve blobs from a CDN: `--registry-redirects anywhere`).
    Anywhere,
}

/// How a reader talks to its registry.
#[derive(Debug, Clone)]
pub(crate) struct ReaderOptions {
    /// Plain HTTP.
    pub insecure: bool,
    /// Extra CA certificates (PEM).
    pub extra_roots: Vec<Vec<u8>>,
    /// Where redirects may go.
    pub redirects: Redirects,
}

/// Reads from one registry.
pub(crate) struct Reader {
    http: reqwest::Client,
    base: String,
    credentials: Credentials,
    /// A bearer token the registry's token service gave.
    token: Mutex<Option<String>>,
}

/// Whether `ip` is an address the host must not be sent to unless the reference named it.
fn internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback() || v4.is_link_local() || v4.is_unspecified(),
        IpAddr::V6(v6) => {
            v6.is_loopback()
                || v6.is_unspecified()
                || (v6.segments()[0] & 0xffc0) == 0xfe80
                || v6
                    .to_ipv4_mapped()
                    .is_some_and(|v4| internal(IpAddr::V4(v4)))
        }
    }
}

/// Whether a host name (or address) is loopback, link-local or unspecified.
fn internal_host(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || bare.parse::<IpAddr>().is_ok_and(internal)
}

/// `host[:port]` of `url`.
fn authority(url: &reqwest::Url) -> String {
    match (url.host_str(), url.port_or_known_default()) {
        (Some(h), Some(p)) => format!("{h}:{p}"),
        (Some(h), None) => h.to_string(),
        _ => String::new(),
    }
}

/// Whether a request to `registry` (`host[:port]`, as the reference names it) may follow a
/// redirect to `next`.
pub(crate) fn may_redirect(registry: &reqwest::Url, next: &reqwest::Url, rule: Redirects) -> bool {
    if authority(next) == authority(registry) && next.scheme() == registry.scheme() {
        return true;
    }
    if rule != Redirects::Anywhere {
        return false;
    }
    let named_internal = registry.host_str().is_some_and(internal_host);
    let to_internal = next.host_str().is_none_or(internal_host);
    named_internal || !to_internal
}

/// The registry's own words in an error answer (the `errors[].message` of the OCI error
/// envelope), cut short, on one line; never the body itself.
pub(crate) fn detail_of(body: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    struct Envelope {
        #[serde(default)]
        errors: Vec<Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        #[serde(default)]
        code: String,
        #[serde(default)]
        message: String,
    }
    let Ok(envelope) = serde_json::from_slice::<Envelope>(body) else {
        return String::new();
    };
    let words = envelope
        .errors
        .iter()
        .map(|e| {
            if e.message.is_empty() {
                e.code.clone()
            } else {
                e.message.clone()
            }
        })
        .collect::<Vec<_>>()
        .join("; ");
    clip(&words)
}

/// `text` on one line, without control characters, at most [`MAX_DETAIL_CHARS`].
pub(crate) fn clip(text: &str) -> String {
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let line = line.trim();
    match line.char_indices().nth(MAX_DETAIL_CHARS) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_string(),
    }
}

/// A bounded read's outcome: the bytes, or how many were read when the cap was passed.
async fn read_capped(mut response: reqwest::Response, cap: u64) -> Result<Vec<u8>, ReadError> {
    if response.content_length().is_some_and(|n| n > cap) {
        return Err(ReadError::Over(response.content_length().unwrap_or(cap)));
    }
    let mut out = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(ReadError::Http)? {
        if out.len() as u64 + chunk.len() as u64 > cap {
            return Err(ReadError::Over(out.len() as u64 + chunk.len() as u64));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// Why a read stopped.
#[derive(Debug)]
enum ReadError {
    /// Over the cap, after this many bytes (or as the answer announced).
    Over(u64),
    /// The transfer failed.
    Http(reqwest::Error),
}

/// The parameters of a `Bearer` challenge.
#[derive(Debug, Default, PartialEq, Eq)]
struct Challenge {
    realm: String,
    service: Option<String>,
    scope: Option<String>,
}

/// Parses `Bearer realm="…",service="…",scope="…"`; `None` for other schemes.
fn bearer(headers: &HeaderMap) -> Option<Challenge> {
    let value = headers.get(WWW_AUTHENTICATE)?.to_str().ok()?;
    let rest = value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("bearer "))?;
    let mut c = Challenge::default();
    for part in split_params(rest) {
        let Some((k, v)) = part.split_once('=') else {
            continue;
        };
        let v = v.trim().trim_matches('"').to_string();
        match k.trim() {
            "realm" => c.realm = v,
            "service" => c.service = Some(v),
            "scope" => c.scope = Some(v),
            _ => {}
        }
    }
    (!c.realm.is_empty()).then_some(c)
}

/// Splits challenge parameters at commas outside quotes.
fn split_params(s: &str) -> Vec<String> {
    let (mut out, mut cur, mut quoted) = (Vec::new(), String::new(), false);
    for ch in s.chars() {
        match ch {
            '"' => {
                quoted = !quoted;
                cur.push(ch);
            }
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            _ => cur.push(ch),
        }
    }
    out.push(cur);
    out
}

impl Reader {
    /// A reader of `registry` (`host[:port]`).
    pub(crate) fn new(
        registry: &str,
        credentials: Credentials,
        options: &ReaderOptions,
    ) -> Result<Self, PullError> {
        let scheme = if options.insecure { "http" } else { "https" };
        let base = format!("{scheme}://{registry}");
        let origin = reqwest::Url::parse(&base).map_err(|e| PullError::InvalidReference {
            reference: registry.to_string(),
            why: e.to_string(),
        })?;
        let rule = options.redirects;
        let policy = reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() > MAX_REDIRECTS {
                return attempt.error(format!("more than {MAX_REDIRECTS} redirects"));
            }
            if may_redirect(&origin, attempt.url(), rule) {
                attempt.follow()
            } else {
                let to = authority(attempt.url());
                attempt.error(format!(
                    "the registry redirected to {to}, another address (--registry-redirects anywhere allows other registries' hosts, never a loopback or link-local one the reference did not name)"
                ))
            }
        });
        let mut roots = Vec::new();
        for pem in &options.extra_roots {
            roots.push(
                reqwest::Certificate::from_pem(pem).map_err(|e| PullError::Tls {
                    reference: registry.to_string(),
                    why: format!("an extra CA certificate: {e}"),
                })?,
            );
        }
        let http = reqwest::Client::builder()
            .redirect(policy)
            .tls_certs_merge(roots)
            // No timeout of its own: the caller bounds each whole call, connecting included,
            // and says `PullTimeout` (a timeout here would race it and say something else).
            .user_agent(concat!("wasmop/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| PullError::Transport {
                reference: registry.to_string(),
                why: format!("building the HTTP client: {e}"),
            })?;
        Ok(Reader {
            http,
            base,
            credentials,
            token: Mutex::new(None),
        })
    }

    fn url(&self, reference: &Reference, kind: &str, id: &str) -> String {
        format!("{}/v2/{}/{kind}/{id}", self.base, reference.repository())
    }

    fn authorize(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        if let Some(token) = self.token.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            return request.header(AUTHORIZATION, format!("Bearer {token}"));
        }
        match &self.credentials {
            Credentials::Basic { username, password } => {
                request.basic_auth(username, Some(password))
            }
            Credentials::Anonymous => request,
        }
    }

    /// Sends `method url`; on a `Bearer` challenge, fetches a token and sends it again once.
    async fn send(
        &self,
        reference: &Reference,
        method: reqwest::Method,
        url: &str,
        accept: &str,
    ) -> Result<reqwest::Response, PullError> {
        let whole = reference.whole();
        let go = || {
            self.authorize(self.http.request(method.clone(), url))
                .header(ACCEPT, accept)
                .send()
        };
        let response = go().await.map_err(|e| transport(&whole, &e))?;
        if response.status() != StatusCode::UNAUTHORIZED {
            return Ok(response);
        }
        let Some(challenge) = bearer(response.headers()) else {
            return Ok(response);
        };
        self.fetch_token(reference, &challenge).await?;
        go().await.map_err(|e| transport(&whole, &e))
    }

    /// Asks the registry's token service (the challenge's realm) for a pull token.
    async fn fetch_token(
        &self,
        reference: &Reference,
        challenge: &Challenge,
    ) -> Result<(), PullError> {
        let whole = reference.whole();
        let realm = reqwest::Url::parse(&challenge.realm).map_err(|e| PullError::Transport {
            reference: whole.clone(),
            why: format!(
                "the registry's token service `{}`: {e}",
                clip(&challenge.realm)
            ),
        })?;
        let origin = reqwest::Url::parse(&self.base).expect("the base parsed before");
        if !may_redirect(&origin, &realm, Redirects::Anywhere) {
            return Err(PullError::Transport {
                reference: whole,
                why: format!(
                    "the registry's token service is at {}, a loopback or link-local address the reference did not name",
                    authority(&realm)
                ),
            });
        }
        let scope = challenge
            .scope
            .clone()
            .unwrap_or_else(|| format!("repository:{}:pull", reference.repository()));
        let mut query = vec![("scope", scope)];
        if let Some(s) = &challenge.service {
            query.push(("service", s.clone()));
        }
        let mut request = self.http.get(realm).query(&query);
        if let Credentials::Basic { username, password } = &self.credentials {
            request = request.basic_auth(username, Some(password));
        }
        let response = request.send().await.map_err(|e| transport(&whole, &e))?;
        let status = response.status();
        let body = read_capped(response, MAX_TOKEN_BYTES)
            .await
            .map_err(|e| read_error(&whole, e, "the token answer", MAX_TOKEN_BYTES))?;
        if !status.is_success() {
            return Err(status_error(&whole, status, &body));
        }
        #[derive(serde::Deserialize)]
        struct Token {
            token: Option<String>,
            access_token: Option<String>,
        }
        let token: Token = serde_json::from_slice(&body).map_err(|e| PullError::Transport {
            reference: whole.clone(),
            why: format!("the token service's answer is not a token: {e}"),
        })?;
        let token = token
            .token
            .or(token.access_token)
            .ok_or_else(|| PullError::Unauthorized {
                reference: whole,
                detail: ": the token service gave no token".into(),
            })?;
        *self.token.lock().unwrap_or_else(|e| e.into_inner()) = Some(token);
        Ok(())
    }

    /// Fails `response` with its status and the registry's words (a bounded read).
    async fn failed(reference: &Reference, response: reqwest::Response) -> PullError {
        let status = response.status();
        let body = read_capped(response, MAX_ERROR_BYTES)
            .await
            .unwrap_or_default();
        status_error(&reference.whole(), status, &body)
    }

    /// The digest of the manifest `reference` names: a `HEAD` and its
    /// `Docker-Content-Digest`, or else the digest of the manifest itself (a bounded `GET`).
    pub(crate) async fn resolve(
        &self,
        reference: &Reference,
        accept: &str,
    ) -> Result<String, PullError> {
        let url = self.url(reference, "manifests", &manifest_id(reference));
        let response = self
            .send(reference, reqwest::Method::HEAD, &url, accept)
            .await?;
        if !response.status().is_success() {
            return Err(status_error(&reference.whole(), response.status(), &[]));
        }
        let header = response
            .headers()
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let digest = match header {
            Some(d) if d.starts_with("sha256:") => d,
            _ => self.manifest(reference, accept).await?.1,
        };
        if let Some(want) = reference.digest()
            && want != digest
        {
            return Err(PullError::DigestMismatch {
                reference: reference.whole(),
                expected: want.to_string(),
                actual: digest,
            });
        }
        Ok(digest)
    }

    /// The manifest `reference` names, at most [`MAX_MANIFEST_BYTES`], with its digest
    /// (checked when the reference has one).
    pub(crate) async fn manifest(
        &self,
        reference: &Reference,
        accept: &str,
    ) -> Result<(Vec<u8>, String), PullError> {
        let url = self.url(reference, "manifests", &manifest_id(reference));
        let response = self
            .send(reference, reqwest::Method::GET, &url, accept)
            .await?;
        if !response.status().is_success() {
            return Err(Self::failed(reference, response).await);
        }
        let whole = reference.whole();
        let raw = read_capped(response, MAX_MANIFEST_BYTES)
            .await
            .map_err(|e| read_error(&whole, e, "the manifest", MAX_MANIFEST_BYTES))?;
        let digest = crate::runtime::plugin::digest_of(&raw);
        if let Some(want) = reference.digest()
            && want != digest
        {
            return Err(PullError::DigestMismatch {
                reference: whole,
                expected: want.to_string(),
                actual: digest,
            });
        }
        Ok((raw, digest))
    }

    /// The blob `digest` of `reference`'s repository, at most `cap` bytes.
    pub(crate) async fn blob(
        &self,
        reference: &Reference,
        digest: &str,
        cap: u64,
    ) -> Result<Vec<u8>, PullError> {
        let url = self.url(reference, "blobs", digest);
        let response = self
            .send(reference, reqwest::Method::GET, &url, "*/*")
            .await?;
        if !response.status().is_success() {
            return Err(Self::failed(reference, response).await);
        }
        let whole = reference.whole();
        read_capped(response, cap).await.map_err(|e| match e {
            ReadError::Over(size) => PullError::TooLarge {
                reference: whole.clone(),
                size,
                cap,
            },
            ReadError::Http(e) => transport(&whole, &e),
        })
    }
}

/// The tag or digest of `reference` as the manifest URL names it.
fn manifest_id(reference: &Reference) -> String {
    match reference.digest() {
        Some(d) => d.to_string(),
        None => reference.tag().unwrap_or("latest").to_string(),
    }
}

fn read_error(reference: &str, e: ReadError, what: &str, cap: u64) -> PullError {
    match e {
        ReadError::Over(n) => PullError::Transport {
            reference: reference.to_string(),
            why: format!("{what} is over {cap} bytes (read {n}): refused"),
        },
        ReadError::Http(e) => transport(reference, &e),
    }
}

/// The error of a request that got no answer (or a refused redirect).
fn transport(reference: &str, e: &reqwest::Error) -> PullError {
    let mut chain = e.to_string();
    let mut next = std::error::Error::source(e);
    while let Some(s) = next {
        chain.push_str(": ");
        chain.push_str(&s.to_string());
        next = s.source();
    }
    if e.is_timeout() {
        return PullError::Transport {
            reference: reference.to_string(),
            why: clip(&chain),
        };
    }
    if [
        "certificate",
        "tls",
        "TLS",
        "InvalidContentType",
        "CorruptMessage",
    ]
    .iter()
    .any(|w| chain.contains(w))
    {
        PullError::Tls {
            reference: reference.to_string(),
            why: clip(&chain),
        }
    } else {
        PullError::Transport {
            reference: reference.to_string(),
            why: chain.chars().take(4 * MAX_DETAIL_CHARS).collect(),
        }
    }
}

/// The error of an answer with `status` and the (bounded) `body`.
fn status_error(reference: &str, status: StatusCode, body: &[u8]) -> PullError {
    let words = detail_of(body);
    let detail = if words.is_empty() {
        String::new()
    } else {
        format!(": {words}")
    };
    let reference = reference.to_string();
    match status.as_u16() {
        401 => PullError::Unauthorized { reference, detail },
        403 => PullError::Forbidden { reference, detail },
        404 => PullError::NotFound { reference, detail },
        code => PullError::Transport {
            reference,
            why: format!("the registry answered {code}{detail}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> reqwest::Url {
        reqwest::Url::parse(s).unwrap()
    }

    #[test]
    fn redirects_stay_on_the_registry_unless_allowed_and_never_go_inside() {
        let reg = url("https://ghcr.io/v2/o/p/blobs/sha256:a");
        let same = url("https://ghcr.io:443/v2/o/p/blobs/other");
        let cdn = url("https://pkg-containers.example/blob");
        let inside = [
            "http://127.0.0.1:8080/x",
            "http://localhost/x",
            "http://169.254.169.254/latest/meta-data",
            "http://[::1]/x",
            "http://[fe80::1]/x",
            "http://0.0.0.0/x",
            "http://[::ffff:127.0.0.1]/x",
        ];
        assert!(may_redirect(&reg, &same, Redirects::SameRegistry));
        assert!(!may_redirect(&reg, &cdn, Redirects::SameRegistry));
        assert!(may_redirect(&reg, &cdn, Redirects::Anywhere));
        for i in inside {
            assert!(!may_redirect(&reg, &url(i), Redirects::Anywhere), "{i}");
            assert!(!may_redirect(&reg, &url(i), Redirects::SameRegistry), "{i}");
        }
        // Plain HTTP on the same host is another place.
        assert!(!may_redirect(
            &reg,
            &url("http://ghcr.io/x"),
            Redirects::SameRegistry
        ));
        // A registry on loopback, named so: its own port only, unless allowed.
        let local = url("http://127.0.0.1:5000/v2/p/manifests/v1");
        assert!(may_redirect(
            &local,
            &url("http://127.0.0.1:5000/elsewhere"),
            Redirects::SameRegistry
        ));
        assert!(!may_redirect(
            &local,
            &url("http://127.0.0.1:6443/api"),
            Redirects::SameRegistry
        ));
        assert!(may_redirect(
            &local,
            &url("http://127.0.0.1:6443/api"),
            Redirects::Anywhere
        ));
    }

    #[test]
    fn only_the_registrys_words_reach_a_message_cut_short() {
        let body = br#"{"errors":[{"code":"DENIED","message":"no\nway"},{"code":"X"}]}"#;
        assert_eq!(detail_of(body), "no way; X");
        assert_eq!(detail_of(b"<html>a proxy's page</html>"), "");
        let long = format!(r#"{{"errors":[{{"message":"{}"}}]}}"#, "a".repeat(5000));
        let cut = detail_of(long.as_bytes());
        assert_eq!(cut.chars().count(), MAX_DETAIL_CHARS + 1);
        assert!(cut.ends_with('…'));
    }

    #[test]
    fn bearer_challenges_parse() {
        let mut h = HeaderMap::new();
        h.insert(
            WWW_AUTHENTICATE,
            r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:o/p:pull,push""#
                .parse()
                .unwrap(),
        );
        assert_eq!(
            bearer(&h),
            Some(Challenge {
                realm: "https://auth.example/token".into(),
                service: Some("registry.example".into()),
                scope: Some("repository:o/p:pull,push".into()),
            })
        );
        h.insert(WWW_AUTHENTICATE, r#"Basic realm="r""#.parse().unwrap());
        assert_eq!(bearer(&h), None);
    }
}
