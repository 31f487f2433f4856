//! The operator host (`wasmop run`): checks its flags, serves health and metrics
//! ([`serving`]), waits for the API server and installs the CRDs if asked ([`waiting`]),
//! competes for the leader Lease and, sharded, its shard Lease ([`elections`]), makes the
//! clients and the registry, starts the plugin sources ([`sources`]), and shuts down cleanly
//! on SIGTERM. [`args`] holds the flags, [`leadership`] what taking and losing the lead does.

pub(crate) mod args;
pub(crate) mod elections;
pub(crate) mod leadership;
pub(crate) mod serving;
pub(crate) mod sources;
pub(crate) mod waiting;

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::events::Reporter;
use tokio::sync::watch;

pub use args::RunArgs;
use elections::{Elections, identity, lease_config};
use serving::wait_true;

use crate::admission::registration::Endpoint;
use crate::cache::shared::SharedCaches;
use crate::controller::ControllerDeps;
use crate::k8s::client::{client, client_config, fenced_client_from};
use crate::k8s::lease::TermExpired;
use crate::plan::Checker;
use crate::plan::guard::{Guard, GuardConfig};
use crate::plan::unchecked::Unchecked;
use crate::principals::identity::{Naming, Principals};
use crate::registry::Manager;
use crate::rollout::record::CaseRecorder;
use crate::runtime::{Limits, Sandbox};
use crate::shards::custody::Custody;
use crate::telemetry::health::Health;
use crate::telemetry::metrics::Metrics;

/// Where decisions are recorded when a WasmPlugin asks for it and `--record` names no
/// directory (deploy/deployment.yaml mounts an `emptyDir` on /tmp: the root is read-only).
pub const DEFAULT_RECORD_DIR: &str = "/tmp/wasmop-records";

/// What the host keeps of its container's memory limit for itself when it sizes the
/// guest-memory budget: at least this, at least half. Measured in the deploy test (image
/// under runc, limit 256Mi, the article plus eight memory bombs): the host's own RSS reached
/// 107 MiB (caches, the OTLP exporter, the pool's resident slots) and its mapped binary 25
/// MiB; with half the limit (128 MiB) given to guests the cgroup was OOM-killed at 256 MiB,
/// and with 96 MiB its peak still reached 219 MiB in one of two runs; with 64 MiB, 146 and
/// 158 MiB.
const HOST_RESERVE_BYTES: u64 = 192 << 20;

/// The host-wide guest memory budget: `--guest-memory-mib` if given, else the container's
/// memory limit (`limit`) less the host's reserve (the larger of [`HOST_RESERVE_BYTES`] and
/// half the limit), never below one call's cap; `None` without either.
fn guest_memory_bytes(args: &RunArgs, limit: Option<u64>) -> Option<usize> {
    if let Some(mib) = args.guest_memory_mib {
        return Some(mib << 20);
    }
    let limit = limit?;
    let reserve = HOST_RESERVE_BYTES.max(limit / 2);
    let rest = usize::try_from(limit.saturating_sub(reserve)).unwrap_or(usize::MAX);
    Some(rest.max(args.call_memory_mib << 20))
}

/// The checks a plan passes: the guard, or with `--unsafe-disable-guard` (tests only)
/// none.
fn checker(args: &RunArgs, plugin_ns: &str, client: &kube::Client) -> Arc<dyn Checker> {
    if args.unsafe_disable_guard {
        tracing::warn!("--unsafe-disable-guard: plans are sent unchecked (tests only)");
        return Arc::new(Unchecked {
            client: client.clone(),
        });
    }
    Arc::new(Guard::new(GuardConfig {
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
        host_namespace: Some(plugin_ns.to_string()),
    }))
}

/// The running plugins, as the webhook server looks them up.
struct Running(Arc<Manager>);

impl crate::admission::Plugins for Running {
    fn slot<'a>(
        &'a self,
        name: &'a str,
    ) -> futures::future::BoxFuture<'a, Option<Arc<crate::registry::slot::PluginSlot>>> {
        Box::pin(async move {
            self.0
                .slots()
                .await
                .into_iter()
                .map(|(_, slot)| slot)
                .find(|slot| slot.current().info.name == name)
        })
    }
}

