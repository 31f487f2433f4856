//! Who is in the ring: every replica announces itself with a shard Lease of its own
//! (renewed like the leader Lease, with the same fencing), labelled with the ring's name.
//! A member is live while its Lease has a holder and has been seen renewed within its
//! duration by the observer's own clock (the leader election's rule, so clocks that
//! disagree cannot make a live shard look dead); a released Lease (no holder) leaves at once.
//! A Lease no member has held for [`GONE_AFTER`] of its durations is deleted by the sharder
//! ([`prune`]), so the ring's Leases do not pile up as replicas come and go.

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::api::{Api, DeleteParams, ListParams, Preconditions};

use crate::k8s::lease::{Decision, LeaseConfig, Observer, decide};

/// The label that puts a Lease in a ring (value: the ring's name).
pub const RING_LABEL: &str = "wasmop.dev/ring";

/// The name of the shard Lease of replica `identity`.
pub fn lease_name(identity: &str) -> String {
    format!("wasmop-shard-{identity}")
}

/// The shard Lease of replica `identity` in `ring`: the leader election's settings (the
/// same renewal and fencing), its own Lease name, and the ring's label.
pub fn shard_lease(namespace: &str, ring: &str, identity: &str) -> LeaseConfig {
    let mut cfg = LeaseConfig::new(namespace, lease_name(identity), identity);
    cfg.labels.insert(RING_LABEL.to_string(), ring.to_string());
    cfg
}

/// The annotation on a shard Lease naming the plugins its replica runs, comma-separated,
/// written by its elector with every renewal: the sharder gives a plugin's objects only to
/// members that announce it.
pub const PLUGINS_ANNOTATION: &str = "wasmop.dev/plugins";

/// The annotations announcing `plugins` (names).
pub fn announcing<'a>(plugins: impl IntoIterator<Item = &'a str>) -> crate::k8s::lease::Announced {
    let names: BTreeSet<&str> = plugins.into_iter().collect();
    let list: Vec<&str> = names.into_iter().collect();
    [(PLUGINS_ANNOTATION.to_string(), list.join(","))].into()
}

/// The shard Leases of `ring` in `namespace`: (name, spec) each.
pub async fn list(
    client: &kube::Client,
    namespace: &str,
    ring: &str,
) -> Result<Vec<(String, Option<LeaseSpec>)>, kube::Error> {
    Ok(list_announced(client, namespace, ring).await?.0)
}

/// [`list`], and the plugins each holder announces ([`PLUGINS_ANNOTATION`]), by holder.
pub async fn list_announced(
    client: &kube::Client,
    namespace: &str,
    ring: &str,
) -> Result<(Vec<(String, Option<LeaseSpec>)>, Announcements), kube::Error> {
    let api: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let leases = api
        .list(&ListParams::default().labels(&format!("{RING_LABEL}={ring}")))
        .await?;
    let mut announced = Announcements::new();
    let leases = leases
        .items
        .into_iter()
        .map(|l| {
            let holder = l.spec.as_ref().and_then(|s| s.holder_identity.clone());
            let plugins = l
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(PLUGINS_ANNOTATION));
            if let (Some(holder), Some(plugins)) = (holder, plugins) {
                let names = plugins.split(',').filter(|p| !p.is_empty());
                announced.insert(holder, names.map(str::to_string).collect());
            }
            (l.metadata.name.unwrap_or_default(), l.spec)
        })
        .collect();
    Ok((leases, announced))
}

/// The plugins each member (holder identity) announces.
pub type Announcements = HashMap<String, BTreeSet<String>>;

/// The `live` members that announce `plugin`.
pub fn running(live: &[String], announced: &Announcements, plugin: &str) -> Vec<String> {
    live.iter()
        .filter(|m| announced.get(*m).is_some_and(|p| p.contains(plugin)))
        .cloned()
        .collect()
}

/// How many lease durations a shard Lease stays without a live holder before the sharder
/// deletes it.
pub const GONE_AFTER: u32 = 10;

/// Watches the shard Leases of a ring and says which members are live.
#[derive(Debug, Default)]
pub struct Membership {
    observers: HashMap<String, Observer>,
    /// Per Lease: as last read, and whether it was gone (no live holder) for
    /// [`GONE_AFTER`] durations then.
    gone: HashMap<String, (Option<LeaseSpec>, bool)>,
}

