//! Prometheus metrics of the host, in one registry with the prefix `wasmop`.
//!
//! [`Metrics`] owns the registry and a handle on every metric. The handles are public
//! fields: a component increments them directly (`metrics.reconciles.get_or_create(&l).inc()`).
//! Every metric is cheap to update from many threads at once; share the whole struct as an
//! `Arc<Metrics>`. [`Metrics::encode`] renders the OpenMetrics text served on `/metrics`.
//!
//! Names as exposed (counters get the `_total` suffix from the OpenMetrics rules):
//! `wasmop_reconciles_total`, `wasmop_reconcile_errors_total`,
//! `wasmop_reconcile_duration_seconds`, `wasmop_event_to_action_seconds`,
//! `wasmop_sandbox_call_duration_seconds`,
//! `wasmop_sandbox_timeouts_total`, `wasmop_sandbox_traps_total`,
//! `wasmop_rejected_plans_total`, `wasmop_queue_depth`, `wasmop_plugin_loads_total`,
//! `wasmop_leader`, `wasmop_api_requests_total`, `wasmop_cached_objects`,
//! `wasmop_cache_subscribers`, `wasmop_rollout_decisions_total`, `wasmop_shard_member`,
//! `wasmop_shard_objects`, `wasmop_shard_ring_members`, `wasmop_shard_moves_total`,
//! `wasmop_source_refusals_total`, `wasmop_progress_holds_expired_total`,
//! `wasmop_webhook_requests_total`, `wasmop_webhook_duration_seconds`,
//! `wasmop_outbound_requests_total`, `wasmop_outbound_refused_total`,
//! `wasmop_outbound_duration_seconds`, `wasmop_outbound_answer_wait_seconds`.

use std::fmt;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use crate::telemetry::recent::LastMinute;

/// Labels of a webhook request: the plugin, the webhook (`validate`, `default`,
/// `convert`) and what came of it (`allowed`, `denied`, `failed`: the plugin trapped, timed
/// out or answered something malformed, and the operation was refused).
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct WebhookLabels {
    /// Plugin name.
    pub plugin: String,
    /// `validate`, `default` or `convert`.
    pub webhook: String,
    /// `allowed`, `denied` or `failed`.
    pub result: String,
}

/// Labels of a request outside the cluster: the plugin and what came of it (`response`,
/// `failed`, `refused`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct OutboundLabels {
    /// Plugin name.
    pub plugin: String,
    /// `response`, `failed` or `refused`.
    pub result: String,
}

/// Labels of a per-plugin-version metric.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct PluginLabels {
    /// Plugin name, as declared by its `info()`.
    pub plugin: String,
    /// Plugin version, as declared by its `info()`.
    pub version: String,
}

impl PluginLabels {
    /// Labels for one plugin version.
    pub fn new(plugin: impl Into<String>, version: impl Into<String>) -> Self {
        PluginLabels {
            plugin: plugin.into(),
            version: version.into(),
        }
    }
}

/// Labels of a failed reconcile: the plugin version and what kind of failure.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ErrorLabels {
    /// Plugin name.
    pub plugin: String,
    /// Plugin version.
    pub version: String,
    /// Failure kind, a short snake_case word: `invalid_spec`, `transient`, `other` (errors
    /// the guest returned), `timeout`, `trap`,
    /// `out_of_memory`, `host_memory`, `invalid_output`, `unavailable` (sandbox failures, as
    /// [`crate::runtime::CallError::kind`] names them),
    /// `rejected` (the guard refused the plan), `kubernetes` (executing the plan failed).
    pub kind: &'static str,
}

impl ErrorLabels {
    /// Labels for one failure kind of one plugin version.
    pub fn new(plugin: impl Into<String>, version: impl Into<String>, kind: &'static str) -> Self {
        ErrorLabels {
            plugin: plugin.into(),
            version: version.into(),
            kind,
        }
    }
}

/// Labels of a plan the guard refused: the plugin and the rule that refused it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct RejectLabels {
    /// Plugin name.
    pub plugin: String,
    /// Short name of the guard rule, e.g. `undeclared`, `namespace` or `max-actions`.
    pub rule: String,
}

