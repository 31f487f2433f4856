//! A registry that breaks the rules, on loopback and plain HTTP, for the host's refusals.
//! What it does depends on the repository asked for:
//!
//! - `endless/…`: a manifest whose `HEAD` names no digest and whose `GET` never ends;
//! - `error-body/…`: the same `HEAD`, then a `500` whose body never ends;
//! - `redirect/…`: the same `HEAD`, then a redirect to another address on this machine;
//! - `signatures/…`: the manifest it was given (with its digest), and a `.sig` manifest of
//!   [`SIGNATURES`] signatures, none of which it serves.
//!
//! It counts the requests it answered, by repository. Stopped when dropped.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// How many signatures the `.sig` manifest of `signatures/…` lists.
pub const SIGNATURES: usize = 10_000;

struct Shared {
    manifest: Vec<u8>,
    digest: String,
    elsewhere: String,
    requests: Mutex<HashMap<String, usize>>,
}

/// The running registry.
pub struct HostileRegistry {
    /// `127.0.0.1:PORT`.
    pub address: String,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn endless(fill: u8) -> Body {
    let chunk = Bytes::from(vec![fill; 64 << 10]);
    Body::from_stream(futures::stream::repeat_with(move || {
        Ok::<_, Infallible>(chunk.clone())
    }))
}

/// The headers of an OCI image manifest answer.
fn manifest_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        "application/vnd.oci.image.manifest.v1+json"
            .parse()
            .unwrap(),
    );
    headers
}

async fn manifests(
    State(shared): State<Arc<Shared>>,
    method: Method,
    Path((repo, reference)): Path<(String, String)>,
) -> Response {
    let kind = repo.split('/').next().unwrap_or_default().to_string();
    *shared
        .requests
        .lock()
        .unwrap()
        .entry(kind.clone())
        .or_default() += 1;
    let head = method == Method::HEAD;
    let no_digest = || (StatusCode::OK, "").into_response();
    match kind.as_str() {
        "endless" if head => no_digest(),
        "endless" => (
            [(
                header::CONTENT_TYPE,
                "application/vnd.oci.image.manifest.v1+json",
            )],
            endless(b' '),
        )
            .into_response(),
        "error-body" if head => no_digest(),
        "error-body" => (StatusCode::INTERNAL_SERVER_ERROR, endless(b'e')).into_response(),
        "redirect" if head => no_digest(),
        "redirect" => (
            StatusCode::TEMPORARY_REDIRECT,
            [(
                header::LOCATION,
                format!(
                    "http://{}/v2/{repo}/manifests/{reference}",
                    shared.elsewhere
                ),
            )],
        )
            .into_response(),
        "signatures" if reference.ends_with(".sig") => {
            let layers: Vec<serde_json::Value> = (0..SIGNATURES)
                .map(|i| {
                    serde_json::json!({
                        "mediaType": "application/vnd.dev.cosign.simplesigning.v1+json",
                        "digest": format!("sha256:{i:064x}"),
                        "size": 300,
                        "annotations": {"dev.cosignproject.cosign/signature": "AAAA"},
                    })
                })
                .collect();
            let body = serde_json::to_vec(&serde_json::json!({
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                    "digest": format!("sha256:{}", "0".repeat(64)), "size": 2},
                "layers": layers,
            }))
            .unwrap();
            (manifest_headers(), if head { Vec::new() } else { body }).into_response()
        }
        "signatures" => {
            let mut headers = manifest_headers();
            headers.insert("docker-content-digest", shared.digest.parse().unwrap());
            let body = if head {
                Vec::new()
            } else {
                shared.manifest.clone()
            };
            (headers, body).into_response()
        }
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn blobs(
    State(shared): State<Arc<Shared>>,
    Path((repo, _digest)): Path<(String, String)>,
) -> Response {
    let kind = format!("{} blob", repo.split('/').next().unwrap_or_default());
    *shared.requests.lock().unwrap().entry(kind).or_default() += 1;
    StatusCode::NOT_FOUND.into_response()
}

impl HostileRegistry {
    /// Starts on a free loopback port; `signatures/…` serves `manifest` (whose digest it
    /// names). Redirects go to `elsewhere` (`host:port`).
    pub fn start(manifest: Vec<u8>, elsewhere: &str) -> HostileRegistry {
        let digest = super::registry::sha256(&manifest);
        let shared = Arc::new(Shared {
            manifest,
            digest,
            elsewhere: elsewhere.to_string(),
            requests: Mutex::default(),
        });
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let state = shared.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let app = axum::Router::new()
                    .route(
                        "/v2/{repo}/{name}/manifests/{reference}",
                        axum::routing::any(
                            |s: State<Arc<Shared>>,
                             m: Method,
                             Path((a, b, r)): Path<(String, String, String)>| async move {
                                manifests(s, m, Path((format!("{a}/{b}"), r))).await
                            },
                        ),
                    )
                    .route(
                        "/v2/{repo}/{name}/blobs/{digest}",
                        axum::routing::get(
                            |s: State<Arc<Shared>>,
                             Path((a, b, d)): Path<(String, String, String)>| async move {
                                blobs(s, Path((format!("{a}/{b}"), d))).await
                            },
                        ),
                    )
                    .with_state(state);
                // Not a graceful shutdown: an endless answer would never let it end. The
                // runtime's drop ends every connection still open.
                tokio::select! {
                    _ = axum::serve(listener, app) => {}
                    _ = stopped => {}
                }
            });
        });
        HostileRegistry {
            address,
            shared,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Requests answered for repositories of `kind` (`endless`, `signatures blob`, …).
    pub fn requests(&self, kind: &str) -> usize {
        self.shared
            .requests
            .lock()
            .unwrap()
            .get(kind)
            .copied()
            .unwrap_or(0)
    }
}

impl Drop for HostileRegistry {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
