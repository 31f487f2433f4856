//! Leader election against a real API server: of two electors exactly one leads; when the
//! leader shuts down the standby takes over at once, and when it crashes, within the lease
//! duration; the fence on writes is open on the leader only, and closed on a leader cut off
//! from the API server before anyone else may lead, and one cut off past its lease never
//! writes under it again when the link comes back.
//!
//! Needs `WASMOP_TEST_KUBECONFIG` (a kubeconfig path, e.g. the one `tests/cluster/up`
//! writes; `make e2e` runs it under `scripts/with-cluster`); without it the tests fail.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use wasmop::k8s::fence::Fence;

#[path = "support/relay.rs"]
mod relay;
use relay::{Fault, Relay};
use wasmop::k8s::lease::{LeaseConfig, run_elector};
use wasmop::shards::members::{GONE_AFTER, Membership, list, prune, shard_lease};
use wasmop::shards::ring::{DEFAULT_VNODES, Ring};

const LEASE: Duration = Duration::from_secs(3);
const SLACK: Duration = Duration::from_secs(2);

async fn config() -> anyhow::Result<kube::Config> {
    let Some(path) = std::env::var_os("WASMOP_TEST_KUBECONFIG") else {
        bail!(
            "WASMOP_TEST_KUBECONFIG is not set: these tests need an API server \
             (run them with scripts/with-cluster, as `make e2e` does)"
        );
    };
    let kubeconfig = Kubeconfig::read_from(&path)
        .with_context(|| format!("reading kubeconfig {}", path.to_string_lossy()))?;
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    Ok(config)
}

async fn client() -> anyhow::Result<kube::Client> {
    Ok(kube::Client::try_from(config().await?)?)
}

/// One running elector and the channels to watch and stop it.
struct Elector {
    identity: String,
    leading: watch::Receiver<bool>,
    fence: Arc<Fence>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<anyhow::Result<()>>>,
}

impl Drop for Elector {
    /// A failed test must not leave an elector rewriting the Lease after the cleanup.
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The lease name for one test: unique per process and run.
fn unique_name() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "wasmop-lease-test-{}-{}",
        std::process::id(),
        nanos % 1_000_000_000
    )
}

fn start(client: &kube::Client, name: &str, identity: &str) -> Elector {
    spawn_elector(client, LeaseConfig::new("default", name, identity))
}

/// Runs an elector on `cfg` with the tests' short timings.
fn spawn_elector(client: &kube::Client, cfg: LeaseConfig) -> Elector {
    let cfg = LeaseConfig {
        lease_duration: LEASE,
        renew_every: Duration::from_secs(1),
        renew_deadline: Duration::from_secs(2),
        retry_every: Duration::from_millis(500),
        ..cfg
    };
    let identity = cfg.identity.clone();
    let (leading_tx, leading) = watch::channel(false);
    let (stop, stop_rx) = watch::channel(false);
    let fence = Fence::closed();
    let task = tokio::spawn(run_elector(
        client.clone(),
        cfg,
        leading_tx,
        fence.clone(),
        stop_rx,
    ));
    Elector {
        identity,
        leading,
        fence,
        stop,
        task: Some(task),
    }
}

impl Elector {
    fn leads(&self) -> bool {
        *self.leading.borrow()
    }

    /// Whether its writes may leave now.
    fn may_write(&self) -> bool {
        self.fence.is_open()
    }

    async fn shut_down(mut self) -> anyhow::Result<()> {
        self.stop.send_replace(true);
        let task = self.task.take().context("already stopped")?;
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .context("elector did not stop")??
    }
}

