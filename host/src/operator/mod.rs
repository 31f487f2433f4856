//! The operator host (`wasmop run`): loads the plugins, installs their CRDs if asked, elects
//! a leader, runs one controller per plugin, serves health and metrics, and shuts down
//! cleanly on SIGTERM.
//!
//! Split by concern: [`args`] (flags), [`plugins`] (loading a directory), [`crds`],
//! [`kinds`] (dynamic API handles), [`controller`] (watches and caches), [`reconcile`]
//! (one decision end to end, in phases: [`finalize`], [`observed`], [`decide`], [`guard`],
//! [`execute`]), [`expect`] and [`seen`] (a primary waits to see its own writes),
//! [`events`], [`context`] (what reconciles share).

pub mod args;
pub mod context;
pub mod controller;
pub mod crds;
pub mod decide;
pub mod events;
pub mod execute;
pub mod expect;
pub mod finalize;
pub mod guard;
pub mod kinds;
pub mod observed;
pub mod plugins;
pub mod reconcile;
pub mod seen;

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::events::Reporter;
use tokio::sync::watch;

pub use args::RunArgs;
use controller::ControllerDeps;
use guard::{Guard, GuardConfig};

use crate::ops::health::Health;
use crate::ops::lease::{LeaseConfig, run_elector};
use crate::ops::metrics::Metrics;
use crate::registry::{Manager, sources};
use crate::runtime::{Limits, Sandbox};

/// A Kubernetes client from `--kubeconfig`, else the usual inference (in-cluster inside a
/// pod, `$KUBECONFIG` or `~/.kube/config` outside).
pub async fn client(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?
        }
        None => kube::Config::infer().await?,
    };
    Ok(kube::Client::try_from(config)?)
}

async fn wait_true(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|v| *v).await;
}

fn identity(args: &RunArgs) -> String {
    args.identity
        .clone()
        .or_else(|| args.pod_name.clone())
        .unwrap_or_else(|| {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
            format!("{}-{}", host.trim(), std::process::id())
        })
}

async fn signals(tx: watch::Sender<bool>) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupt: shutting down"),
    }
    let _ = tx.send(true);
}

