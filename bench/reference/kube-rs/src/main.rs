//! `podreplica-kube-rs`: the PodReplica operator written the way kube-rs's examples write
//! a controller (`kube::runtime::Controller`, reflector stores, no WebAssembly). It is the
//! baseline of the benchmarks: what the same decisions cost without the sandbox.

mod controller;
mod decide;
mod metrics;
mod types;

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Parser;
use http::HeaderValue;
use http::header::USER_AGENT;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use tracing_subscriber::EnvFilter;

/// User-Agent of every request, so the API server's audit log names this operator.
const AGENT: &str = "podreplica-kube-rs";

/// Keep `spec.size` pods per PodReplica (kube-rs reference operator).
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Kubeconfig file; without it, the default inference (`$KUBECONFIG`,
    /// `~/.kube/config`, then the in-cluster service account).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Address of the `/metrics` endpoint.
    #[arg(long, default_value = "127.0.0.1:8080")]
    metrics_bind_address: SocketAddr,
    /// Address of the `/healthz` and `/readyz` endpoints.
    #[arg(long, default_value = "127.0.0.1:8081")]
    health_probe_bind_address: SocketAddr,
    /// How many PodReplicas are reconciled at once (kube-runtime's `Config::concurrency`;
    /// 0, its default, is no limit).
    #[arg(long, default_value_t = 0)]
    concurrency: u16,
}

async fn kube_config(path: Option<&PathBuf>) -> anyhow::Result<Config> {
    let mut config = match path {
        Some(path) => {
            let file = Kubeconfig::read_from(path)
                .with_context(|| format!("reading {}", path.display()))?;
            Config::from_custom_kubeconfig(file, &KubeConfigOptions::default()).await?
        }
        None => Config::infer().await?,
    };
    config
        .headers
        .push((USER_AGENT, HeaderValue::from_static(AGENT)));
    Ok(config)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();

    let client = Client::try_from(kube_config(args.kubeconfig.as_ref()).await?)?;
    let metrics = Arc::new(metrics::Metrics::default());
    let ready = controller::Readiness::default();
    let servers = metrics::servers(
        args.metrics_bind_address,
        args.health_probe_bind_address,
        metrics.clone(),
        ready.probe.clone(),
    )
    .await?;

    tracing::info!("starting the PodReplica controller");
    tokio::select! {
        () = controller::run(client, metrics, ready, args.concurrency) => {
            tracing::info!("controller stopped");
            Ok(())
        }
        res = servers => res.context("HTTP server"),
    }
}