/// Polls until `cond` holds, checking `invariant` at every step, for at most `limit`.
async fn wait_until(
    limit: Duration,
    mut invariant: impl FnMut() -> anyhow::Result<()>,
    mut cond: impl FnMut() -> bool,
) -> anyhow::Result<Duration> {
    let start = Instant::now();
    loop {
        invariant()?;
        if cond() {
            return Ok(start.elapsed());
        }
        if start.elapsed() > limit {
            bail!("condition not reached within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// How the first leader goes away.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Exit {
    /// Shutdown signal: it steps down and releases the lease.
    Graceful,
    /// Its task is aborted: the lease is left to expire.
    Crash,
}

async fn scenario(client: &kube::Client, name: &str, exit: Exit) -> anyhow::Result<()> {
    let a = start(client, name, "elector-a");
    let b = start(client, name, "elector-b");
    let never_both = || {
        ensure!(!(a.leads() && b.leads()), "both electors lead at once");
        ensure!(
            !(a.may_write() && b.may_write()),
            "both electors' fences are open at once"
        );
        Ok(())
    };
    wait_until(LEASE + SLACK, never_both, || a.leads() || b.leads()).await?;
    // Stable: the same one leads over several renewals, the other stays a standby.
    let first_a = a.leads();
    let steady = Instant::now();
    while steady.elapsed() < LEASE {
        never_both()?;
        ensure!(
            a.leads() == first_a && b.leads() != first_a,
            "leadership changed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let (leader, standby) = if a.leads() { (a, b) } else { (b, a) };
    ensure!(leader.may_write(), "the leader's fence is closed");
    ensure!(!standby.may_write(), "the standby's fence is open");
    let api: Api<Lease> = Api::namespaced(client.clone(), "default");
    let before = api.get(name).await?.spec.unwrap_or_default();
    ensure!(before.holder_identity.as_deref() == Some(leader.identity.as_str()));
    ensure!(before.lease_duration_seconds == Some(3));
    ensure!(before.acquire_time.is_some() && before.renew_time.is_some());

    let leader_rx = leader.leading.clone();
    match exit {
        Exit::Graceful => {
            let leader_fence = leader.fence.clone();
            leader.shut_down().await?;
            ensure!(!*leader_rx.borrow(), "a stopped leader must announce false");
            ensure!(!leader_fence.is_open(), "a stopped leader's fence is open");
        }
        Exit::Crash => drop(leader),
    }
    let took = wait_until(LEASE + SLACK, || Ok(()), || standby.leads()).await?;
    println!("{exit:?}: standby took over {took:?} after the leader stopped");
    match exit {
        Exit::Graceful => ensure!(
            took < LEASE,
            "a released lease should be taken at once, took {took:?}"
        ),
        // The crashed leader renewed at most `renew_every` (1 s) before it stopped; the
        // standby waits until the record has stood unchanged for the whole duration.
        Exit::Crash => ensure!(
            took >= LEASE - Duration::from_millis(1500),
            "the standby took a lease that was still valid ({took:?} after the crash)"
        ),
    }

    let after = api.get(name).await?.spec.unwrap_or_default();
    ensure!(after.holder_identity.as_deref() == Some(standby.identity.as_str()));
    ensure!(
        after.lease_transitions.unwrap_or(0) > before.lease_transitions.unwrap_or(0),
        "leaseTransitions did not grow: {before:?} -> {after:?}"
    );
    standby.shut_down().await
}

async fn run(exit: Exit) -> anyhow::Result<()> {
    let client = client().await?;
    let name = unique_name();
    let result = scenario(&client, &name, exit).await;
    let api: Api<Lease> = Api::namespaced(client, "default");
    let cleanup = api.delete(&name, &DeleteParams::default()).await;
    result?;
    cleanup.context("deleting the test Lease")?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_and_fast_takeover_on_shutdown() -> anyhow::Result<()> {
    run(Exit::Graceful).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashed_leader_is_replaced_after_expiry() -> anyhow::Result<()> {
    run(Exit::Crash).await
}

/// A client straight to the API server of `config`, a relay to it, and a client through
/// the relay.
async fn through_relay(
    config: kube::Config,
) -> anyhow::Result<(kube::Client, Relay, kube::Client)> {
    let direct = kube::Client::try_from(config.clone())?;
    let upstream = config
        .cluster_url
        .authority()
        .context("cluster URL without host")?
        .to_string();
    let relay = Relay::start(upstream).await?;
    let mut relayed = config;
    relayed.cluster_url = format!("https://127.0.0.1:{}", relay.port).parse()?;
    let relayed = kube::Client::try_from(relayed)?;
    Ok((direct, relay, relayed))
}

async fn cut_off(config: kube::Config, name: &str, fault: Fault) -> anyhow::Result<()> {
    let (direct, relay, relayed) = through_relay(config).await?;

    let a = start(&relayed, name, "elector-a");
    wait_until(LEASE + SLACK, || Ok(()), || a.leads()).await?;
    let b = start(&direct, name, "elector-b");
    tokio::time::sleep(Duration::from_secs(1)).await;
    ensure!(a.leads() && !b.leads(), "a should still lead");

    relay.break_link(fault);
    let never_both = || {
        ensure!(!(a.leads() && b.leads()), "both electors lead at once");
        ensure!(
            !(a.may_write() && b.may_write()),
            "both electors' fences are open at once"
        );
        Ok(())
    };
    let stepped_down = wait_until(LEASE + SLACK, never_both, || !a.leads()).await?;
    ensure!(!a.may_write(), "a stepped down with its fence open");
    ensure!(
        stepped_down <= LEASE,
        "stepped down {stepped_down:?} after the cut"
    );
    let took = wait_until(LEASE + SLACK, never_both, || b.leads()).await?;
    println!("{fault:?}: a stepped down after {stepped_down:?}, b led {took:?} later");
    b.shut_down().await?;
    drop(a);
    Ok(())
}

/// Runs [`cut_off`] on a fresh Lease and deletes it afterwards.
async fn run_cut_off(fault: Fault) -> anyhow::Result<()> {
    let config = config().await?;
    let name = unique_name();
    let result = cut_off(config.clone(), &name, fault).await;
    let api: Api<Lease> = Api::namespaced(kube::Client::try_from(config)?, "default");
    let cleanup = api.delete(&name, &DeleteParams::default()).await;
    result?;
    cleanup.context("deleting the test Lease")?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_refused_by_network_steps_down_before_takeover() -> anyhow::Result<()> {
    run_cut_off(Fault::Refuse).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_whose_requests_hang_steps_down_before_takeover() -> anyhow::Result<()> {
    run_cut_off(Fault::Blackhole).await
}

/// A write cut off at the fence's deadline may still be committed by the API server: a
/// leader that had one does not release its Lease on shutdown (a released Lease is taken at
/// once) but lets it run out. Its writes go through a relay that swallows them (they hang),
/// its Lease is renewed directly; after the cut-off write, a graceful shutdown leaves the
/// record held, and the standby takes over only once it has stood for the whole duration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_with_a_write_of_unknown_outcome_lets_its_lease_run_out() -> anyhow::Result<()> {
    let config = config().await?;
    let name = unique_name();
    let result = unknown_outcome(config.clone(), &name).await;
    let api: Api<Lease> = Api::namespaced(kube::Client::try_from(config)?, "default");
    let cleanup = api.delete(&name, &DeleteParams::default()).await;
    result?;
    cleanup.context("deleting the test Lease")?;
    Ok(())
}

async fn unknown_outcome(config: kube::Config, name: &str) -> anyhow::Result<()> {
    let (direct, relay, relayed) = through_relay(config.clone()).await?;
    drop(relayed);
    let a = start(&direct, name, "elector-a");
    wait_until(LEASE + SLACK, || Ok(()), || a.leads()).await?;
    let b = start(&direct, name, "elector-b");
    // a's writes: through the relay, behind a's fence.
    let mut relayed = config;
    relayed.cluster_url = format!("https://127.0.0.1:{}", relay.port).parse()?;
    let writer = kube::client::ClientBuilder::try_from(relayed)?
        .with_layer(&wasmop::k8s::fence::FenceLayer(a.fence.clone()))
        .build();
    relay.break_link(Fault::Blackhole);
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(writer, "default");
    let cm = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("{name}-w")}}))?;
    let cut = cms.create(&Default::default(), &cm).await;
    ensure!(
        matches!(&cut, Err(e) if wasmop::k8s::fence::is_fenced_off(e)),
        "the write should be cut off at the fence's deadline: {cut:?}"
    );
    ensure!(
        a.fence.outcomes_unknown() == 1,
        "the cut-off write is counted"
    );
    ensure!(a.leads() && !b.leads(), "a still leads (its renewals pass)");
    let api: Api<Lease> = Api::namespaced(direct.clone(), "default");
    let fence = a.fence.clone();
    a.shut_down().await?;
    ensure!(!fence.is_open(), "a stopped leader's fence is open");
    let held = api.get(name).await?.spec.unwrap_or_default();
    ensure!(
        held.holder_identity.as_deref() == Some("elector-a")
            && held.lease_duration_seconds == Some(LEASE.as_secs() as i32),
        "the Lease was released (or shortened) after a write of unknown outcome: {held:?}"
    );
    let took = wait_until(LEASE + SLACK, || Ok(()), || b.leads()).await?;
    println!("b led {took:?} after a stopped with a write of unknown outcome");
    // a renewed at most `renew_every` (1 s) before it stopped; b waits for the record to
    // stand unchanged for the whole duration.
    ensure!(
        took + Duration::from_millis(1500) >= LEASE,
        "b took a Lease that could still cover a's write ({took:?} after a stopped)"
    );
    b.shut_down().await
}

/// A returning member is a new member: a shard cut off from the API server (its requests
/// hang) for longer than its Lease leaves the ring; when the link comes back its elector
/// never renews that Lease nor opens its fence again, however the record stands (nobody
/// took it: a shard Lease is its own), and ends with `TermExpired` so the process starts
/// afresh with new caches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_cut_off_past_its_lease_never_writes_under_it_again() -> anyhow::Result<()> {
    let config = config().await?;
    let (direct, relay, relayed) = through_relay(config).await?;
    let ring = unique_name();
    let id = format!("{ring}-a");
    let mut a = spawn_elector(&relayed, shard_lease("default", &ring, &id));
    let mut members = Membership::default();
    let result = async {
        members_become(&direct, &ring, &mut members, std::slice::from_ref(&id), LEASE + SLACK)
            .await?;
        ensure!(a.may_write(), "the shard's fence is closed while it holds its Lease");
        relay.break_link(Fault::Blackhole);
        let gone = members_become(&direct, &ring, &mut members, &[], 2 * (LEASE + SLACK)).await?;
        ensure!(!a.may_write(), "the cut-off shard's fence is still open");
        relay.heal();
        let healed = Instant::now();
        while healed.elapsed() < 2 * LEASE {
            ensure!(
                !a.may_write() && !a.leads(),
                "the shard took its Lease back {:?} after the link came back: it writes on a view older than the cut",
                healed.elapsed()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let task = a.task.take().context("elector task")?;
        let ended = tokio::time::timeout(SLACK, task)
            .await
            .context("the elector still runs after its term ended")??;
        let err = ended.err().context("the elector ended without an error")?;
        ensure!(
            err.downcast_ref::<wasmop::k8s::lease::TermExpired>().is_some(),
            "the elector ended with {err:#}, not TermExpired"
        );
        let live = members.live(&list(&direct, "default", &ring).await?, std::time::Instant::now());
        ensure!(live.is_empty(), "the ring still lists {live:?}");
        println!("cut off: out of the ring after {gone:?}; after the link came back: {err}");
        Ok(())
    }
    .await;
    let api: Api<Lease> = Api::namespaced(direct, "default");
    let _ = api
        .delete(
            &wasmop::shards::members::lease_name(&id),
            &DeleteParams::default(),
        )
        .await;
    result
}

/// Shard Leases: three replicas announce themselves in one ring, each holding its own Lease
/// (its fence open); a replica that stops leaves the ring at once (its Lease released), one
/// that crashes once its Lease has gone unrenewed for the duration. Leases of another ring
/// are not members.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_leases_make_the_ring_membership() -> anyhow::Result<()> {
    let client = client().await?;
    let ring = unique_name();
    let announce =
        |identity: &str, ring: &str| spawn_elector(&client, shard_lease("default", ring, identity));
    let ids: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|s| format!("{ring}-{s}"))
        .collect();
    let shards: Vec<Elector> = ids.iter().map(|id| announce(id, &ring)).collect();
    let other = announce(&format!("{ring}-other"), &format!("{ring}-x"));
    let mut members = Membership::default();
    members_become(&client, &ring, &mut members, &ids, LEASE + SLACK).await?;
    ensure!(
        shards.iter().all(|s| s.leads() && s.may_write()),
        "every shard holds its own Lease"
    );
    let mut shards = shards.into_iter();
    let (a, b, c) = (
        shards.next().unwrap(),
        shards.next().unwrap(),
        shards.next().unwrap(),
    );
    // A clean stop releases the Lease: out of the ring at once.
    a.shut_down().await?;
    let left_after = members_become(&client, &ring, &mut members, &ids[1..], SLACK).await?;
    // A crash leaves the Lease unrenewed: out once it has not changed for its duration.
    drop(b);
    let crashed_after =
        members_become(&client, &ring, &mut members, &ids[2..], LEASE + SLACK).await?;
    ensure!(
        crashed_after >= LEASE - Duration::from_millis(500),
        "a crashed shard left before its Lease could expire ({crashed_after:?})"
    );
    println!(
        "ring of 3: a stopped shard left after {left_after:?}, a crashed one after {crashed_after:?}"
    );
    c.shut_down().await?;
    other.shut_down().await?;
    let api: Api<Lease> = Api::namespaced(client, "default");
    for id in ids.iter().chain(std::iter::once(&format!("{ring}-other"))) {
        let _ = api
            .delete(
                &wasmop::shards::members::lease_name(id),
                &DeleteParams::default(),
            )
            .await;
    }
    Ok(())
}

/// The Lease of a shard that crashed is deleted by the sharder's prune once it has gone
/// unrenewed for ten durations, not before; a live member's Lease is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_of_shards_gone_for_good_are_deleted() -> anyhow::Result<()> {
    let client = client().await?;
    let ring = unique_name();
    let ids: Vec<String> = ["a", "b"].iter().map(|s| format!("{ring}-{s}")).collect();
    let a = spawn_elector(&client, shard_lease("default", &ring, &ids[0]));
    let b = spawn_elector(&client, shard_lease("default", &ring, &ids[1]));
    let mut members = Membership::default();
    members_become(&client, &ring, &mut members, &ids, LEASE + SLACK).await?;
    drop(b);
    let crashed = Instant::now();
    let gone_after = LEASE * GONE_AFTER;
    let b_lease = wasmop::shards::members::lease_name(&ids[1]);
    let deleted = loop {
        let leases = list(&client, "default", &ring).await?;
        members.live(&leases, std::time::Instant::now());
        let deleted = prune(&client, "default", &members).await?;
        if !deleted.is_empty() {
            break deleted;
        }
        ensure!(
            crashed.elapsed() < gone_after + 2 * SLACK,
            "the crashed shard's Lease is still there {:?} after the crash",
            crashed.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let took = crashed.elapsed();
    ensure!(deleted == [b_lease.clone()], "deleted {deleted:?}");
    ensure!(
        took >= gone_after - Duration::from_secs(1),
        "deleted {took:?} after the crash, before {gone_after:?}"
    );
    let api: Api<Lease> = Api::namespaced(client.clone(), "default");
    ensure!(api.get_opt(&b_lease).await?.is_none(), "still there");
    let a_lease = wasmop::shards::members::lease_name(&ids[0]);
    ensure!(
        api.get_opt(&a_lease).await?.is_some() && a.may_write(),
        "the live shard lost its Lease"
    );
    println!("a crashed shard's Lease deleted {took:?} after the crash ({GONE_AFTER} durations)");
    a.shut_down().await?;
    let _ = api.delete(&a_lease, &DeleteParams::default()).await;
    Ok(())
}

/// Polls the shard Leases of `ring` until its live members are exactly `want`; fails after
/// `limit`. Returns how long it took.
async fn members_become(
    client: &kube::Client,
    ring: &str,
    members: &mut Membership,
    want: &[String],
    limit: Duration,
) -> anyhow::Result<Duration> {
    let start = Instant::now();
    loop {
        let leases = list(client, "default", ring).await?;
        let live = members.live(&leases, std::time::Instant::now());
        if live == want {
            return Ok(start.elapsed());
        }
        ensure!(
            start.elapsed() < limit,
            "ring {ring}: live {live:?}, expected {want:?} within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The sharder's protocol against the API server, over 1,000 ConfigMaps standing in for
/// primaries: three live shards get about a third each; a fourth joins and about a quarter
/// move to it, each only after its old shard acknowledged the drain (a watch sees every label
/// change: never from one live shard straight to another); a crashed shard's objects move at
/// once after its Lease expires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sharder_moves_objects_only_after_the_old_shard_lets_go() -> anyhow::Result<()> {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{ApiResource, ListParams, PostParams};
    use kube::runtime::watcher;
    use std::collections::{BTreeMap, HashMap, HashSet};
    use std::sync::Mutex;
    use wasmop::shards::assign::{DRAIN_LABEL, SHARD_LABEL};
    use wasmop::shards::scope::HANDOVER_ANNOTATION;
    use wasmop::shards::sharder::{acknowledge, api_of, list_paged, pass};

    const N: usize = 1_000;
    let client = client().await?;
    let run = unique_name();
    let selector = format!("wasmop-test-run={run}");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for i in 0..N {
        let cm: ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("{run}-{i}"), "labels": {"wasmop-test-run": run}}}))?;
        cms.create(&PostParams::default(), &cm).await?;
    }
    let ar = ApiResource::erase::<ConfigMap>(&());
    // One pass of the sharder over this test's objects, given the live members.
    let sharder_pass = |live: &[String]| {
        let (client, ar, selector) = (client.clone(), ar.clone(), selector.clone());
        let live = live.to_vec();
        async move {
            // A consistent read, so that each step below decides on what the last one wrote
            // (the running sharder reads a watch, and a stale decision fails on its
            // resourceVersion and waits for the next pass).
            let api = api_of(&client, &ar, Some("default"));
            let objects: Vec<_> = list_paged(&api, &ListParams::default().labels(&selector))
                .await?
                .into_iter()
                .map(Arc::new)
                .collect();
            pass(&client, &ar, &objects, &live, &Default::default()).await
        }
    };
    // Every label change, per object, as the watch shows it; moves between two shards that
    // were both live are violations.
    let dead: Arc<Mutex<HashSet<String>>> = Arc::default();
    let violations: Arc<Mutex<Vec<String>>> = Arc::default();
    let assignments_seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let watch = {
        let (dead, violations) = (dead.clone(), violations.clone());
        let seen = assignments_seen.clone();
        let mut events = watcher(cms.clone(), watcher::Config::default().labels(&selector)).boxed();
        tokio::spawn(async move {
            let mut owner: HashMap<String, String> = HashMap::new();
            while let Some(Ok(ev)) = events.next().await {
                let (watcher::Event::Apply(cm) | watcher::Event::InitApply(cm)) = ev else {
                    continue;
                };
                let name = cm.metadata.name.clone().unwrap_or_default();
                let now = cm
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(SHARD_LABEL))
                    .cloned();
                if now.is_some() && owner.get(&name) != now.as_ref() {
                    seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
                match (owner.get(&name), now) {
                    (Some(before), Some(after)) if *before != after => {
                        if !dead.lock().unwrap().contains(before) {
                            violations
                                .lock()
                                .unwrap()
                                .push(format!("{name}: {before} -> {after}"));
                        }
                        owner.insert(name, after);
                    }
                    (_, Some(after)) => {
                        owner.insert(name, after);
                    }
                    (_, None) => {
                        owner.remove(&name);
                    }
                }
            }
        })
    };
    let announce = |identity: &str| spawn_elector(&client, shard_lease("default", &run, identity));
    let mut members = Membership::default();
    let owners = || async {
        let mut by: BTreeMap<String, usize> = BTreeMap::new();
        for cm in cms
            .list(&ListParams::default().labels(&selector))
            .await?
            .items
        {
            let l = cm.metadata.labels.unwrap_or_default();
            *by.entry(l.get(SHARD_LABEL).cloned().unwrap_or_default())
                .or_default() += 1;
        }
        anyhow::Ok(by)
    };
    // Objects carrying the handover annotation (moved from another shard).
    let handed_over = || async {
        let n = cms
            .list(&ListParams::default().labels(&selector))
            .await?
            .items
            .iter()
            .filter(|cm| {
                cm.metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.contains_key(HANDOVER_ANNOTATION))
            })
            .count();
        anyhow::Ok(n)
    };
    // Simulated shards: each acknowledges the drains asked of it.
    let acknowledge_all = |shard: String| {
        let client = client.clone();
        let selector = format!("{selector},{SHARD_LABEL}={shard},{DRAIN_LABEL}=true");
        async move {
            let api = api_of(
                &client,
                &ApiResource::erase::<ConfigMap>(&()),
                Some("default"),
            );
            let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
            let mut n = 0;
            for cm in cms
                .list(&ListParams::default().labels(&selector))
                .await?
                .items
            {
                let name = cm.metadata.name.clone().unwrap_or_default();
                acknowledge(&api, &name, cm.metadata.resource_version.as_deref(), &shard).await?;
                n += 1;
            }
            anyhow::Ok(n)
        }
    };
    let name = |s: &str| format!("{run}-{s}");
    let (a, b, c) = (
        announce(&name("a")),
        announce(&name("b")),
        announce(&name("c")),
    );
    let three = vec![name("a"), name("b"), name("c")];
    members_become(&client, &run, &mut members, &three, LEASE + SLACK).await?;
    let first = sharder_pass(&three).await?;
    ensure!(first.objects == N && first.drained == 0, "{first:?}");
    // The UIDs of the objects: the ring's own answer for each is what the labels must say
    // (the split's evenness depends on the run's shard names, so no fixed range holds).
    let uids = cms
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .filter_map(|cm| cm.metadata.uid)
        .collect::<Vec<_>>();
    let ring3 = Ring::new(three.clone(), DEFAULT_VNODES);
    let mut by_ring: BTreeMap<String, usize> = BTreeMap::new();
    for u in &uids {
        *by_ring
            .entry(ring3.owner(u).unwrap_or_default().to_string())
            .or_default() += 1;
    }
    let split = owners().await?;
    ensure!(
        split == by_ring && split.len() == 3 && split.values().all(|n| *n >= 150),
        "split of {N} over 3: {split:?}; the ring's: {by_ring:?}"
    );

    // A fourth shard: drain first, move after the acknowledgement.
    let d = announce(&name("d"));
    let four = vec![name("a"), name("b"), name("c"), name("d")];
    members_become(&client, &run, &mut members, &four, LEASE + SLACK).await?;
    let asked = sharder_pass(&four).await?;
    ensure!(
        asked.assigned.is_empty(),
        "nothing moves before a drain is acknowledged: {asked:?}"
    );
    let ring4 = Ring::new(four.clone(), DEFAULT_VNODES);
    let moving = uids
        .iter()
        .filter(|u| ring3.owner(u) != ring4.owner(u))
        .count();
    ensure!(
        asked.drained == moving && moving >= 100,
        "every object the fourth shard takes is drained, no other: {asked:?}; the ring moves {moving}"
    );
    let again = sharder_pass(&four).await?;
    ensure!(
        again.drained == 0 && again.assigned.is_empty(),
        "a drain is asked once: {again:?}"
    );
    let mut acked = 0;
    for s in &three {
        acked += acknowledge_all(s.clone()).await?;
    }
    ensure!(
        acked == asked.drained,
        "{acked} acknowledged of {} drained",
        asked.drained
    );
    let moved = sharder_pass(&four).await?;
    ensure!(
        moved.assigned.get(&name("d")) == Some(&asked.drained)
            && moved.assigned.len() == 1
            && moved.taken.is_empty(),
        "every acknowledged object goes to d: {moved:?}"
    );
    ensure!(
        handed_over().await? == asked.drained,
        "each moved object carries the handover annotation for its new shard"
    );
    println!(
        "fourth shard: {} of {N} drained, acknowledged and moved to it; split now {:?}",
        asked.drained,
        owners().await?
    );

    // A crashed shard: its objects move without a drain once its Lease has expired.
    let c_objects = owners().await?.get(&name("c")).copied().unwrap_or(0);
    drop(c);
    dead.lock().unwrap().insert(name("c"));
    let without_c = vec![name("a"), name("b"), name("d")];
    let crashed_after =
        members_become(&client, &run, &mut members, &without_c, LEASE + SLACK).await?;
    let rescued = sharder_pass(&without_c).await?;
    ensure!(
        rescued.drained == 0 && rescued.assigned.values().sum::<usize>() == c_objects,
        "c's {c_objects} objects move at once: {rescued:?}"
    );
    ensure!(
        rescued.taken == std::collections::BTreeMap::from([(name("c"), c_objects)]),
        "the pass counts them as taken from c without a drain: {rescued:?}"
    );
    ensure!(
        handed_over().await? == asked.drained + c_objects,
        "a dead shard's objects carry the handover annotation too"
    );
    let end = owners().await?;
    ensure!(
        !end.contains_key(&name("c")) && end.values().sum::<usize>() == N,
        "{end:?}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    watch.abort();
    let v = violations.lock().unwrap().clone();
    ensure!(
        v.is_empty(),
        "moved between two live shards without an acknowledgement: {v:?}"
    );
    // The watch saw every assignment (so it could have seen a bad one).
    let seen = assignments_seen.load(std::sync::atomic::Ordering::SeqCst);
    ensure!(
        seen >= N + asked.drained + c_objects,
        "the watch saw {seen} assignments, fewer than were made"
    );
    println!(
        "crashed shard: its {c_objects} objects moved after {:?}; final split {end:?}",
        crashed_after
    );

    for e in [a, b, d] {
        e.shut_down().await?;
    }
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    for s in ["a", "b", "c", "d"] {
        let _ = leases
            .delete(
                &wasmop::shards::members::lease_name(&name(s)),
                &DeleteParams::default(),
            )
            .await;
    }
    cms.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels(&selector),
    )
    .await?;
    Ok(())
}