impl RejectLabels {
    /// Labels for one guard rule of one plugin.
    pub fn new(plugin: impl Into<String>, rule: impl Into<String>) -> Self {
        RejectLabels {
            plugin: plugin.into(),
            rule: rule.into(),
        }
    }
}

/// Labels of a per-plugin metric that does not depend on the version.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct PluginOnlyLabels {
    /// Plugin name.
    pub plugin: String,
}

impl PluginOnlyLabels {
    /// Labels for one plugin.
    pub fn new(plugin: impl Into<String>) -> Self {
        PluginOnlyLabels {
            plugin: plugin.into(),
        }
    }
}

/// Outcome of loading a plugin version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LoadResult {
    /// The version passed validation and was swapped in.
    Accepted,
    /// The version was refused; the previous one (if any) keeps running.
    Rejected,
}

impl LoadResult {
    /// The label value: `accepted` or `rejected`.
    pub fn as_str(self) -> &'static str {
        match self {
            LoadResult::Accepted => "accepted",
            LoadResult::Rejected => "rejected",
        }
    }
}

impl EncodeLabelValue for LoadResult {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), fmt::Error> {
        fmt::Write::write_str(encoder, self.as_str())
    }
}

/// Labels of a plugin load attempt.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct LoadLabels {
    /// Plugin name (the `WasmPlugin` object's name, or the file stem for a directory source).
    pub plugin: String,
    /// Whether the version was accepted.
    pub result: LoadResult,
}

/// Upper bounds of the duration histograms, in seconds: 50 µs doubling 19 times, up to
/// 13.1 s, so that the last finite bucket covers the 10 s slowest expected call.
pub fn duration_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(50e-6, 2.0, 19)
}

fn duration_histogram() -> Histogram {
    Histogram::new(duration_buckets())
}

/// Upper bounds of `wasmop_event_to_action_seconds`, in seconds: fine around the tens of
/// milliseconds a reaction should take (50 ms is the target), coarse up to 30 s.
pub const ACTION_BUCKETS: [f64; 18] = [
    0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
    10.0, 30.0,
];

fn action_histogram() -> Histogram {
    Histogram::new(ACTION_BUCKETS)
}

