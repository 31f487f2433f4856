//! The operator host (`wasmop run`): checks its flags, waits for the API server, installs
//! the CRDs if asked, elects a leader (and, sharded, holds its shard Lease), starts the
//! registry and the plugin sources, serves health and metrics, and shuts down cleanly on
//! SIGTERM. [`args`] holds the flags, [`leadership`] what taking and losing the lead does.

pub mod args;
pub mod leadership;

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::events::Reporter;
use tokio::sync::watch;

use crate::controller::ControllerDeps;
use crate::plan::Checker;
use crate::plan::guard::{Guard, GuardConfig};
use crate::plan::unchecked::Unchecked;
pub use args::RunArgs;

use crate::k8s::client::{client, client_config, fenced_client_from};
use crate::k8s::fence::Fence;
use crate::k8s::lease::{LeaseConfig, TermExpired, run_elector};
use crate::registry::{Manager, sources};
use crate::runtime::{Limits, Sandbox};
use crate::telemetry::health::Health;
use crate::telemetry::metrics::Metrics;

/// Where decisions are recorded when a WasmPlugin asks for it and `--record` names no
/// directory (deploy/deployment.yaml mounts an `emptyDir` on /tmp: the root is read-only).
pub const DEFAULT_RECORD_DIR: &str = "/tmp/wasmop-records";

/// The namespace of the leader Lease and the shard Leases.
fn lease_namespace(args: &RunArgs) -> String {
    args.lease_namespace
        .clone()
        .or_else(|| args.pod_namespace.clone())
        .unwrap_or_else(|| "default".into())
}

/// The leader election settings from the flags, checked (`None` without leader election).
fn lease_config(args: &RunArgs) -> anyhow::Result<Option<LeaseConfig>> {
    if !args.leader_election {
        return Ok(None);
    }
    let mut cfg = LeaseConfig::new(
        lease_namespace(args),
        args.lease_name.clone(),
        identity(args),
    );
    cfg.lease_duration = Duration::from_secs(args.lease_seconds);
    cfg.renew_every = cfg.lease_duration / 3;
    cfg.renew_deadline = cfg.lease_duration * 2 / 3;
    cfg.retry_every = (cfg.lease_duration / 7).max(Duration::from_millis(200));
    cfg.validate()
        .map_err(|e| anyhow::anyhow!("invalid leader election settings: {e}"))?;
    Ok(Some(cfg))
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

/// Waits until the API server answers `/version`, asking again with a pause that grows
/// from 0.5 s to 10 s; `false` if shutdown came first.
async fn reachable(client: &kube::Client, mut shutdown: watch::Receiver<bool>) -> bool {
    let mut pause = Duration::from_millis(500);
    let mut asked = 0u32;
    loop {
        let answer = tokio::time::timeout(Duration::from_secs(5), client.apiserver_version());
        let error = match answer.await {
            Ok(Ok(_)) => return true,
            Ok(Err(e)) => e.to_string(),
            Err(_) => "no answer within 5 s".to_string(),
        };
        asked += 1;
        if asked == 1 || asked.is_power_of_two() {
            tracing::warn!(error = %error, asked, "the API server does not answer yet: waiting for it");
        }
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            _ = shutdown.wait_for(|s| *s) => return false,
        }
        pause = (pause * 2).min(Duration::from_secs(10));
    }
}

/// The host-wide guest memory budget: `--guest-memory-mib` if given, else half of the
/// container's memory limit (`limit`), never below one call's cap; `None` without either.
fn guest_memory_bytes(args: &RunArgs, limit: Option<u64>) -> Option<usize> {
    if let Some(mib) = args.guest_memory_mib {
        return Some(mib << 20);
    }
    let half = usize::try_from(limit? / 2).unwrap_or(usize::MAX);
    Some(half.max(args.call_memory_mib << 20))
}