impl Membership {
    /// The live members (holder identities, sorted) among `leases` (name, spec) as read at
    /// `now`; Leases no longer listed are forgotten.
    pub fn live(&mut self, leases: &[(String, Option<LeaseSpec>)], now: Instant) -> Vec<String> {
        self.observers
            .retain(|name, _| leases.iter().any(|(n, _)| n == name));
        self.gone.clear();
        let mut live: Vec<String> = leases
            .iter()
            .filter_map(|(name, spec)| {
                let unchanged = self
                    .observers
                    .entry(name.clone())
                    .or_default()
                    .see(spec.as_ref(), now);
                // Judged as a replica that holds none of them would judge it.
                let decided = decide(spec.as_ref(), "", unchanged);
                let duration = spec
                    .as_ref()
                    .and_then(|s| s.lease_duration_seconds)
                    .unwrap_or(0)
                    .max(1) as u64;
                let long_gone = unchanged >= std::time::Duration::from_secs(duration) * GONE_AFTER;
                let gone = !matches!(decided, Decision::Held { .. }) && long_gone;
                self.gone.insert(name.clone(), (spec.clone(), gone));
                match decided {
                    Decision::Held { holder, .. } => Some(holder),
                    _ => None,
                }
            })
            .collect();
        live.sort();
        live.dedup();
        live
    }
}

impl Membership {
    /// The Leases (names) that were gone for good at the last [`Membership::live`]: no live
    /// holder, and unchanged for [`GONE_AFTER`] lease durations.
    pub fn gone(&self) -> Vec<String> {
        let mut gone: Vec<String> = self
            .gone
            .iter()
            .filter(|(_, (_, g))| *g)
            .map(|(n, _)| n.clone())
            .collect();
        gone.sort();
        gone
    }
}

/// The live members that hold their Lease but announce no plugin yet: replicas starting
/// (their plugins load, their caches list). The sharder waits for them before it assigns,
/// each for at most `settle` from when it first saw it so, so that replicas started together
/// are not all given to the one that announced first, then drained and handed over as the
/// others announce; one that never announces (it runs no plugin) is not waited for after that.
#[derive(Debug, Default)]
pub struct Starting {
    since: HashMap<String, Instant>,
}

impl Starting {
    /// The members of `live` still waited for at `now` (sorted), with `announced` as read
    /// with them.
    pub fn waited_for(
        &mut self,
        live: &[String],
        announced: &Announcements,
        now: Instant,
        settle: std::time::Duration,
    ) -> Vec<String> {
        let silent = |m: &String| announced.get(m).is_none_or(BTreeSet::is_empty);
        self.since.retain(|m, _| live.contains(m) && silent(m));
        let mut waited: Vec<String> = live
            .iter()
            .filter(|m| silent(m))
            .filter(|m| {
                let since = *self.since.entry((*m).clone()).or_insert(now);
                now.saturating_duration_since(since) < settle
            })
            .cloned()
            .collect();
        waited.sort();
        waited
    }
}