/// All metrics of the host and the registry they are exposed from.
///
/// Metric handles share their state with the registry: updating a field is what
/// [`Metrics::encode`] reports. Label sets are created on first use and removed only with
/// the shared cache they describe; a family with no label set yet is left out of the
/// output.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Reconciles completed (successfully or not), per plugin version.
    pub reconciles: Family<PluginLabels, Counter>,
    /// Reconciles that ended in an error, per plugin version and failure kind.
    pub reconcile_errors: Family<ErrorLabels, Counter>,
    /// Wall time of a whole reconcile: observe, sandbox call, guard and execution.
    pub reconcile_duration_seconds: Family<PluginLabels, Histogram>,
    /// From a related object's change reaching the host's cache to the first object write
    /// (create, apply or delete) of the decision it caused: queue, gate, decision, guard.
    pub event_to_action_seconds: Family<PluginLabels, Histogram>,
    /// Wall time of one call into the sandbox (instantiation plus the export).
    pub sandbox_call_duration_seconds: Family<PluginLabels, Histogram>,
    /// Sandbox calls interrupted at their deadline.
    pub sandbox_timeouts: Family<PluginLabels, Counter>,
    /// Sandbox calls that trapped (including out-of-memory).
    pub sandbox_traps: Family<PluginLabels, Counter>,
    /// Plans the guard refused, per plugin and rule.
    pub rejected_plans: Family<RejectLabels, Counter>,
    /// Reconciles waiting or in flight, per plugin.
    pub queue_depth: Family<PluginOnlyLabels, Gauge>,
    /// Primaries decided because their wait for the objects they control ran out
    /// (`--progress-hold-ms`) rather than because the last of them came to rest, per plugin.
    pub progress_holds_expired: Family<PluginOnlyLabels, Counter>,
    /// Plugin versions loaded, per plugin and outcome.
    pub plugin_loads: Family<LoadLabels, Counter>,
    /// Webhook requests answered, per plugin, webhook and result.
    pub webhook_requests: Family<WebhookLabels, Counter>,
    /// Wall time of one webhook request (the sandbox call and the answer), per plugin and
    /// webhook (`result` empty).
    pub webhook_duration_seconds: Family<WebhookLabels, Histogram>,
    /// Requests outside the cluster, per plugin and result.
    pub outbound_requests: Family<OutboundLabels, Counter>,
    /// Requests outside the cluster the host refused to send, per plugin and rule.
    pub outbound_refused: Family<RejectLabels, Counter>,
    /// Wall time of one request outside the cluster (retries and redirects included),
    /// per plugin.
    pub outbound_duration_seconds: Family<PluginOnlyLabels, Histogram>,
    /// From an answer's arrival to the decision that let it go (the plan no longer carried
    /// its key: the plugin used it), per plugin.
    pub outbound_answer_wait_seconds: Family<PluginOnlyLabels, Histogram>,
    /// 1 while this replica holds the leader lease, 0 otherwise.
    pub leader: Gauge,
    /// Requests the controllers sent to the API server, by verb (`watch` for watches).
    pub api_requests: Family<VerbLabels, Counter>,
    /// Objects held by each shared cache of a related kind.
    pub cached_objects: Family<CacheLabels, Gauge>,
    /// Plugins reading each shared cache of a related kind.
    pub cache_subscribers: Family<CacheLabels, Gauge>,
    /// Decisions of candidate versions, by how they went.
    pub rollout_decisions: Family<RolloutLabels, Counter>,
    /// 1 while this replica holds its shard Lease (sharding on), 0 otherwise.
    pub shard_member: Gauge,
    /// Primary objects this replica's shard holds, per plugin.
    pub shard_objects: Family<PluginOnlyLabels, Gauge>,
    /// Live members of the ring as the sharder (the leader) last saw them.
    pub shard_ring_members: Gauge,
    /// Handover steps, per plugin: `assigned`, `drain` (asked by the sharder), `released`
    /// (a drain acknowledged by this shard), `taken` (owned objects taken over).
    pub shard_moves: Family<MoveLabels, Counter>,
    /// WasmPlugin versions refused (each new refusal once), by source and reason.
    pub source_refusals: Family<RefusalLabels, Counter>,
    /// Reconciles completed in the last minute, per plugin (what `wasmop status` shows;
    /// dashboards use `rate()` of the counters). Refreshed from [`Metrics::recent_reconciles`]
    /// on every scrape.
    pub reconciles_last_minute: Family<PluginOnlyLabels, Gauge>,
    /// Reconciles that ended in an error in the last minute, per plugin.
    pub reconcile_errors_last_minute: Family<PluginOnlyLabels, Gauge>,
    /// Reconciles per plugin over the last minute: add one where a reconcile is counted.
    pub recent_reconciles: LastMinute,
    /// Failed reconciles per plugin over the last minute.
    pub recent_errors: LastMinute,
}

/// Labels of [`Metrics::source_refusals`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct RefusalLabels {
    /// `NAMESPACE/NAME` of the WasmPlugin.
    pub wasmplugin: String,
    /// `configMap` or `oci`.
    pub source: &'static str,
    /// The condition's reason (`ArtifactNotFound`, `Unsigned`, `WorldMismatch`, ...).
    pub reason: String,
}

/// Labels of [`Metrics::shard_moves`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct MoveLabels {
    /// Plugin name.
    pub plugin: String,
    /// `assigned`, `drain`, `released` or `taken`.
    pub step: &'static str,
}

/// Labels of a candidate version's decision.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct RolloutLabels {
    /// Plugin name.
    pub plugin: String,
    /// The candidate's version.
    pub candidate: String,
    /// `agree` or `diverge` (shadow: the same outcome as the active version's or not),
    /// `fault` (the sandbox stopped the candidate), `canary` (a canary decision that was
    /// carried out), `skipped` (a shadow decision dropped: too many were running).
    pub result: &'static str,
}

