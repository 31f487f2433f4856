//! The operations HTTP endpoint: liveness, readiness and metrics.
//!
//! Routes (all `GET`, plain text):
//! - `/healthz`: 200 `ok` while the process serves requests at all;
//! - `/readyz`: 200 `ready` when every [`Health`] flag is set, otherwise 503 with
//!   `not ready: ` and the names of the missing flags, comma-separated;
//! - `/metrics`: 200 with [`Metrics::encode`] as `application/openmetrics-text`.
//!
//! Anything else is 404. The endpoint holds no secret and changes nothing, so it has no
//! authentication; bind it where the kubelet and Prometheus reach it. Its connections are
//! bounded in number and lifetime ([`crate::telemetry::connections`]).

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;

use crate::telemetry::health::Health;
use crate::telemetry::metrics::Metrics;

/// Content type of the `/metrics` response.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone)]
struct OpsState {
    health: Arc<Health>,
    metrics: Arc<Metrics>,
}

/// The router with the three routes, for callers that compose it into a larger server.
pub fn router(health: Arc<Health>, metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .with_state(OpsState { health, metrics })
}

/// Serves [`router`] on `listener` until `shutdown` completes, then stops accepting,
/// lets requests in flight finish and returns. Errors are those of the listener.
pub async fn serve(
    listener: TcpListener,
    health: Arc<Health>,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "ops endpoint listening (/healthz, /readyz, /metrics)");
    }
    let bounded = crate::telemetry::connections::Bounded::new(
        listener,
        crate::telemetry::connections::MAX_CONNECTIONS,
        crate::telemetry::connections::CONNECTION_LIFETIME,
    );
    axum::serve(bounded, router(health, metrics))
        .with_graceful_shutdown(shutdown)
        .await
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(state): State<OpsState>) -> impl IntoResponse {
    let missing = state.health.not_ready();
    if missing.is_empty() {
        (StatusCode::OK, "ready".to_owned())
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {}", missing.join(", ")),
        )
    }
}

async fn metrics_text(State(state): State<OpsState>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE)],
        state.metrics.encode(),
    )
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    use super::*;

    /// One HTTP/1.1 GET over a fresh connection: (status, lowercased headers, body).
    async fn get(addr: SocketAddr, path: &str) -> (u16, String, String) {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut raw = String::new();
        stream.read_to_string(&mut raw).await.unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").expect("no end of headers");
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        (status, head.to_ascii_lowercase(), body.to_owned())
    }

    #[tokio::test]
    async fn serves_health_readiness_and_metrics_then_shuts_down() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let health = Arc::new(Health::new());
        let metrics = Arc::new(Metrics::new());
        let plugins = health.flag("plugins");
        let _leader = health.flag("leader-election");
        metrics.leader.set(1);

        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, health.clone(), metrics, async {
            let _ = stopped.await;
        }));

        let (status, _, body) = get(addr, "/healthz").await;
        assert_eq!((status, body.as_str()), (200, "ok"));

        let (status, _, body) = get(addr, "/readyz").await;
        assert_eq!(status, 503);
        assert_eq!(body, "not ready: leader-election, plugins");

        plugins.set(true);
        health.flag("leader-election").set(true);
        let (status, _, body) = get(addr, "/readyz").await;
        assert_eq!((status, body.as_str()), (200, "ready"));

        let (status, head, body) = get(addr, "/metrics").await;
        assert_eq!(status, 200);
        assert!(head.contains(&format!("content-type: {OPENMETRICS_CONTENT_TYPE}")));
        assert!(body.lines().any(|l| l == "wasmop_leader 1"), "{body}");
        assert!(body.ends_with("# EOF\n"));

        let (status, _, _) = get(addr, "/nope").await;
        assert_eq!(status, 404);

        stop.send(()).unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(5), server)
            .await
            .expect("server did not stop")
            .unwrap()
            .unwrap();
        assert!(TcpStream::connect(addr).await.is_err());
    }

    /// Clients that open connections and send nothing hold no more than the cap, each for
    /// at most its lifetime; then the endpoint answers again.
    #[tokio::test]
    async fn idle_connections_are_capped_and_closed() {
        use crate::telemetry::connections::{Bounded, MAX_CONNECTIONS};
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let lifetime = std::time::Duration::from_millis(800);
        let bounded = Bounded::new(listener, MAX_CONNECTIONS, lifetime);
        let app = router(Arc::new(Health::new()), Arc::new(Metrics::new()));
        let server = tokio::spawn(async move { axum::serve(bounded, app).await });
        let opened = std::time::Instant::now();
        let mut idle = Vec::new();
        for _ in 0..MAX_CONNECTIONS + 36 {
            idle.push(TcpStream::connect(addr).await.unwrap());
        }
        // Every idle connection is closed by the server: the first ones within their
        // lifetime, the rest (waiting in the backlog) one lifetime later.
        for (i, c) in idle.iter_mut().enumerate() {
            let mut byte = [0u8; 1];
            let read = tokio::time::timeout(std::time::Duration::from_secs(10), c.read(&mut byte))
                .await
                .unwrap_or_else(|_| panic!("idle connection {i} still open after 10 s"));
            assert!(
                matches!(read, Ok(0) | Err(_)),
                "connection {i} got data: {read:?}"
            );
        }
        let all_closed = opened.elapsed();
        assert!(
            all_closed < lifetime * 3,
            "the idle connections took {all_closed:?} to close (lifetime {lifetime:?})"
        );
        let (status, _, body) = get(addr, "/healthz").await;
        assert_eq!((status, body.as_str()), (200, "ok"));
        server.abort();
    }
}