/// Runs the operator host until SIGTERM (or until this replica loses the leadership).
pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    let client = client(args.kubeconfig.as_deref()).await?;
    let limits = Limits {
        deadline: Duration::from_millis(args.call_timeout_ms),
        memory_bytes: args.call_memory_mib << 20,
        ..Limits::default()
    };
    let sandbox = Sandbox::new(args.max_concurrent_calls)?;
    let metrics = Arc::new(Metrics::new());
    let health = Arc::new(Health::new());
    let plugins_ready = health.flag("plugins");
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    tokio::spawn(signals(shutdown_tx.clone()));

    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", args.listen))?;
    tracing::info!(addr = %args.listen, "serving /healthz, /readyz, /metrics");
    tokio::spawn(crate::ops::http::serve(
        listener,
        health.clone(),
        metrics.clone(),
        wait_true(shutdown_rx.clone()),
    ));

    if args.install_crds {
        use kube::CustomResourceExt;
        let crd = serde_json::to_value(crate::registry::WasmPlugin::crd())?;
        crds::install_crd(&client, &crd).await?;
        for path in plugins::plugin_files(&args.plugins)? {
            let bytes = tokio::fs::read(&path).await?;
            match sandbox.load_async(bytes, limits).await {
                Ok(p) => {
                    if let Some(crd) = &p.info.crd {
                        crds::install_crd(&client, crd).await?;
                    }
                }
                Err(e) => tracing::error!(file = %path.display(), error = %e, "plugin refused"),
            }
        }
    }

    let (leading_tx, mut leading_rx) = watch::channel(!args.leader_election);
    let mut elector = None;
    if args.leader_election {
        let ns = args
            .lease_namespace
            .clone()
            .or_else(|| args.pod_namespace.clone())
            .unwrap_or_else(|| "default".into());
        let mut cfg = LeaseConfig::new(ns, args.lease_name.clone(), identity(&args));
        cfg.lease_duration = Duration::from_secs(args.lease_seconds);
        cfg.renew_every = cfg.lease_duration / 3;
        cfg.renew_deadline = cfg.lease_duration * 2 / 3;
        cfg.retry_every = (cfg.lease_duration / 7).max(Duration::from_millis(200));
        tracing::info!(lease = %cfg.name, identity = %cfg.identity, "waiting to lead");
        // A standby is ready: it is healthy and can take over (rollouts wait for readiness).
        plugins_ready.set(true);
        elector = Some(tokio::spawn(run_elector(
            client.clone(),
            cfg,
            leading_tx,
            shutdown_rx.clone(),
        )));
        tokio::select! {
            led = leading_rx.wait_for(|l| *l) => {
                // The elector dropped its sender: it ended (say, an invalid configuration)
                // without ever leading. Nothing may run as if it led.
                if led.is_err() {
                    let reason = match elector.take() {
                        Some(task) => match task.await {
                            Ok(Err(e)) => format!("{e:#}"),
                            _ => "it stopped".to_string(),
                        },
                        None => "it stopped".to_string(),
                    };
                    anyhow::bail!("leader election ended before this replica led: {reason}");
                }
            }
            _ = wait_true(shutdown_rx.clone()) => return Ok(()),
        }
        metrics.leader.set(1);
        plugins_ready.set(false);
    }

    let deps = ControllerDeps {
        client: client.clone(),
        sandbox,
        guard: Arc::new(Guard::new(GuardConfig {
            max_actions: args.max_actions,
            foreign_deletes_per_minute: args.delete_budget,
            own_pod: args.pod_name.clone().map(|n| {
                (
                    args.pod_namespace
                        .clone()
                        .unwrap_or_else(|| "default".into()),
                    n,
                )
            }),
        })),
        metrics: metrics.clone(),
        namespace: args.namespace.clone(),
        reporter: Reporter {
            controller: "wasmop".into(),
            instance: Some(identity(&args)),
        },
        concurrency: args.concurrency,
    };
    let manager = Arc::new(Manager::new(
        deps,
        health.clone(),
        metrics.clone(),
        limits,
        shutdown_rx.clone(),
    ));
    let plugin_ns = args
        .plugin_namespace
        .clone()
        .or_else(|| args.pod_namespace.clone())
        .unwrap_or_else(|| "default".into());
    if !args.no_uploads {
        // Uploads first: after a restart the host runs what was pushed, not an older file.
        if let Err(e) = sources::load_cluster(&client, &manager, &plugin_ns).await {
            tracing::warn!(error = %e, namespace = %plugin_ns, "cannot list WasmPlugins (is the CRD installed?)");
        }
        tokio::spawn(sources::watch_cluster(
            client.clone(),
            manager.clone(),
            plugin_ns.clone(),
            shutdown_rx.clone(),
        ));
    }
    if args.plugins.is_dir() {
        tokio::spawn(sources::watch_dir(
            manager.clone(),
            args.plugins.clone(),
            Duration::from_secs(args.plugins_poll_seconds.max(1)),
            shutdown_rx.clone(),
        ));
    } else {
        tracing::warn!(dir = %args.plugins.display(), "no plugins directory");
    }
    // The plugins are in once the first look at the directory is done.
    let manager_ready = manager.clone();
    tokio::spawn(async move {
        for _ in 0..600 {
            if !manager_ready.running().await.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        plugins_ready.set(true);
    });

    let lost = async {
        if args.leader_election {
            let _ = leading_rx.wait_for(|l| !*l).await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    // On SIGTERM the elector steps down (leading turns false) right after shutdown is
    // asked for: that is a clean stop, not a lost leadership.
    let lost_leadership = tokio::select! {
        biased;
        _ = wait_true(shutdown_rx.clone()) => false,
        _ = lost => !*shutdown_rx.borrow(),
    };
    if lost_leadership {
        metrics.leader.set(0);
        let _ = shutdown_tx.send(true);
        tracing::error!("lost the leadership: stopping");
    }
    // Leadership in doubt: no grace. Every controller (and the reconciles inside it) is
    // aborted at once, so nothing more is written; the elector stepped down at its renew
    // deadline, a margin before any standby may take the lease.
    let grace = if lost_leadership {
        Duration::ZERO
    } else {
        Duration::from_secs(args.shutdown_seconds)
    };
    manager.join(grace).await;
    if let Some(e) = elector {
        let _ = tokio::time::timeout(Duration::from_secs(5), e).await;
    }
    if lost_leadership {
        anyhow::bail!("lost the leadership");
    }
    tracing::info!("stopped");
    Ok(())
}