/// Labels of a shared cache: its resource and label selector.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct CacheLabels {
    /// `plural.group` (`pods.` for the core group's pods).
    pub resource: String,
    /// The label selector the cache watches with; empty for the whole kind.
    pub selector: String,
}

/// Label of [`Metrics::api_requests`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct VerbLabels {
    /// `get` (one object or a list), `watch`, `post`, `put`, `patch` or `delete`.
    pub verb: String,
}

impl Metrics {
    /// A fresh registry with every metric registered and no samples yet.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("wasmop");
        let reconciles = Family::<PluginLabels, Counter>::default();
        let reconcile_errors = Family::<ErrorLabels, Counter>::default();
        let reconcile_duration_seconds =
            Family::<PluginLabels, Histogram>::new_with_constructor(duration_histogram as _);
        let sandbox_call_duration_seconds =
            Family::<PluginLabels, Histogram>::new_with_constructor(duration_histogram as _);
        let event_to_action_seconds =
            Family::<PluginLabels, Histogram>::new_with_constructor(action_histogram as _);
        let sandbox_timeouts = Family::<PluginLabels, Counter>::default();
        let sandbox_traps = Family::<PluginLabels, Counter>::default();
        let rejected_plans = Family::<RejectLabels, Counter>::default();
        let queue_depth = Family::<PluginOnlyLabels, Gauge>::default();
        let progress_holds_expired = Family::<PluginOnlyLabels, Counter>::default();
        let plugin_loads = Family::<LoadLabels, Counter>::default();
        let webhook_requests = Family::<WebhookLabels, Counter>::default();
        let webhook_duration_seconds =
            Family::<WebhookLabels, Histogram>::new_with_constructor(duration_histogram as _);
        let outbound_requests = Family::<OutboundLabels, Counter>::default();
        let outbound_refused = Family::<RejectLabels, Counter>::default();
        let outbound_duration_seconds =
            Family::<PluginOnlyLabels, Histogram>::new_with_constructor(duration_histogram as _);
        let outbound_answer_wait_seconds =
            Family::<PluginOnlyLabels, Histogram>::new_with_constructor(duration_histogram as _);
        let leader = Gauge::default();
        let api_requests = Family::<VerbLabels, Counter>::default();

        registry.register(
            "reconciles",
            "Reconciles completed, successfully or not",
            reconciles.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Reconciles that ended in an error, by kind",
            reconcile_errors.clone(),
        );
        registry.register_with_unit(
            "reconcile_duration",
            "Wall time of a whole reconcile",
            Unit::Seconds,
            reconcile_duration_seconds.clone(),
        );
        registry.register_with_unit(
            "event_to_action",
            "From a related object's change reaching the host to the first object write of the decision it caused",
            Unit::Seconds,
            event_to_action_seconds.clone(),
        );
        registry.register_with_unit(
            "sandbox_call_duration",
            "Wall time of one call into the plugin sandbox",
            Unit::Seconds,
            sandbox_call_duration_seconds.clone(),
        );
        registry.register(
            "webhook_requests",
            "Webhook requests answered, by plugin, webhook and result",
            webhook_requests.clone(),
        );
        registry.register_with_unit(
            "webhook_duration",
            "Wall time of one webhook request",
            Unit::Seconds,
            webhook_duration_seconds.clone(),
        );
        registry.register(
            "outbound_requests",
            "Requests outside the cluster, by plugin and result",
            outbound_requests.clone(),
        );
        registry.register(
            "outbound_refused",
            "Requests outside the cluster refused before connecting, by plugin and rule",
            outbound_refused.clone(),
        );
        registry.register_with_unit(
            "outbound_duration",
            "Wall time of one request outside the cluster, retries and redirects included",
            Unit::Seconds,
            outbound_duration_seconds.clone(),
        );
        registry.register_with_unit(
            "outbound_answer_wait",
            "From an answer's arrival to the decision that let it go",
            Unit::Seconds,
            outbound_answer_wait_seconds.clone(),
        );
        registry.register(
            "sandbox_timeouts",
            "Sandbox calls interrupted at their deadline",
            sandbox_timeouts.clone(),
        );
        registry.register(
            "sandbox_traps",
            "Sandbox calls that trapped",
            sandbox_traps.clone(),
        );
        registry.register(
            "rejected_plans",
            "Plans refused by the guard, by rule",
            rejected_plans.clone(),
        );
        registry.register(
            "queue_depth",
            "Reconciles waiting or in flight",
            queue_depth.clone(),
        );
        registry.register(
            "progress_holds_expired",
            "Primaries decided because their wait for the objects they control ran out",
            progress_holds_expired.clone(),
        );
        registry.register(
            "plugin_loads",
            "Plugin versions loaded, by result",
            plugin_loads.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the leader lease",
            leader.clone(),
        );
        registry.register(
            "api_requests",
            "Requests the controllers sent to the API server, by verb",
            api_requests.clone(),
        );
        let cached_objects = Family::<CacheLabels, Gauge>::default();
        let cache_subscribers = Family::<CacheLabels, Gauge>::default();
        registry.register(
            "cached_objects",
            "Objects held by each shared cache of a related kind",
            cached_objects.clone(),
        );
        registry.register(
            "cache_subscribers",
            "Plugins reading each shared cache of a related kind",
            cache_subscribers.clone(),
        );