/// Runs the operator host until SIGTERM (or until its leader election ends). Returns
/// [`TermExpired`] when this process held a Lease (leader or shard) and went a whole lease
/// duration without renewing it: it has stopped everything, and must start afresh (as
/// `wasmop run` does, [`crate::cmd`]) before it writes again.
pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    // Bad flags stop the host before it starts anything.
    let lease = lease_config(&args)?;
    let client = client(args.kubeconfig.as_deref()).await?;
    let limits = Limits {
        deadline: Duration::from_millis(args.call_timeout_ms),
        memory_bytes: args.call_memory_mib << 20,
        ..Limits::default()
    };
    let guest_memory = guest_memory_bytes(&args, crate::telemetry::cgroup::memory_limit());
    match guest_memory {
        Some(bytes) => tracing::info!(
            mib = bytes >> 20,
            "guest memory budget of all calls in flight"
        ),
        None => tracing::info!("no memory limit found: each call within its own cap only"),
    }
    let sandbox = Sandbox::with_guest_memory(
        args.max_concurrent_calls,
        guest_memory.unwrap_or(usize::MAX),
    )?;
    let metrics = Arc::new(Metrics::new());
    let health = Arc::new(Health::new());
    let plugins_ready = health.flag("plugins");
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    tokio::spawn(signals(shutdown_tx.clone()));

    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", args.listen))?;
    tracing::info!(addr = %args.listen, "serving /healthz, /readyz, /metrics");
    tokio::spawn(crate::telemetry::http::serve(
        listener,
        health.clone(),
        metrics.clone(),
        wait_true(shutdown_rx.clone()),
    ));

    // A process started while the API server is out of reach (a partition it came back
    // from as a new member, a control plane restarting) waits for it instead of exiting.
    if !reachable(&client, shutdown_rx.clone()).await {
        return Ok(());
    }
    if args.install_crds {
        use kube::CustomResourceExt;
        let crd = serde_json::to_value(crate::registry::WasmPlugin::crd())?;
        crate::k8s::crds::install_crd(&client, &crd).await?;
        for path in crate::registry::files::plugin_files(&args.plugins)? {
            let bytes = tokio::fs::read(&path).await?;
            match sandbox.load_async(bytes, limits).await {
                Ok(p) => {
                    if let Some(crd) = &p.info.crd {
                        crate::k8s::crds::install_crd(&client, crd).await?;
                    }
                }
                Err(e) => tracing::error!(file = %path.display(), error = %e, "plugin refused"),
            }
        }
    }

    // Every replica loads the plugins and runs their caches; only the leader's writes leave
    // (the fence), so a standby takes over with warm caches and failover costs the lease.
    // Sharded, each replica's controllers write behind its own shard Lease's fence instead,
    // and the leader's fence guards only the WasmPlugins and the sharder.
    let (leading_tx, leading_rx) = watch::channel(!args.leader_election);
    let fence = if args.leader_election {
        Fence::closed()
    } else {
        Fence::always_open()
    };
    let mut elector = None;
    let mut shard_elector = None;
    let shard = args.sharding.then(|| identity(&args));
    let work_fence = if shard.is_some() {
        Fence::closed()
    } else {
        fence.clone()
    };
    let (member_tx, member_rx) = watch::channel(false);
    // The plugins this replica runs, announced on its shard Lease: none until its plugins
    // run. Said from the first write, so that a Lease taken over from an earlier process of
    // this shard does not keep announcing what that process ran (the sharder would give
    // this one objects before it runs their plugin, and take them back when it announces).
    let (announce_tx, announced_rx) =
        watch::channel(crate::shards::members::announcing(std::iter::empty()));
    if let Some(cfg) = lease {
        if let Some(id) = &shard {
            let mut shard_cfg = cfg.clone();
            shard_cfg.name = crate::shards::members::lease_name(id);
            shard_cfg.labels.insert(
                crate::shards::members::RING_LABEL.to_string(),
                args.ring.clone(),
            );
            tracing::info!(lease = %shard_cfg.name, ring = %args.ring, "sharding: announcing this replica's shard");
            shard_elector = Some(tokio::spawn(crate::k8s::lease::run_elector_announcing(
                client.clone(),
                shard_cfg,
                member_tx,
                work_fence.clone(),
                shutdown_rx.clone(),
                announced_rx.clone(),
            )));
        }
        tracing::info!(lease = %cfg.name, identity = %cfg.identity, "waiting to lead (caches warm meanwhile)");
        elector = Some(tokio::spawn(run_elector(
            client.clone(),
            cfg.clone(),
            leading_tx,
            fence.clone(),
            shutdown_rx.clone(),
        )));
    }
    let reviewer = client.clone();
    let base_config = client_config(args.kubeconfig.as_deref()).await?;
    let client = fenced_client_from(base_config.clone(), fence.clone(), metrics.clone())?;
    let work_client = fenced_client_from(base_config.clone(), work_fence.clone(), metrics.clone())?;
    let plugin_ns = args
        .plugin_namespace
        .clone()
        .or_else(|| args.pod_namespace.clone())
        .unwrap_or_else(|| "default".into());
    let naming = crate::principals::identity::Naming {
        namespace: args
            .plugin_service_account_namespace
            .clone()
            .unwrap_or_else(|| plugin_ns.clone()),
        template: args.plugin_service_account.clone(),
    };
    tracing::info!(service_accounts = %naming.user("{name}"), "plugins act as their own ServiceAccounts");
    if args.unsafe_disable_guard {
        tracing::warn!("--unsafe-disable-guard: plans are sent unchecked (tests only)");
    }
    let principals = crate::principals::identity::Principals::fenced(
        naming,
        base_config,
        work_fence.clone(),
        metrics.clone(),
    );

    let cases = Arc::new(crate::rollout::record::CaseRecorder::start(
        args.record
            .clone()
            .unwrap_or_else(|| DEFAULT_RECORD_DIR.into()),
        args.record_max,
        args.record.is_some(),
    ));
    let guard = Guard::new(GuardConfig {
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
        host_namespace: Some(plugin_ns.clone()),
    });
    let checker: Arc<dyn Checker> = if args.unsafe_disable_guard {
        Arc::new(Unchecked {
            client: work_client.clone(),
        })
    } else {
        Arc::new(guard)
    };
    let deps = ControllerDeps {
        client: work_client.clone(),
        sandbox,
        checker,
        metrics: metrics.clone(),
        namespace: args.namespace.clone(),
        reporter: Reporter {
            controller: "wasmop".into(),
            instance: Some(identity(&args)),
        },
        concurrency: args.concurrency,
        debounce: Duration::from_millis(args.debounce_ms),
        status_interval: Duration::from_millis(args.status_interval_ms),
        status_settle: Duration::from_millis(args.status_settle_ms),
        fence: work_fence.clone(),
        caches: crate::cache::shared::SharedCaches::new(
            work_client.clone(),
            args.namespace.clone(),
            metrics.clone(),
        ),
        cases: cases.clone(),
        principals,
        reviewer,
        shard: shard.clone(),
    };
    let manager = Arc::new(Manager::new(
        Arc::new(deps),
        health.clone(),
        metrics.clone(),
        limits,
        shutdown_rx.clone(),
    ));
    if !args.no_uploads {
        tokio::spawn(crate::registry::report::run(
            client.clone(),
            manager.clone(),
            fence.clone(),
            cases,
            Reporter {
                controller: "wasmop".into(),
                instance: Some(identity(&args)),
            },
            shutdown_rx.clone(),
        ));
        // Uploads first: after a restart the host runs what was pushed, not an older file.
        if let Err(e) = sources::load_cluster(&client, &manager, &plugin_ns).await {
            tracing::warn!(error = %e, namespace = %plugin_ns, "cannot list WasmPlugins (is the CRD installed?)");
        }
        tokio::spawn(sources::watch_cluster(
            client.clone(),
            manager.clone(),
            plugin_ns.clone(),
            Duration::from_secs(args.permissions_recheck_seconds.max(1)),
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
    if shard.is_some() {
        tokio::spawn(crate::shards::running::run_sharder(
            client.clone(),
            manager.clone(),
            crate::shards::running::RingSettings {
                namespace: lease_namespace(&args),
                ring: args.ring.clone(),
                every: Duration::from_millis(args.sharder_every_ms.max(50)),
                watched: args.namespace.clone(),
            },
            leading_rx.clone(),
            metrics.clone(),
            shutdown_rx.clone(),
        ));
        let (manager, metrics, ready) = (manager.clone(), metrics.clone(), health.flag("shard"));
        let (shutdown, stop) = (shutdown_rx.clone(), shutdown_tx.clone());
        tokio::spawn(async move {
            if !crate::shards::running::follow_shard(
                member_rx,
                manager,
                metrics,
                ready,
                announce_tx,
                shutdown,
            )
            .await
            {
                // Nothing may run as if it held the shard: the host stops.
                tracing::error!("the shard Lease's elector ended: stopping");
                let _ = stop.send(true);
            }
        });
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

    let ended = if args.leader_election {
        let uploads = (!args.no_uploads).then(|| leadership::Uploads {
            client: client.clone(),
            namespace: plugin_ns.clone(),
        });
        leadership::follow(
            leading_rx,
            shutdown_rx.clone(),
            manager.clone(),
            metrics.clone(),
            uploads,
        )
        .await
    } else {
        wait_true(shutdown_rx.clone()).await;
        leadership::Ended::Shutdown
    };
    if ended == leadership::Ended::ElectorGone {
        // Nothing may run as if it led: the controllers stop at once.
        let _ = shutdown_tx.send(true);
        manager.join(Duration::ZERO).await;
        let error = match elector.take() {
            Some(task) => match task.await {
                Ok(Err(e)) => e,
                _ => anyhow::anyhow!("it stopped"),
            },
            None => anyhow::anyhow!("it stopped"),
        };
        if error.is::<TermExpired>() {
            return Err(error);
        }
        anyhow::bail!("leader election ended: {error:#}");
    }
    manager
        .join(Duration::from_secs(args.shutdown_seconds))
        .await;
    let mut expired = None;
    for e in [elector, shard_elector].into_iter().flatten() {
        if let Ok(Ok(Err(error))) = tokio::time::timeout(Duration::from_secs(5), e).await
            && error.is::<TermExpired>()
        {
            expired = Some(error);
        }
    }
    if let Some(error) = expired {
        return Err(error);
    }
    tracing::info!("stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// `wasmop run`'s flags alone, as the command line parses them.
    #[derive(Parser)]
    struct Run {
        #[command(flatten)]
        args: RunArgs,
    }

    fn run_args(extra: &[&str]) -> RunArgs {
        let argv = ["wasmop"].iter().chain(extra).copied();
        Run::try_parse_from(argv).unwrap().args
    }

    #[test]
    fn the_guest_memory_budget_is_half_the_container_limit_unless_given() {
        let defaults = run_args(&[]);
        assert_eq!(
            guest_memory_bytes(&defaults, Some(256 << 20)),
            Some(128 << 20)
        );
        assert_eq!(guest_memory_bytes(&defaults, None), None);
        // Never below one call's cap: a plugin at its cap still runs alone.
        assert_eq!(
            guest_memory_bytes(&defaults, Some(64 << 20)),
            Some(64 << 20)
        );
        let given = run_args(&["--guest-memory-mib", "300"]);
        assert_eq!(guest_memory_bytes(&given, Some(256 << 20)), Some(300 << 20));
    }
}
