//! A storm of refused writes: a loopback HTTP proxy between a host and the API server that
//! answers a share of POST and DELETE requests itself with 429 Too Many Requests or 500
//! Internal Server Error (alternately), before they reach the server, and forwards
//! everything else (watches stream through). It can also hold lists (GETs that are not
//! watches, and watches that send the current objects first: streaming lists) whose URI
//! contains a given text until released: a cache that cannot list; and refuse streaming
//! lists as an API server without them does (422, `sendInitialEvents` forbidden). The
//! host talks plain HTTP to the proxy with a kubeconfig of its own; the proxy talks to the
//! API server as the test's admin.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use http::{Method, StatusCode};
use kube::Client;
use tokio::task::JoinHandle;

use super::{Cluster, Scratch};

/// The proxy; stopped (and its kubeconfig removed) when dropped.
pub struct Storm {
    /// A kubeconfig that reaches the API server through the proxy.
    pub kubeconfig: PathBuf,
    counters: Arc<Counters>,
    task: JoinHandle<()>,
    _dir: Scratch,
}

struct Counters {
    /// Percent of POST and DELETE requests refused.
    share: AtomicU64,
    writes: AtomicU64,
    refused: AtomicU64,
    /// Lists whose URI contains this are held until it changes.
    hold: tokio::sync::watch::Sender<Option<String>>,
    /// POSTs whose URI contains the text are sent on only after the delay, whether the
    /// client still waits for them or not.
    delay: std::sync::Mutex<Option<(String, std::time::Duration)>>,
    /// POSTs delayed so far.
    delayed: AtomicU64,
    /// Lists held so far.
    held: AtomicU64,
    /// Streaming lists are refused as an API server without the `WatchList` feature does.
    no_streaming: std::sync::atomic::AtomicBool,
    /// The paths of the streaming lists refused, and of the lists in pages (GETs with a
    /// `limit`), so far.
    refused_streaming: std::sync::Mutex<Vec<String>>,
    paged: std::sync::Mutex<Vec<String>>,
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            share: AtomicU64::default(),
            writes: AtomicU64::default(),
            refused: AtomicU64::default(),
            hold: tokio::sync::watch::channel(None).0,
            held: AtomicU64::default(),
            delay: std::sync::Mutex::new(None),
            delayed: AtomicU64::default(),
            no_streaming: Default::default(),
            refused_streaming: Default::default(),
            paged: Default::default(),
        }
    }
}

#[derive(Clone)]
struct Upstream {
    client: Client,
    counters: Arc<Counters>,
}

impl Storm {
    /// Starts the proxy in front of `cluster`, refusing `share_percent` of the writes.
    pub async fn start(cluster: &Cluster, share_percent: u64) -> Storm {
        let counters = Arc::new(Counters::default());
        counters.share.store(share_percent, Ordering::SeqCst);
        let upstream = Upstream {
            client: cluster.client().await,
            counters: counters.clone(),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let app = axum::Router::new().fallback(relay).with_state(upstream);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let dir = Scratch::new("storm");
        let kubeconfig = dir.0.join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: storm\n  cluster:\n    server: http://127.0.0.1:{port}\n\
                 users:\n- name: storm\n  user: {{}}\ncontexts:\n- name: storm\n  context:\n    cluster: storm\n    user: storm\n\
                 current-context: storm\n"
            ),
        )
        .unwrap();
        Storm {
            kubeconfig,
            counters,
            task,
            _dir: dir,
        }
    }

    /// Changes the share of refused writes (0 calms the storm).
    pub fn set_share(&self, percent: u64) {
        self.counters.share.store(percent, Ordering::SeqCst);
    }

    /// Holds every list whose URI (path and query) contains `needle` until
    /// [`Storm::release_lists`]; watches and everything else pass.
    pub fn hold_lists(&self, needle: &str) {
        self.counters.hold.send_replace(Some(needle.to_string()));
    }

    /// Lets the held lists (and later ones) through.
    pub fn release_lists(&self) {
        self.counters.hold.send_replace(None);
    }

    /// Sends every POST whose URI contains `needle` on to the API server only `after` it
    /// came, from a task of its own: a client that gives up before then (its write cut off)
    /// still has it committed later. `None` ends it.
    pub fn delay_posts(&self, delay: Option<(&str, std::time::Duration)>) {
        *self.counters.delay.lock().unwrap() = delay.map(|(n, d)| (n.to_string(), d));
    }

    /// Refuses every streaming list from now on, as an API server without them does.
    pub fn refuse_streaming_lists(&self) {
        self.counters.no_streaming.store(true, Ordering::SeqCst);
    }

    /// (streaming lists refused, page requests seen) so far whose path contains `needle`.
    pub fn lists(&self, needle: &str) -> (usize, usize) {
        let count = |l: &std::sync::Mutex<Vec<String>>| {
            l.lock()
                .unwrap()
                .iter()
                .filter(|p| p.contains(needle))
                .count()
        };
        (
            count(&self.counters.refused_streaming),
            count(&self.counters.paged),
        )
    }

    /// How many POSTs were delayed so far.
    pub fn posts_delayed(&self) -> u64 {
        self.counters.delayed.load(Ordering::SeqCst)
    }

    /// How many lists were held so far.
    pub fn lists_held(&self) -> u64 {
        self.counters.held.load(Ordering::SeqCst)
    }

    /// (writes seen, writes refused) so far.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.counters.writes.load(Ordering::SeqCst),
            self.counters.refused.load(Ordering::SeqCst),
        )
    }
}