        let rollout_decisions = Family::<RolloutLabels, Counter>::default();
        registry.register(
            "rollout_decisions",
            "Decisions of candidate versions (shadow or canary), by result",
            rollout_decisions.clone(),
        );

        let shard_member = Gauge::default();
        let shard_objects = Family::<PluginOnlyLabels, Gauge>::default();
        let shard_ring_members = Gauge::default();
        let shard_moves = Family::<MoveLabels, Counter>::default();
        registry.register(
            "shard_member",
            "1 while this replica holds its shard Lease",
            shard_member.clone(),
        );
        registry.register(
            "shard_objects",
            "Primary objects held by this replica's shard, per plugin",
            shard_objects.clone(),
        );
        registry.register(
            "shard_ring_members",
            "Live members of the ring as the sharder last saw them",
            shard_ring_members.clone(),
        );
        registry.register(
            "shard_moves",
            "Handover steps of objects between shards, per plugin",
            shard_moves.clone(),
        );
        let source_refusals = Family::<RefusalLabels, Counter>::default();
        let reconciles_last_minute = Family::<PluginOnlyLabels, Gauge>::default();
        registry.register(
            "reconciles_last_minute",
            "Reconciles completed in the last minute, per plugin",
            reconciles_last_minute.clone(),
        );
        let reconcile_errors_last_minute = Family::<PluginOnlyLabels, Gauge>::default();
        registry.register(
            "reconcile_errors_last_minute",
            "Reconciles that ended in an error in the last minute, per plugin",
            reconcile_errors_last_minute.clone(),
        );
        registry.register(
            "source_refusals",
            "WasmPlugin versions refused, by source and reason",
            source_refusals.clone(),
        );

