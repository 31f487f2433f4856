//! Sharding in `wasmop run`: the leader's sharder loop, and each replica following its own
//! shard Lease (reconciling everything it holds on taking it, counting what it holds).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::k8s::kinds::api_resource;
use crate::registry::Manager;
use crate::shards::members::{Membership, Starting, list_announced, running};
use crate::shards::migrate::label_unsharded;
use crate::shards::sharder::{KindWatch, pass};
use crate::telemetry::health::ReadyFlag;
use crate::telemetry::metrics::{Metrics, MoveLabels, PluginOnlyLabels};

/// Where the ring lives and how often the sharder looks.
#[derive(Debug, Clone)]
pub struct RingSettings {
    /// Namespace of the shard Leases.
    pub namespace: String,
    /// The ring's name (the value of the shard Leases' ring label).
    pub ring: String,
    /// Time between two passes of the sharder.
    pub every: Duration,
    /// The namespace whose primaries are sharded (all when `None`).
    pub watched: Option<String>,
    /// How long the sharder waits at most for a live member that announces no plugin yet
    /// (starting) before it assigns without it: the ring's Lease duration.
    pub settle: Duration,
}

/// The longest the sharder goes without a pass over every object of a plugin.
const WHOLE_PASS_EVERY: Duration = Duration::from_secs(60);

async fn wait_or_end(
    every: Duration,
    leading: &mut watch::Receiver<bool>,
    shutdown: &mut watch::Receiver<bool>,
) {
    tokio::select! {
        _ = tokio::time::sleep(every) => {}
        _ = leading.wait_for(|l| !*l) => {}
        _ = shutdown.wait_for(|s| *s) => {}
    }
}

/// The sharder: while this replica leads, every `every` it reads the ring's live members
/// and makes one pass over the primaries of each running plugin (assign, drain, move).
/// Its writes go through the leader's fence (`client`).
pub async fn run_sharder(
    client: kube::Client,
    manager: Arc<Manager>,
    settings: RingSettings,
    mut leading: watch::Receiver<bool>,
    metrics: Arc<Metrics>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            biased;
            _ = shutdown.wait_for(|s| *s) => return,
            led = leading.wait_for(|l| *l) => if led.is_err() { return },
        }
        tracing::info!(ring = %settings.ring, "leading: running the sharder");
        // Renewals are judged by this replica's clock from the moment it leads.
        let mut membership = Membership::default();
        // Per plugin, once a term: objects made before sharding, labelled; their owners.
        let mut migrated: HashMap<String, HashSet<String>> = HashMap::new();
        let mut prune_failed = false;
        // Per plugin, for the term: a watch of its primaries' metadata, read by each pass.
        let mut watches: HashMap<String, KindWatch> = HashMap::new();
        // Per plugin: the members of its last pass over every object, and when.
        let mut whole: HashMap<String, (Vec<String>, Instant)> = HashMap::new();
        // Members starting (holding their Lease, announcing nothing yet), and the last set
        // of them said in the log.
        let mut starting = Starting::default();
        let mut said_waiting: Vec<String> = Vec::new();
        while *leading.borrow() && !*shutdown.borrow() {
            let (live, announced) =
                match list_announced(&client, &settings.namespace, &settings.ring).await {
                    Ok((leases, announced)) => {
                        (membership.live(&leases, Instant::now()), announced)
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot list the shard Leases");
                        wait_or_end(settings.every, &mut leading, &mut shutdown).await;
                        continue;
                    }
                };
            metrics.shard_ring_members.set(live.len() as i64);
            // No pass while a member starts (at most `settle` each): what it would be given
            // later would first go to the others, then be drained and handed over to it.
            let waited = starting.waited_for(&live, &announced, Instant::now(), settings.settle);
            if waited != said_waiting {
                if !waited.is_empty() {
                    tracing::info!(starting = ?waited, settle = ?settings.settle,
                        "members starting: the sharder waits for them to announce their plugins");
                }
                said_waiting = waited.clone();
            }
            if !waited.is_empty() {
                wait_or_end(settings.every, &mut leading, &mut shutdown).await;
                continue;
            }
            match crate::shards::members::prune(&client, &settings.namespace, &membership).await {
                Ok(deleted) if !deleted.is_empty() => {
                    tracing::info!(leases = ?deleted, "deleted the Leases of shards gone for good");
                }
                Ok(_) => {}
                // Said once a term: the next passes try again quietly.
                Err(e) if !prune_failed => {
                    prune_failed = true;
                    tracing::warn!(error = %e, "cannot delete the Leases of shards gone");
                }
                Err(e) => tracing::debug!(error = %e, "cannot delete the Leases of shards gone"),
            }
            let primaries = manager.primaries().await;
            watches.retain(|plugin, _| primaries.iter().any(|(i, _)| &i.name == plugin));
            whole.retain(|plugin, _| watches.contains_key(plugin));
            for (info, _) in primaries {
                let plugin = info.name.clone();
                if !migrated.contains_key(&plugin) {
                    match label_unsharded(&client, &info, settings.watched.as_deref()).await {
                        Ok(owners) => {
                            if !owners.is_empty() {
                                tracing::info!(plugin = %plugin, owners = owners.len(),
                                    "objects made before sharding labelled with their controller");
                            }
                            migrated.insert(plugin.clone(), owners);
                            // Labelling may take seconds (every owned object of the plugin):
                            // the ring read before it is stale by then (a member that joined
                            // meanwhile would be left out of the first assignment). The pass
                            // comes in the next round, on a fresh read of the ring.
                            continue;
                        }
                        Err(e) => {
                            tracing::warn!(plugin = %plugin, error = %e,
                                "cannot label the objects made before sharding; not assigning yet");
                            continue;
                        }
                    }
                }
                let unsharded = &migrated[&plugin];
                let ar = api_resource(&info.primary);
                let ns = settings.watched.as_deref();
                let watch = match watches.get(&plugin) {
                    Some(w) if w.resource() == &ar => w,
                    _ => {
                        let w = KindWatch::start(&client, &ar, ns);
                        watches.insert(plugin.clone(), w);
                        &watches[&plugin]
                    }
                };
                if !watch.synced(settings.every).await {
                    tracing::debug!(plugin = %plugin, "sharder's watch not synced yet");
                    continue;
                }
                // Only the members that run this plugin: another's objects would wait forever.
                let members = running(&live, &announced, &plugin);
                // With the same members as the last whole pass (and not too long ago), an
                // object that did not change since the last pass would get the same move it
                // got then: only the changed ones are decided, and one just patched only
                // once the watch shows the patch (decided again on the stale read, its
                // second patch was refused: 28 at 10,000 objects). A pass
                // that failed, a new member or one gone, a relist, or a minute: every object.
                let every = whole
                    .get(&plugin)
                    .is_none_or(|(m, at)| m != &members || at.elapsed() >= WHOLE_PASS_EVERY);
                let (objects, all) = watch.objects(every);
                if all {
                    whole.insert(plugin.clone(), (members.clone(), Instant::now()));
                }
                match pass(&client, &ar, &objects, &members, unsharded).await {
                    Ok(p) => {
                        let assigned: usize = p.assigned.values().sum();
                        for (step, n) in [("assigned", assigned), ("drain", p.drained)] {
                            metrics
                                .shard_moves
                                .get_or_create(&MoveLabels {
                                    plugin: plugin.clone(),
                                    step,
                                })
                                .inc_by(n as u64);
                        }
                        if assigned + p.drained > 0 {
                            tracing::info!(plugin = %plugin, ?live, assigned = ?p.assigned,
                                drained = p.drained, conflicts = p.conflicts, "sharder pass");
                        }
                    }
                    Err(e) => {
                        // What it did not write waits for the next pass, over every object.
                        whole.remove(&plugin);
                        tracing::warn!(plugin = %plugin, error = %e, "sharder pass failed");
                    }
                }
            }
            wait_or_end(settings.every, &mut leading, &mut shutdown).await;
        }
    }
}

