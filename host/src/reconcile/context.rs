//! What every reconcile of one plugin shares: the current plugin version, the caches, the
//! guard, the event recorder, the metrics and the per-object backoff.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::Client;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::reflector::Store;

use crate::expect::Expectations;
use crate::plan::Checker;
use crate::registry::slot::PluginSlot;
use crate::rollout::record::CaseRecorder;
use crate::runtime::{Relation, Sandbox};
use crate::telemetry::metrics::Metrics;

/// Per-object exponential backoff that resets on success.
#[derive(Debug, Default)]
pub struct Backoff {
    failures: Mutex<HashMap<String, u32>>,
}

impl Backoff {
    /// Base delay of the first retry.
    pub const BASE: Duration = Duration::from_millis(500);
    /// Longest delay.
    pub const MAX: Duration = Duration::from_secs(300);

    /// Records a failure of `key`; returns how long to wait before retrying.
    pub fn failed(&self, key: &str) -> Duration {
        let mut f = self.failures.lock().expect("backoff lock");
        let n = f.entry(key.to_string()).or_insert(0);
        *n = n.saturating_add(1);
        let factor = 1u32.checked_shl(*n - 1).unwrap_or(u32::MAX);
        Self::BASE.saturating_mul(factor).min(Self::MAX)
    }

    /// Forgets the failures of `key`.
    pub fn succeeded(&self, key: &str) {
        self.failures.lock().expect("backoff lock").remove(key);
    }
}

/// The cache of one declared relation.
#[derive(Clone)]
pub struct RelatedCache {
    /// The relation.
    pub relation: Relation,
    /// Its API resource.
    pub resource: ApiResource,
    /// Objects of the kind, as watched (shared with every plugin relating to the kind).
    pub store: Store<DynamicObject>,
    /// The relation's label selector, parsed once when the controller starts (an error
    /// names the relation; every decision that reads it reports it).
    pub selector: Result<crate::observe::LabelSelector, String>,
    /// The store indexed by controlling owner (what `owned` relations read).
    pub owners: Arc<crate::cache::owners::OwnerIndex>,
    /// Where the cache's events come in: the plan's own writes are recorded under it.
    pub gate: crate::cache::shared::Gate,
    /// A referenced relation's index of who names what, and its reads.
    pub named: Option<Arc<crate::cache::named::Named>>,
}

/// Shared by the reconciles of one plugin.
pub struct Context {
    /// Kubernetes client of the host: its reads (and the discovery of `--unsafe-disable-guard`, tests only).
    pub client: Client,
    /// The client the plugin acts through (its ServiceAccount, impersonated): every write
    /// its plans cause, its status, its Events, its finalizer.
    pub writer: Client,
    /// The sandbox.
    pub sandbox: Sandbox,
    /// The active plugin version.
    pub slot: Arc<PluginSlot>,
    /// API resource of the primary kind.
    pub primary: ApiResource,
    /// Caches of the related kinds.
    pub related: Vec<RelatedCache>,
    /// What turns a plan into steps: the guard.
    pub checker: Arc<dyn Checker>,
    /// The plugin's Events, sent in the background.
    pub events: crate::reconcile::events::EventSink,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Per-object backoff (an object's entry is dropped when it leaves the cache).
    pub backoff: Arc<Backoff>,
    /// Cache of the primary kind (the controller's own).
    pub primary_store: Store<DynamicObject>,
    /// What each primary waits to see of its own writes.
    pub expectations: Arc<Expectations>,
    /// Where the primary's events come in: its own writes of the primary are recorded
    /// under it ([`crate::cache::shared::Gate`]).
    pub primary_gate: crate::cache::shared::Gate,
    /// Turns true once every cache (primary and relations) has its first full list.
    pub synced: tokio::sync::watch::Receiver<bool>,
    /// Open while this replica leads (or, sharded, holds its shard Lease): a standby keeps
    /// its caches but decides nothing.
    pub fence: Arc<crate::k8s::fence::Fence>,
    /// Where decisions are recorded, for the plugins that are.
    pub cases: Arc<CaseRecorder>,
    /// This replica's shard when sharding is on: its primaries and owned objects are the
    /// ones labelled for it ([`crate::shards::scope`]).
    pub shard: Option<String>,
    /// Sharded: the primaries this shard has taken over ([`crate::reconcile::handover::Sighted`]).
    pub sighted: Arc<crate::reconcile::handover::Sighted>,
    /// When a related change first asked for each primary's next decision (the start of
    /// `wasmop_event_to_action_seconds`).
    pub triggers: Arc<crate::expect::triggers::Triggers>,
    /// Primaries held back while the objects they control progress; a decision that
    /// begins answers the hold.
    pub holds: Arc<crate::expect::progress::Holds>,
    /// Where the plans' requests outside the cluster go out.
    pub outbound: Arc<crate::effects::Outbound>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_caps_and_resets() {
        let b = Backoff::default();
        assert_eq!(b.failed("a"), Duration::from_millis(500));
        assert_eq!(b.failed("a"), Duration::from_secs(1));
        assert_eq!(b.failed("a"), Duration::from_secs(2));
        assert_eq!(b.failed("b"), Duration::from_millis(500));
        for _ in 0..40 {
            b.failed("a");
        }
        assert_eq!(b.failed("a"), Backoff::MAX);
        b.succeeded("a");
        assert_eq!(b.failed("a"), Duration::from_millis(500));
    }
}
