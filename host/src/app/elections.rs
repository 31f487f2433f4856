//! The Leases this replica competes for and the fences they drive. With
//! `--leader-election` every replica loads the plugins and runs their caches, and only the
//! leader's writes leave (the fence), so a standby takes over with warm caches and failover
//! costs the lease. Sharded, each replica's controllers write behind its own shard Lease's
//! fence instead, and the leader's fence guards only the WasmPlugins and the sharder.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::app::RunArgs;
use crate::k8s::fence::Fence;
use crate::k8s::lease::{Announced, LeaseConfig, run_elector, run_elector_announcing};
use crate::shards::members::{RING_LABEL, announcing, lease_name};

/// The namespace of the leader Lease and the shard Leases.
pub(crate) fn lease_namespace(args: &RunArgs) -> String {
    args.lease_namespace
        .clone()
        .or_else(|| args.pod_namespace.clone())
        .unwrap_or_else(|| "default".into())
}

/// This replica's identity: `--identity`, else the pod's name, else host name and PID.
pub(crate) fn identity(args: &RunArgs) -> String {
    args.identity
        .clone()
        .or_else(|| args.pod_name.clone())
        .unwrap_or_else(|| {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
            format!("{}-{}", host.trim(), std::process::id())
        })
}

/// The leader election settings from the flags, checked (`None` without leader election).
pub(crate) fn lease_config(args: &RunArgs) -> anyhow::Result<Option<LeaseConfig>> {
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

/// The elections under way and what they drive.
pub(crate) struct Elections {
    /// Whether this replica leads (true from the start without leader election).
    pub leading: watch::Receiver<bool>,
    /// Open while this replica leads: the WasmPlugins' statuses and the sharder write
    /// through it.
    pub fence: Arc<Fence>,
    /// What the controllers and plugins write behind: the leader's fence, or sharded, the
    /// shard Lease's.
    pub work_fence: Arc<Fence>,
    /// This replica's shard when sharding is on.
    pub shard: Option<String>,
    /// Sharded: whether this replica holds its shard Lease.
    pub member: watch::Receiver<bool>,
    /// Sharded: what this replica announces on its shard Lease (the plugins it runs).
    pub announce: watch::Sender<Announced>,
    /// The leader elector.
    pub elector: Option<JoinHandle<anyhow::Result<()>>>,
    /// The shard elector.
    pub shard_elector: Option<JoinHandle<anyhow::Result<()>>>,
    /// The ends no elector took (without leader election), kept for as long as the host
    /// runs: a closed channel would read as an elector that ended.
    _unused: (
        Option<watch::Sender<bool>>,
        Option<watch::Sender<bool>>,
        watch::Receiver<Announced>,
    ),
}

impl Elections {
    /// Starts competing for the leader Lease (`lease`, when leader election is on) and,
    /// sharded, for this replica's shard Lease.
    pub(crate) fn start(
        args: &RunArgs,
        lease: Option<LeaseConfig>,
        client: &kube::Client,
        shutdown: &watch::Receiver<bool>,
    ) -> Elections {
        let (leading_tx, leading) = watch::channel(!args.leader_election);
        let fence = if args.leader_election {
            Fence::closed()
        } else {
            Fence::always_open()
        };
        let shard = args.sharding.then(|| identity(args));
        let work_fence = if shard.is_some() {
            Fence::closed()
        } else {
            fence.clone()
        };
        let (member_tx, member) = watch::channel(false);
        // The plugins this replica runs, announced on its shard Lease: none until its
        // plugins run. Said from the first write, so that a Lease taken over from an earlier
        // process of this shard does not keep announcing what that process ran (the sharder
        // would give this one objects before it runs their plugin, and take them back when
        // it announces).
        let (announce, announced) = watch::channel(announcing(std::iter::empty()));
        let (mut elector, mut shard_elector) = (None, None);
        let (mut leading_tx, mut member_tx) = (Some(leading_tx), Some(member_tx));
        let kept = announced.clone();
        if let Some(cfg) = lease {
            if let Some(id) = &shard {
                let mut shard_cfg = cfg.clone();
                shard_cfg.name = lease_name(id);
                shard_cfg
                    .labels
                    .insert(RING_LABEL.to_string(), args.ring.clone());
                tracing::info!(lease = %shard_cfg.name, ring = %args.ring, "sharding: announcing this replica's shard");
                shard_elector = Some(tokio::spawn(run_elector_announcing(
                    client.clone(),
                    shard_cfg,
                    member_tx.take().expect("one shard elector"),
                    work_fence.clone(),
                    shutdown.clone(),
                    announced,
                )));
            }
            tracing::info!(lease = %cfg.name, identity = %cfg.identity, "waiting to lead (caches warm meanwhile)");
            elector = Some(tokio::spawn(run_elector(
                client.clone(),
                cfg,
                leading_tx.take().expect("one leader elector"),
                fence.clone(),
                shutdown.clone(),
            )));
        }
        Elections {
            leading,
            fence,
            work_fence,
            shard,
            member,
            announce,
            elector,
            shard_elector,
            _unused: (leading_tx, member_tx, kept),
        }
    }
}