/// Follows this replica's shard Lease until shutdown: while it holds it, the replica is a
/// member (`wasmop_shard_member`, readiness `shard`) and reconciles what it holds (all of
/// it again on each new term); every second it counts its primaries
/// (`wasmop_shard_objects`) and announces on `announce` the plugins it runs (written on its
/// Lease by the elector). Returns `false` if the elector ended before shutdown.
pub async fn follow_shard(
    mut member: watch::Receiver<bool>,
    manager: Arc<Manager>,
    metrics: Arc<Metrics>,
    ready: ReadyFlag,
    announce: watch::Sender<crate::k8s::lease::Announced>,
    mut shutdown: watch::Receiver<bool>,
) -> bool {
    let mut was = false;
    loop {
        let now = *member.borrow_and_update();
        if now != was {
            metrics.shard_member.set(i64::from(now));
            ready.set(now);
            if now {
                tracing::info!("holding the shard Lease: reconciling this shard's objects");
                manager.reconcile_everything().await;
            } else {
                tracing::error!("lost the shard Lease: writes refused until it is held again");
            }
            was = now;
        }
        let primaries = manager.primaries().await;
        let runs =
            crate::shards::members::announcing(primaries.iter().map(|(i, _)| i.name.as_str()));
        announce.send_if_modified(|a| std::mem::replace(a, runs.clone()) != runs);
        for (info, held) in primaries {
            metrics
                .shard_objects
                .get_or_create(&PluginOnlyLabels { plugin: info.name })
                .set(held as i64);
        }
        let gone = tokio::select! {
            _ = shutdown.wait_for(|s| *s) => return true,
            changed = member.changed() => changed.is_err(),
            _ = tokio::time::sleep(Duration::from_secs(1)) => false,
        };
        if gone {
            return *shutdown.borrow();
        }
    }
}