        Metrics {
            registry,
            shard_member,
            shard_objects,
            shard_ring_members,
            shard_moves,
            source_refusals,
            reconciles_last_minute,
            reconcile_errors_last_minute,
            recent_reconciles: LastMinute::new(),
            recent_errors: LastMinute::new(),
            rollout_decisions,
            reconciles,
            reconcile_errors,
            reconcile_duration_seconds,
            event_to_action_seconds,
            sandbox_call_duration_seconds,
            sandbox_timeouts,
            sandbox_traps,
            rejected_plans,
            queue_depth,
            progress_holds_expired,
            plugin_loads,
            webhook_requests,
            webhook_duration_seconds,
            outbound_requests,
            outbound_refused,
            outbound_duration_seconds,
            outbound_answer_wait_seconds,
            leader,
            api_requests,
            cached_objects,
            cache_subscribers,
        }
    }

    /// The registry in the OpenMetrics text format (ending with `# EOF`), as served with
    /// the content type `application/openmetrics-text; version=1.0.0; charset=utf-8`.
    pub fn encode(&self) -> String {
        for (window, gauges) in [
            (&self.recent_reconciles, &self.reconciles_last_minute),
            (&self.recent_errors, &self.reconcile_errors_last_minute),
        ] {
            for (plugin, count) in window.snapshot() {
                gauges
                    .get_or_create(&PluginOnlyLabels { plugin })
                    .set(i64::try_from(count).unwrap_or(i64::MAX));
            }
        }
        let mut out = String::new();
        // Writing to a String cannot fail, and none of the registered metric types fails
        // to encode; a partial output would still be better than a panic.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_counters_gauges_and_histograms() {
        let m = Metrics::new();
        let pr = PluginLabels::new("podreplica", "0.1.0");
        m.reconciles.get_or_create(&pr).inc_by(3);
        m.reconcile_errors
            .get_or_create(&ErrorLabels::new("podreplica", "0.1.0", "timeout"))
            .inc();
        m.sandbox_timeouts.get_or_create(&pr).inc();
        m.rejected_plans
            .get_or_create(&RejectLabels {
                plugin: "chaospod".into(),
                rule: "foreign_namespace".into(),
            })
            .inc();
        m.queue_depth
            .get_or_create(&PluginOnlyLabels {
                plugin: "podreplica".into(),
            })
            .set(4);
        m.plugin_loads
            .get_or_create(&LoadLabels {
                plugin: "chaospod".into(),
                result: LoadResult::Rejected,
            })
            .inc();
        m.leader.set(1);
        m.sandbox_call_duration_seconds
            .get_or_create(&pr)
            .observe(0.00007);
        m.event_to_action_seconds.get_or_create(&pr).observe(0.012);

        let text = m.encode();
        for line in [
            "# TYPE wasmop_reconciles counter",
            r#"wasmop_reconciles_total{plugin="podreplica",version="0.1.0"} 3"#,
            r#"wasmop_reconcile_errors_total{plugin="podreplica",version="0.1.0",kind="timeout"} 1"#,
            r#"wasmop_sandbox_timeouts_total{plugin="podreplica",version="0.1.0"} 1"#,
            r#"wasmop_rejected_plans_total{plugin="chaospod",rule="foreign_namespace"} 1"#,
            r#"wasmop_queue_depth{plugin="podreplica"} 4"#,
            r#"wasmop_plugin_loads_total{plugin="chaospod",result="rejected"} 1"#,
            "wasmop_leader 1",
            "# UNIT wasmop_sandbox_call_duration_seconds seconds",
            r#"wasmop_sandbox_call_duration_seconds_bucket{le="0.00005",plugin="podreplica",version="0.1.0"} 0"#,
            r#"wasmop_sandbox_call_duration_seconds_bucket{le="0.0001",plugin="podreplica",version="0.1.0"} 1"#,
            r#"wasmop_sandbox_call_duration_seconds_count{plugin="podreplica",version="0.1.0"} 1"#,
            r#"wasmop_event_to_action_seconds_bucket{le="0.01",plugin="podreplica",version="0.1.0"} 0"#,
            r#"wasmop_event_to_action_seconds_bucket{le="0.015",plugin="podreplica",version="0.1.0"} 1"#,
            "# EOF",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing line {line:?} in:\n{text}"
            );
        }
    }

    #[test]
    fn unused_families_are_left_out() {
        // prometheus-client omits a family until its first label set is created.
        let text = Metrics::new().encode();
        assert!(!text.contains("wasmop_reconciles"));
        assert!(!text.contains("wasmop_reconcile_duration_seconds"));
        assert!(text.contains("# TYPE wasmop_leader gauge\nwasmop_leader 0\n"));
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn buckets_span_50us_to_past_10s() {
        let b: Vec<f64> = duration_buckets().collect();
        assert_eq!(b.first(), Some(&50e-6));
        assert!(b[b.len() - 2] < 10.0 && *b.last().unwrap() >= 10.0);
        assert!(b.windows(2).all(|w| (w[1] / w[0] - 2.0).abs() < 1e-9));
    }
}
