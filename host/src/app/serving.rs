//! What the host serves while it runs: `/healthz`, `/readyz` and `/metrics` on `--listen`,
//! and the signals that start its shutdown.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::watch;

use crate::telemetry::health::Health;
use crate::telemetry::metrics::Metrics;

/// Resolves once `rx` turns true (the shutdown).
pub(crate) async fn wait_true(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|v| *v).await;
}

/// Turns `tx` true on SIGTERM or an interrupt.
pub(crate) async fn signals(tx: watch::Sender<bool>) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupt: shutting down"),
    }
    let _ = tx.send(true);
}

/// Listens on `addr` and serves health and metrics until `shutdown`; an address that
/// cannot be bound stops the host before it starts anything else.
pub(crate) async fn serve(
    addr: SocketAddr,
    health: Arc<Health>,
    metrics: Arc<Metrics>,
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
    tracing::info!(%addr, "serving /healthz, /readyz, /metrics");
    tokio::spawn(crate::telemetry::http::serve(
        listener,
        health,
        metrics,
        wait_true(shutdown),
    ));
    Ok(())
}
