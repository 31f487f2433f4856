//! Who is in the ring: every replica announces itself with a shard Lease of its own
//! (renewed like the leader Lease, with the same fencing), labelled with the ring's name.
//! A member is live while its Lease has a holder and has been seen renewed within its
//! duration by the observer's own clock (the leader election's rule, so clocks that
//! disagree cannot make a live shard look dead); a released Lease (no holder) leaves at once.

use std::collections::HashMap;
use std::time::Instant;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::api::{Api, ListParams};

use crate::ops::lease::{Decision, LeaseConfig, Observer, decide};

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

/// The shard Leases of `ring` in `namespace`: (name, spec) each.
pub async fn list(
    client: &kube::Client,
    namespace: &str,
    ring: &str,
) -> Result<Vec<(String, Option<LeaseSpec>)>, kube::Error> {
    let api: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let leases = api
        .list(&ListParams::default().labels(&format!("{RING_LABEL}={ring}")))
        .await?;
    Ok(leases
        .items
        .into_iter()
        .map(|l| (l.metadata.name.unwrap_or_default(), l.spec))
        .collect())
}

/// Watches the shard Leases of a ring and says which members are live.
#[derive(Debug, Default)]
pub struct Membership {
    observers: HashMap<String, Observer>,
}

impl Membership {
    /// The live members (holder identities, sorted) among `leases` (name, spec) as read at
    /// `now`; Leases no longer listed are forgotten.
    pub fn live(&mut self, leases: &[(String, Option<LeaseSpec>)], now: Instant) -> Vec<String> {
        self.observers
            .retain(|name, _| leases.iter().any(|(n, _)| n == name));
        let mut live: Vec<String> = leases
            .iter()
            .filter_map(|(name, spec)| {
                let unchanged = self
                    .observers
                    .entry(name.clone())
                    .or_default()
                    .see(spec.as_ref(), now);
                // Judged as a replica that holds none of them would judge it.
                match decide(spec.as_ref(), "", unchanged) {
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
}