impl Drop for Storm {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A Kubernetes Status body for a refused request.
fn refusal(n: u64) -> Response {
    let (code, reason) = if n.is_multiple_of(2) {
        (StatusCode::TOO_MANY_REQUESTS, "TooManyRequests")
    } else {
        (StatusCode::INTERNAL_SERVER_ERROR, "InternalError")
    };
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "refused by the test's storm proxy", "reason": reason,
        "code": code.as_u16()
    });
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .header("retry-after", "1")
        .body(Body::from(body.to_string()))
        .unwrap()
}

async fn relay(State(up): State<Upstream>, req: Request) -> Response {
    let uri = req.uri().to_string();
    let held = |h: &Option<String>| h.as_ref().is_some_and(|n| uri.contains(n.as_str()));
    let streaming = uri.contains("sendInitialEvents=true");
    let list = req.method() == Method::GET && (!uri.contains("watch=") || streaming);
    if streaming && up.counters.no_streaming.load(Ordering::SeqCst) {
        let path = req.uri().path().to_string();
        up.counters.refused_streaming.lock().unwrap().push(path);
        return invalid(
            "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
        );
    }
    if list && !streaming && uri.contains("limit=") {
        let path = req.uri().path().to_string();
        up.counters.paged.lock().unwrap().push(path);
    }
    if list && held(&up.counters.hold.borrow()) {
        up.counters.held.fetch_add(1, Ordering::SeqCst);
        let mut hold = up.counters.hold.subscribe();
        let _ = hold.wait_for(|h| !held(h)).await;
    }
    if matches!(*req.method(), Method::POST | Method::DELETE) {
        let n = up.counters.writes.fetch_add(1, Ordering::SeqCst);
        // Spread evenly: n*37 mod 100 walks every residue once per 100 writes.
        if (n * 37) % 100 < up.counters.share.load(Ordering::SeqCst) {
            up.counters.refused.fetch_add(1, Ordering::SeqCst);
            return refusal(n);
        }
    }
    let delay = match &*up.counters.delay.lock().unwrap() {
        Some((needle, after)) if req.method() == Method::POST && uri.contains(needle.as_str()) => {
            Some(*after)
        }
        _ => None,
    };
    let (mut parts, body) = req.into_parts();
    parts.headers.remove(http::header::HOST);
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(b) => b,
        Err(e) => return bad_gateway(&e.to_string()),
    };
    let forward = http::Request::from_parts(parts, kube::client::Body::from(bytes));
    if let Some(after) = delay {
        up.counters.delayed.fetch_add(1, Ordering::SeqCst);
        // Sent from a task of its own: it reaches the API server even when this handler is
        // dropped (the client gave up).
        let client = up.client.clone();
        let sent = tokio::spawn(async move {
            tokio::time::sleep(after).await;
            client.send(forward).await
        });
        return match sent.await {
            Ok(Ok(resp)) => resp.map(Body::new),
            Ok(Err(e)) => bad_gateway(&e.to_string()),
            Err(e) => bad_gateway(&e.to_string()),
        };
    }
    match up.client.send(forward).await {
        Ok(resp) => resp.map(Body::new),
        Err(e) => bad_gateway(&e.to_string()),
    }
}

/// A 422 Invalid Status body, as the API server answers a request it validates and refuses.
fn invalid(message: &str) -> Response {
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: {message}"),
        "reason": "Invalid", "code": 422
    });
    Response::builder()
        .status(StatusCode::UNPROCESSABLE_ENTITY)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

fn bad_gateway(why: &str) -> Response {
    Response::builder()
        .status(StatusCode::BAD_GATEWAY)
        .body(Body::from(why.to_string()))
        .unwrap()
}