/// Deletes the Leases of `ring` that `membership` found gone for good, each only if it is
/// still as read then (a member that renews at that moment keeps its Lease: the delete
/// carries the resourceVersion of a fresh read whose record must equal the one judged).
/// Returns the names deleted.
pub async fn prune(
    client: &kube::Client,
    namespace: &str,
    membership: &Membership,
) -> Result<Vec<String>, kube::Error> {
    let api: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let mut deleted = Vec::new();
    for name in membership.gone() {
        let Some(lease) = api.get_opt(&name).await? else {
            continue;
        };
        let judged = membership.gone.get(&name).map(|(spec, _)| spec);
        if judged != Some(&lease.spec) {
            continue;
        }
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: lease.metadata.resource_version.clone(),
                uid: lease.metadata.uid.clone(),
            }),
            ..DeleteParams::default()
        };
        match api.delete(&name, &dp).await {
            Ok(_) => deleted.push(name),
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn spec(holder: Option<&str>, renewed: i64) -> Option<LeaseSpec> {
        Some(LeaseSpec {
            holder_identity: holder.map(str::to_string),
            lease_duration_seconds: Some(10),
            lease_transitions: Some(renewed as i32),
            ..LeaseSpec::default()
        })
    }

    #[test]
    fn starting_members_are_waited_for_until_they_announce_or_settle_passes() {
        let mut s = Starting::default();
        let t0 = Instant::now();
        let settle = Duration::from_secs(10);
        let live: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let mut announced = Announcements::new();
        announced.insert("a".into(), ["podreplica".to_string()].into());
        // b has an empty announcement (its first write), c none at all.
        announced.insert("b".into(), BTreeSet::new());
        assert_eq!(s.waited_for(&live, &announced, t0, settle), ["b", "c"]);
        // b announces: no longer waited for; c still within its settle.
        announced.insert("b".into(), ["podreplica".to_string()].into());
        let t1 = t0 + Duration::from_secs(9);
        assert_eq!(s.waited_for(&live, &announced, t1, settle), ["c"]);
        // c never announces: not waited for once settle has passed since it was first seen.
        assert!(
            s.waited_for(&live, &announced, t0 + settle, settle)
                .is_empty()
        );
        // A member that stops announcing (a new process of it) is waited for again, afresh.
        announced.insert("a".into(), BTreeSet::new());
        let t2 = t0 + Duration::from_secs(30);
        assert_eq!(s.waited_for(&live, &announced, t2, settle), ["a"]);
        // A member that left is forgotten.
        let two: Vec<String> = ["b", "c"].map(String::from).to_vec();
        assert!(s.waited_for(&two, &announced, t2, settle).is_empty());
        assert_eq!(s.waited_for(&live, &announced, t2 + settle, settle), ["a"]);
    }

    #[test]
    fn members_live_while_renewed_and_leave_when_released_or_silent() {
        let mut m = Membership::default();
        let t0 = Instant::now();
        let leases = |b_renewals: i64, c: Option<&str>| {
            vec![
                ("wasmop-shard-a".to_string(), spec(Some("a"), 0)),
                ("wasmop-shard-b".to_string(), spec(Some("b"), b_renewals)),
                ("wasmop-shard-c".to_string(), spec(c, 0)),
            ]
        };
        assert_eq!(m.live(&leases(0, Some("c")), t0), ["a", "b", "c"]);
        // c released its Lease (no holder): out at once.
        assert_eq!(
            m.live(&leases(0, None), t0 + Duration::from_secs(1)),
            ["a", "b"]
        );
        // b keeps renewing (its record changes), a does not: after the duration, only b.
        assert_eq!(
            m.live(&leases(1, None), t0 + Duration::from_secs(9)),
            ["a", "b"]
        );
        assert_eq!(
            m.live(&leases(2, None), t0 + Duration::from_secs(11)),
            ["b"]
        );
        // A Lease gone from the list is forgotten.
        let only_b = vec![("wasmop-shard-b".to_string(), spec(Some("b"), 3))];
        assert_eq!(m.live(&only_b, t0 + Duration::from_secs(12)), ["b"]);
        assert_eq!(m.observers.len(), 1);
        assert_eq!(lease_name("pod-1"), "wasmop-shard-pod-1");
    }

    #[test]
    fn a_plugin_goes_only_to_the_members_that_announce_it() {
        let a = announcing(["podreplica", "chaospod"]);
        assert_eq!(a[PLUGINS_ANNOTATION], "chaospod,podreplica");
        let mut announced = Announcements::new();
        announced.insert(
            "a".into(),
            ["chaospod", "podreplica"].map(String::from).into(),
        );
        announced.insert("b".into(), ["chaospod"].map(String::from).into());
        let live = vec!["a".to_string(), "b".to_string(), "c".to_string()];
        assert_eq!(running(&live, &announced, "podreplica"), ["a"]);
        assert_eq!(running(&live, &announced, "chaospod"), ["a", "b"]);
        assert!(running(&live, &announced, "other").is_empty());
    }

    #[test]
    fn a_lease_without_a_live_holder_for_ten_durations_is_gone() {
        let mut m = Membership::default();
        let t0 = Instant::now();
        let leases = |c: Option<&str>| {
            vec![
                ("wasmop-shard-a".to_string(), spec(Some("a"), 0)),
                ("wasmop-shard-c".to_string(), spec(c, 0)),
            ]
        };
        m.live(&leases(Some("c")), t0);
        // c stops renewing at once (its record never changes again), a too.
        assert!(m.gone().is_empty());
        let at = |secs| t0 + Duration::from_secs(secs);
        m.live(&leases(Some("c")), at(99));
        assert!(m.gone().is_empty(), "gone before 10 durations (100 s)");
        m.live(&leases(Some("c")), at(100));
        assert_eq!(m.gone(), ["wasmop-shard-a", "wasmop-shard-c"]);
        // c comes back (a renewal changes its record): not gone any more.
        let back = vec![
            ("wasmop-shard-a".to_string(), spec(Some("a"), 0)),
            ("wasmop-shard-c".to_string(), spec(Some("c"), 1)),
        ];
        m.live(&back, at(101));
        assert_eq!(m.gone(), ["wasmop-shard-a"]);
    }
}
