//! Prometheus metrics (prometheus-client) and the two HTTP servers (axum): `/metrics` on
//! the metrics address, `/healthz` and `/readyz` on the health-probe address, as
//! controller-runtime's manager splits them.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::controller::ReadyProbe;

/// Label of `podreplica_reconciles_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    /// `success` or `error`.
    pub result: &'static str,
}

/// Label of `podreplica_api_writes_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerbLabel {
    /// `create`, `delete` or `patch`.
    pub verb: &'static str,
}

/// The operator's metrics.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<ResultLabel, Counter>,
    writes: Family<VerbLabel, Counter>,
    duration: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let reconciles = Family::<ResultLabel, Counter>::default();
        registry.register(
            "podreplica_reconciles",
            "Reconciles of PodReplicas, by result",
            reconciles.clone(),
        );
        let writes = Family::<VerbLabel, Counter>::default();
        registry.register(
            "podreplica_api_writes",
            "Write requests sent to the API server, by verb",
            writes.clone(),
        );
        // 0.5 ms .. ~4 s.
        let duration = Histogram::new(exponential_buckets(0.0005, 2.0, 14));
        registry.register(
            "podreplica_reconcile_duration_seconds",
            "Time one reconcile took, its API requests included",
            duration.clone(),
        );
        Self {
            registry,
            reconciles,
            writes,
            duration,
        }
    }
}

impl Metrics {
    /// Counts one reconcile and its duration.
    pub fn reconciled(&self, ok: bool, took: Duration) {
        let result = if ok { "success" } else { "error" };
        self.reconciles.get_or_create(&ResultLabel { result }).inc();
        self.duration.observe(took.as_secs_f64());
    }

    /// Counts one write request (`create`, `delete`, `patch`).
    pub fn wrote(&self, verb: &'static str) {
        self.writes.get_or_create(&VerbLabel { verb }).inc();
    }

    /// The metrics in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}

async fn metrics(State(metrics): State<Arc<Metrics>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics.encode(),
    )
}

async fn readyz(State(ready): State<ReadyProbe>) -> impl IntoResponse {
    if ready.is_ready() {
        (StatusCode::OK, "ok\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "caches not synced\n")
    }
}

/// Binds both addresses (so a taken port fails at start) and returns the servers to run.
pub async fn servers(
    metrics_addr: SocketAddr,
    health_addr: SocketAddr,
    metrics_state: Arc<Metrics>,
    ready: ReadyProbe,
) -> anyhow::Result<impl Future<Output = anyhow::Result<()>>> {
    let metrics_app = Router::new()
        .route("/metrics", get(metrics))
        .with_state(metrics_state);
    let health_app = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .with_state(ready);
    let metrics_listener = tokio::net::TcpListener::bind(metrics_addr)
        .await
        .with_context(|| format!("binding the metrics address {metrics_addr}"))?;
    let health_listener = tokio::net::TcpListener::bind(health_addr)
        .await
        .with_context(|| format!("binding the health-probe address {health_addr}"))?;
    tracing::info!(%metrics_addr, %health_addr, "serving /metrics, /healthz and /readyz");
    Ok(async move {
        tokio::try_join!(
            axum::serve(metrics_listener, metrics_app),
            axum::serve(health_listener, health_app),
        )?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_use_the_names_the_benchmark_reads() {
        let m = Metrics::default();
        m.reconciled(true, Duration::from_millis(2));
        m.reconciled(true, Duration::from_millis(2));
        m.reconciled(false, Duration::from_millis(2));
        m.wrote("create");
        let text = m.encode();
        assert!(text.contains("podreplica_reconciles_total{result=\"success\"} 2"));
        assert!(text.contains("podreplica_reconciles_total{result=\"error\"} 1"));
        assert!(text.contains("podreplica_api_writes_total{verb=\"create\"} 1"));
        assert!(text.contains("podreplica_reconcile_duration_seconds_count 3"));
    }
}