impl crate::admission::Active for Running {
    fn active(&self) -> futures::future::BoxFuture<'_, Vec<crate::runtime::PluginInfo>> {
        Box::pin(async move {
            self.0
                .slots()
                .await
                .into_iter()
                .map(|(_, slot)| slot.current().info.clone())
                .collect()
        })
    }
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
        Some(bytes) => {
            let (active, candidates) =
                crate::runtime::memory_parts(bytes, args.max_concurrent_calls);
            tracing::info!(
                mib = bytes >> 20,
                active_mib = active >> 20,
                candidates_mib = candidates >> 20,
                "guest memory budget of all calls in flight"
            )
        }
        None => tracing::info!("no memory limit found: each call within its own cap only"),
    }
    let sandbox = Sandbox::with_guest_memory(
        args.max_concurrent_calls,
        guest_memory.unwrap_or(usize::MAX),
    )?;
    let sandbox = match &args.cache_dir {
        Some(dir) => sandbox
            .with_compiled_dir(&dir.join("compiled"))
            .with_disk_cap(dir, args.cache_max_mib << 20),
        None => sandbox,
    };
    let sandbox = match &args.compiled_shelf {
        Some(dir) => sandbox.with_shelf(dir),
        None => sandbox,
    };
    let metrics = Arc::new(Metrics::new());
    let health = Arc::new(Health::new());
    let plugins_ready = health.flag("plugins");
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    tokio::spawn(serving::signals(shutdown_tx.clone()));
    serving::serve(
        args.listen,
        health.clone(),
        metrics.clone(),
        shutdown_rx.clone(),
    )
    .await?;

    // A process started while the API server is out of reach (a partition it came back
    // from as a new member, a control plane restarting) waits for it instead of exiting.
    if !waiting::reachable(&client, shutdown_rx.clone()).await {
        return Ok(());
    }
    if args.install_crds {
        waiting::install_crds(&args, &client, &sandbox, limits).await?;
    }
    let mut elections = Elections::start(&args, lease, &client, &shutdown_rx);

    // The clients: the host's own for questions (SubjectAccessReviews are asked by
    // standbys too), behind the leader's fence for the WasmPlugins and the sharder, behind
    // the work fence for the controllers; each plugin's, impersonating its ServiceAccount.
    let reviewer = client.clone();
    let base_config = client_config(args.kubeconfig.as_deref()).await?;
    let client = fenced_client_from(
        base_config.clone(),
        elections.fence.clone(),
        metrics.clone(),
    )?;
    let work_client = fenced_client_from(
        base_config.clone(),
        elections.work_fence.clone(),
        metrics.clone(),
    )?;
    let outbound = Arc::new(
        crate::effects::Outbound::new(
            &args.outbound_grants,
            crate::effects::sender::Limits {
                timeout: Duration::from_millis(args.outbound_timeout_ms),
                max_body: args.outbound_max_body_bytes as usize,
                concurrency: args.outbound_concurrency as usize,
                per_second: args.outbound_per_second,
                retries: args.outbound_retries,
                ..Default::default()
            },
            &base_config.cluster_url.to_string(),
        )
        .await
        .map_err(anyhow::Error::msg)?,
    );
    let plugin_ns = args
        .plugin_namespace
        .clone()
        .or_else(|| args.pod_namespace.clone())
        .unwrap_or_else(|| "default".into());
    let naming = Naming {
        namespace: args
            .plugin_service_account_namespace
            .clone()
            .unwrap_or_else(|| plugin_ns.clone()),
        template: args.plugin_service_account.clone(),
    };
    tracing::info!(service_accounts = %naming.user("{name}"), "plugins act as their own ServiceAccounts");
    let principals = Principals::fenced(
        naming,
        base_config,
        elections.work_fence.clone(),
        metrics.clone(),
    );

    let cases = Arc::new(CaseRecorder::start(
        args.record
            .clone()
            .unwrap_or_else(|| DEFAULT_RECORD_DIR.into()),
        (args.record_max, args.record_max_mib << 20),
        args.record.is_some(),
    ));
    let deps = ControllerDeps {
        client: work_client.clone(),
        sandbox,
        checker: checker(&args, &plugin_ns, &work_client),
        metrics: metrics.clone(),
        namespace: args.namespace.clone(),
        reporter: Reporter {
            controller: "wasmop".into(),
            instance: Some(identity(&args)),
        },
        concurrency: args.concurrency,
        debounce: Duration::from_millis(args.debounce_ms),
        progress_hold: Duration::from_millis(args.progress_hold_ms),
        fence: elections.work_fence.clone(),
        caches: caches(&elections, &work_client, &args, &metrics),
        cases: cases.clone(),
        principals,
        reviewer,
        shard: elections.shard.clone(),
        install_crds: args.install_crds,
        labelled: Default::default(),
        outbound,
    };
    let manager = Arc::new(
        Manager::new(
            Arc::new(deps),
            health.clone(),
            metrics.clone(),
            limits,
            shutdown_rx.clone(),
        )
        .with_list_timeout(Duration::from_secs(args.list_timeout_seconds.max(1))),
    );
    let uploads = crate::registry::sources::Uploads {
        client: client.clone(),
        artifacts: Arc::new(sources::artifacts(&args)?),
        reporter: Reporter {
            controller: "wasmop".into(),
            instance: Some(identity(&args)),
        },
        pulled: Arc::default(),
    };
    sources::start(
        &args,
        &uploads,
        &manager,
        &elections,
        cases,
        &plugin_ns,
        &shutdown_rx,
    )
    .await;
    if elections.shard.is_some() {
        sources::start_sharding(
            &args,
            &client,
            &manager,
            &elections,
            &metrics,
            &health,
            &shutdown_rx,
            &shutdown_tx,
        );
    }
    if let Some(bind) = args.webhook_listen {
        let endpoint = match &args.webhook_url {
            Some(url) => Endpoint::Url(url.clone()),
            None => Endpoint::Service(plugin_ns.clone(), args.webhook_service.clone(), 443),
        };
        let config = crate::admission::Config {
            bind,
            endpoint,
            certificate: match &args.webhook_cert_dir {
                Some(dir) => crate::admission::Certificate::Mounted(dir.clone()),
                None => crate::admission::Certificate::Own(
                    plugin_ns.clone(),
                    args.webhook_secret.clone(),
                ),
            },
        };
        let active: Arc<dyn crate::admission::Active> = Arc::new(Running(manager.clone()));
        tokio::spawn(crate::admission::run(
            work_client.clone(),
            config,
            active,
            (manager.sandbox().clone(), metrics.clone()),
            wait_true(shutdown_rx.clone()),
        ));
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
            source: uploads.clone(),
            namespace: plugin_ns.clone(),
        });
        leadership::follow(
            elections.leading.clone(),
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
        let error = match elections.elector.take() {
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
    for e in [elections.elector, elections.shard_elector]
        .into_iter()
        .flatten()
    {
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

/// The shared caches of the controllers; sharded, a shard's owned objects are in its
/// custody (they stay with their controller's shard whatever their labels say).
fn caches(
    elections: &Elections,
    work_client: &kube::Client,
    args: &RunArgs,
    metrics: &Arc<Metrics>,
) -> Arc<SharedCaches> {
    let (client, namespace) = (work_client.clone(), args.namespace.clone());
    match &elections.shard {
        Some(shard) => SharedCaches::with_custodian(
            client,
            namespace,
            metrics.clone(),
            Arc::new(Custody::new(work_client.clone(), shard.clone())),
        ),
        None => SharedCaches::new(client, namespace, metrics.clone()),
    }
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
    fn the_guest_memory_budget_leaves_the_host_its_reserve_unless_given() {
        let defaults = run_args(&[]);
        // The Deployment's 256Mi: 192 MiB kept for the host, 64 MiB for guests.
        assert_eq!(
            guest_memory_bytes(&defaults, Some(256 << 20)),
            Some(64 << 20)
        );
        // Larger limits: half for the host, half for guests.
        assert_eq!(
            guest_memory_bytes(&defaults, Some(1024 << 20)),
            Some(512 << 20)
        );
        assert_eq!(guest_memory_bytes(&defaults, None), None);
        // Never below one call's cap: a plugin at its cap still runs alone.
        assert_eq!(
            guest_memory_bytes(&defaults, Some(128 << 20)),
            Some(64 << 20)
        );
        assert_eq!(
            guest_memory_bytes(&defaults, Some(320 << 20)),
            Some(128 << 20)
        );
        let given = run_args(&["--guest-memory-mib", "300"]);
        assert_eq!(guest_memory_bytes(&given, Some(256 << 20)), Some(300 << 20));
    }
}
