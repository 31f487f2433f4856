//! Where the registry's plugin versions come from once it runs: the WasmPlugins (listed
//! first, then watched, with the reporter of their rollouts and recordings), the plugins
//! directory, and, sharded, the sharder and this replica's shard.

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::events::Reporter;
use tokio::sync::watch;

use crate::app::RunArgs;
use crate::app::elections::{Elections, identity, lease_namespace};
use crate::k8s::lease::Announced;
use crate::oci::RemoteOptions;
use crate::oci::reader::Redirects;
use crate::oci::signature::PublicKey;
use crate::registry::artifacts::Artifacts;
use crate::registry::sources::Uploads;
use crate::registry::{Manager, sources};
use crate::rollout::record::CaseRecorder;
use crate::telemetry::health::Health;
use crate::telemetry::metrics::Metrics;

/// How the host pulls OCI sources, from its flags: timeout, size cap, extra CAs, the disk
/// store, the keys it trusts.
pub(crate) fn artifacts(args: &RunArgs) -> anyhow::Result<Artifacts> {
    use anyhow::Context as _;
    let mut extra_roots = Vec::new();
    for path in &args.registry_ca {
        extra_roots.push(
            std::fs::read(path).with_context(|| format!("--registry-ca {}", path.display()))?,
        );
    }
    let mut host_keys = Vec::new();
    for path in &args.trusted_keys {
        let pem =
            std::fs::read(path).with_context(|| format!("--trusted-key {}", path.display()))?;
        host_keys.push(
            PublicKey::from_pem(&pem, &path.display().to_string()).map_err(anyhow::Error::msg)?,
        );
    }
    let artifacts = Artifacts {
        options: RemoteOptions {
            insecure: false,
            extra_roots,
            timeout: Duration::from_secs(args.oci_timeout_seconds.max(1)),
            max_bytes: args.oci_max_bytes,
            redirects: match args.registry_redirects.as_str() {
                "anywhere" => Redirects::Anywhere,
                _ => Redirects::SameRegistry,
            },
        },
        store: None,
        host_keys,
        require_signature: args.require_signature,
        allow_plugin_keys: args.allow_plugin_keys,
        allow_insecure: args.allow_insecure_registries,
    };
    Ok(match &args.cache_dir {
        Some(dir) => artifacts.with_store(&dir.join("artifacts"), (dir, args.cache_max_mib << 20)),
        None => artifacts,
    })
}

/// Uploads (unless `--no-uploads`) and the plugins directory, offered to `manager`.
pub(crate) async fn start(
    args: &RunArgs,
    uploads: &Uploads,
    manager: &Arc<Manager>,
    elections: &Elections,
    cases: Arc<CaseRecorder>,
    plugin_ns: &str,
    shutdown: &watch::Receiver<bool>,
) {
    if !args.no_uploads {
        let client = &uploads.client;
        tokio::spawn(crate::registry::report::run(
            client.clone(),
            manager.clone(),
            elections.fence.clone(),
            cases,
            Reporter {
                controller: "wasmop".into(),
                instance: Some(identity(args)),
            },
            shutdown.clone(),
        ));
        // Uploads first: after a restart the host runs what was pushed, not an older file.
        if let Err(e) = sources::load_cluster(uploads, manager, plugin_ns).await {
            tracing::warn!(error = %e, namespace = %plugin_ns, "cannot list WasmPlugins (is the CRD installed?)");
        }
        tokio::spawn(sources::watch_cluster(
            uploads.clone(),
            manager.clone(),
            plugin_ns.to_string(),
            Duration::from_secs(args.permissions_recheck_seconds.max(1)),
            shutdown.clone(),
        ));
    }
    if args.plugins.is_dir() {
        tokio::spawn(sources::watch_dir(
            manager.clone(),
            args.plugins.clone(),
            Duration::from_secs(args.plugins_poll_seconds.max(1)),
            shutdown.clone(),
        ));
    } else {
        tracing::warn!(dir = %args.plugins.display(), "no plugins directory");
    }
}

/// Sharded: the sharder (it acts while this replica leads) and this replica's part, which
/// follows its shard Lease; losing the shard Lease's elector stops the host (`stop`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn start_sharding(
    args: &RunArgs,
    client: &kube::Client,
    manager: &Arc<Manager>,
    elections: &Elections,
    metrics: &Arc<Metrics>,
    health: &Health,
    shutdown: &watch::Receiver<bool>,
    stop: &watch::Sender<bool>,
) {
    tokio::spawn(crate::shards::running::run_sharder(
        client.clone(),
        manager.clone(),
        crate::shards::running::RingSettings {
            namespace: lease_namespace(args),
            ring: args.ring.clone(),
            every: Duration::from_millis(args.sharder_every_ms.max(50)),
            watched: args.namespace.clone(),
            settle: Duration::from_secs(args.lease_seconds.max(1)),
        },
        elections.leading.clone(),
        metrics.clone(),
        shutdown.clone(),
    ));
    let (manager, metrics, ready) = (manager.clone(), metrics.clone(), health.flag("shard"));
    let (member, announce): (watch::Receiver<bool>, watch::Sender<Announced>) =
        (elections.member.clone(), elections.announce.clone());
    let (shutdown, stop) = (shutdown.clone(), stop.clone());
    tokio::spawn(async move {
        if !crate::shards::running::follow_shard(
            member, manager, metrics, ready, announce, shutdown,
        )
        .await
        {
            // Nothing may run as if it held the shard: the host stops.
            tracing::error!("the shard Lease's elector ended: stopping");
            let _ = stop.send(true);
        }
    });
}
