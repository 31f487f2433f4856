//! One reconcile, in named phases:
//!
//! ```text
//! lead      a standby (fence closed) decides nothing
//! shard     sharded: a drain acknowledged, or a takeover before deciding (sharded)
//! gate      caches synced, and the primary's own writes seen (expectations)
//! prepare   finalizer: reconcile or cleanup (finalize)
//! observe   the primary and its related objects from the caches (observed)
//! decide    the plugin's call in the sandbox (decide)
//! guard     the plan against what the plugin declared (guard)
//! execute   writes, status and Events; each write expected in the caches (execute, seen)
//! outbound  the plan's requests outside the cluster; new answers kept on the primary and
//!           decided on at once (outbound)
//! requeue   the plan's requeue-after, or error backoff
//! ```

pub mod context;
pub mod decide;
pub mod events;
pub mod execute;
pub mod finalize;
pub mod handover;
pub mod observed;
pub mod outbound;
pub mod own_writes;
pub mod required;
pub(crate) mod series;

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::DynamicObject;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use serde_json::Value;
use tracing::Instrument;

use crate::expect::Pending;
use crate::plan::guard::{PrimaryRef, Step, Violation};
use crate::reconcile::context::Context;
use crate::reconcile::decide::{Decided, decide, not_ready};
use crate::reconcile::events::publish;
use crate::reconcile::finalize::Prepared;
use crate::reconcile::observed::{observe, primary_of};
use crate::rollout::Role;
use crate::runtime::{CallError, Entry, EventType, LoadedPlugin, Plan, ReconcileError};

/// Why a reconcile failed; each is retried with per-object backoff.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// The sandbox stopped the call.
    #[error("plugin fault: {0}")]
    Fault(#[from] CallError),
    /// The plugin answered with a (retryable) error.
    #[error("plugin error: {0}")]
    Plugin(ReconcileError),
    /// The guard refused the plan.
    #[error("{0}")]
    Rejected(#[from] Violation),
    /// The API server refused a write.
    #[error("kubernetes: {0}")]
    Kube(#[from] kube::Error),
    /// The object or the observed state could not be built.
    #[error("{0}")]
    Other(String),
}

impl Failure {
    /// Metric label of the failure.
    pub fn kind(&self) -> &'static str {
        match self {
            Failure::Fault(e) => e.kind(),
            Failure::Plugin(ReconcileError::InvalidSpec(_)) => "invalid_spec",
            Failure::Plugin(ReconcileError::Transient(_)) => "transient",
            Failure::Plugin(ReconcileError::Other(_)) => "other",
            Failure::Rejected(_) => "rejected",
            Failure::Kube(_) => "kubernetes",
            Failure::Other(_) => "other",
        }
    }
}

/// One running reconcile in the `wasmop_queue_depth` gauge, for as long as it lives.
struct InFlight(prometheus_client::metrics::gauge::Gauge);

impl InFlight {
    fn new(gauge: prometheus_client::metrics::gauge::Gauge) -> Self {
        gauge.inc();
        InFlight(gauge)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

fn object_key(obj: &DynamicObject) -> String {
    crate::expect::triggers::key_of(
        obj.metadata.namespace.as_deref(),
        obj.metadata.name.as_deref().unwrap_or(""),
    )
}

/// Reconciles one primary object with the plugin's current version.
pub async fn reconcile(obj: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action, Failure> {
    // A standby decides nothing; on taking the lead it reconciles every object. A reconcile
    // begun while leading is abandoned the moment the leadership ends (its writes would be
    // refused by the fence anyway): none carries an old decision into a later leadership.
    let epoch = ctx.fence.epoch();
    if !ctx.fence.is_open() {
        return Ok(Action::await_change());
    }
    let fence = ctx.fence.clone();
    tokio::select! {
        biased;
        () = fence.closed_since(epoch) => Ok(Action::await_change()),
        result = reconcile_led(obj, ctx) => result,
    }
}

/// A reconcile while leading: metrics around [`reconcile_with`].
async fn reconcile_led(obj: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action, Failure> {
    // The active version, or the candidate for an object in a canary's share.
    let (plugin, role) = ctx
        .slot
        .choose(obj.metadata.uid.as_deref().unwrap_or_default());
    let key = object_key(&obj);
    let span = reconcile_span(&plugin, &role, &key);
    let started = Instant::now();
    let labels =
        crate::telemetry::metrics::PluginLabels::new(&plugin.info.name, &plugin.info.version);
    let in_flight = ctx
        .metrics
        .queue_depth
        .get_or_create(&crate::telemetry::metrics::PluginOnlyLabels {
            plugin: plugin.info.name.clone(),
        })
        .clone();
    // Counted down on drop too: an abandoned reconcile leaves the gauge right.
    let _in_flight = InFlight::new(in_flight);
    let result = reconcile_with((&obj, &key), &ctx, &plugin, &role)
        .instrument(span.clone())
        .await;
    if let Err(e) = &result {
        span.record("otel.status_code", "error");
        // A plugin's error or panic is its own text: cut short on the span.
        span.record(
            "otel.status_description",
            crate::telemetry::traces::status_text(&e.to_string()),
        );
    }
    ctx.metrics.reconciles.get_or_create(&labels).inc();
    ctx.metrics.recent_reconciles.add(&plugin.info.name);
    ctx.metrics
        .reconcile_duration_seconds
        .get_or_create(&labels)
        .observe(started.elapsed().as_secs_f64());
    match &result {
        Ok(_) => ctx.backoff.succeeded(&key),
        Err(e) => {
            ctx.metrics.recent_errors.add(&plugin.info.name);
            ctx.metrics
                .reconcile_errors
                .get_or_create(&crate::telemetry::metrics::ErrorLabels::new(
                    &plugin.info.name,
                    &plugin.info.version,
                    e.kind(),
                ))
                .inc();
        }
    }
    result
}

/// The span of one reconcile: the plugin, its version and digest, the object and its kind,
/// and (a canary's or a shadowed decision) the role; recorded as the reconcile goes on: the
/// decision ([`record_decision`]), the guard's verdict ([`record_verdict`]) and a failure.
/// Every line the reconcile logs is in it, and each write is a child `write` span
/// ([`crate::k8s::requests::write_span`]). Exported as the root of a trace when traces are
/// on ([`crate::telemetry::traces`]).
fn reconcile_span(plugin: &LoadedPlugin, role: &Role, object: &str) -> tracing::Span {
    use tracing::field::Empty;
    let role = match role {
        Role::Active => None,
        Role::Shadowed(_) => Some("shadowed"),
        Role::Canary(_) => Some("canary"),
    };
    tracing::info_span!(
        "reconcile",
        plugin = %plugin.info.name,
        version = %plugin.info.version,
        object,
        kind = %plugin.info.primary.kind,
        digest = %plugin.digest,
        role,
        decision = Empty,
        plan.applies = Empty,
        plan.deletes = Empty,
        plan.events = Empty,
        plan.status = Empty,
        plan.requeue_ms = Empty,
        guard = Empty,
        guard.rule = Empty,
        otel.status_code = Empty,
        otel.status_description = Empty,
    )
}

/// Records a plan on the current (reconcile) span: `decision = "plan"` and what it holds.
fn record_decision(plan: &Plan) {
    let span = tracing::Span::current();
    let applies = plan
        .actions
        .iter()
        .filter(|a| matches!(a, crate::runtime::Action::Apply(_)))
        .count();
    let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    span.record("decision", "plan");
    span.record("plan.applies", count(applies));
    span.record("plan.deletes", count(plan.actions.len() - applies));
    span.record("plan.events", count(plan.events.len()));
    span.record("plan.status", plan.status.is_some());
    if let Some(ms) = plan.requeue_after_ms {
        span.record("plan.requeue_ms", i64::try_from(ms).unwrap_or(i64::MAX));
    }
}

/// Records the guard's verdict on the current (reconcile) span: `accepted`, or `refused`
/// with the rule (the guard's, or `api-server` for a 403).
fn record_verdict(refused_by: Option<&Violation>) {
    let span = tracing::Span::current();
    match refused_by {
        None => span.record("guard", "accepted"),
        Some(v) => span.record("guard", "refused").record("guard.rule", v.rule),
    };
}

/// The gate: nothing is decided before every cache has its first full list, nor on a view
/// that misses this primary's own writes. Returns the action to take instead of deciding.
async fn gate(
    ctx: &Context,
    plugin: &LoadedPlugin,
    obj: &DynamicObject,
    pref: &PrimaryRef,
) -> Option<Action> {
    let mut synced = ctx.synced.clone();
    let _ = synced.wait_for(|s| *s).await;
    // The object handed to this reconcile is the primary's cache as it was when it started.
    ctx.expectations.observe(
        &own_writes::key_of(&plugin.info.primary, obj),
        crate::expect::Seen::Present(obj),
    );
    let oref = kube::runtime::reflector::ObjectRef::from_obj_with(obj, ctx.primary.clone());
    let key = crate::expect::triggers::key_of(
        obj.metadata.namespace.as_deref(),
        obj.metadata.name.as_deref().unwrap_or_default(),
    );
    settled_view(
        (&ctx.expectations, &ctx.triggers),
        || ctx.primary_store.get(&oref),
        obj,
        (key, &pref.uid),
    )
}

/// While writes of the primary `uid`'s own are not seen by the watch: parks it (`key` in
/// `triggers`: the event that settles the last of them triggers it again) and returns the
/// requeue that backs that up. `None` once nothing is awaited (writes that expired unseen
/// are dropped, with a warning). The gate before a decision and a shard's drain both wait
/// so.
pub(crate) fn until_own_writes_seen(
    (expectations, triggers): (
        &crate::expect::Expectations,
        &crate::expect::triggers::Triggers,
    ),
    key: String,
    uid: &str,
) -> Option<Action> {
    match expectations.pending(uid) {
        Pending::Clear => None,
        Pending::Waiting {
            outstanding,
            expires_in,
        } => {
            tracing::debug!(outstanding, "waiting to see this object's own writes");
            (!expectations.park(triggers, key, uid))
                .then(|| Action::requeue(expires_in + Duration::from_millis(10)))
        }
        Pending::Expired { outstanding } => {
            tracing::warn!(
                outstanding,
                "writes of the last plan were never seen by the watch; going on without them"
            );
            None
        }
    }
}

/// Whether `obj`, the primary as its cache held it when the reconcile started, may be
/// decided on: `None` when every write of its own is seen and the cache (`cached`, read
/// after the expectations answered) still holds that very version; otherwise the action
/// to take instead.
///
/// - Waiting for its own writes: parked; the watch event that settles the last of them
///   triggers the object again (also an echo of its own write, which otherwise would not:
///   see `controller::primary_news`); the requeue is the backstop for expectations that
///   expire.
/// - Settled, but the cache moved on since the reconcile started (the echo came between
///   the read and the look, or between the look and the parking): decided again at once,
///   on the cache as it is then. The watch settles an expectation only after the cache
///   holds the event, so a settled write is in the cache this reads: deciding on `obj`
///   would miss it (ChaosPod killed twice, its first run's status unseen).
fn settled_view(
    (expectations, triggers): (
        &crate::expect::Expectations,
        &crate::expect::triggers::Triggers,
    ),
    cached: impl FnOnce() -> Option<Arc<DynamicObject>>,
    obj: &DynamicObject,
    (key, uid): (String, &str),
) -> Option<Action> {
    if let Some(action) = until_own_writes_seen((expectations, triggers), key, uid) {
        return Some(action);
    }
    let now = cached();
    let moved_on = now
        .as_ref()
        .is_none_or(|c| c.metadata.resource_version != obj.metadata.resource_version);
    if moved_on {
        tracing::debug!("the cache moved on since the reconcile started: again at once");
        return Some(match now {
            Some(_) => Action::requeue(Duration::ZERO),
            None => Action::await_change(),
        });
    }
    None
}

async fn reconcile_with(
    (obj, key): (&DynamicObject, &str),
    ctx: &Context,
    plugin: &Arc<LoadedPlugin>,
    role: &Role,
) -> Result<Action, Failure> {
    let info = &plugin.info;
    let (primary, pref) = primary_of(ctx, obj).map_err(Failure::Other)?;
    if let Some(shard) = &ctx.shard
        && let Some(action) =
            crate::reconcile::handover::before_deciding(ctx, shard, info, obj, &pref).await?
    {
        return Ok(action);
    }
    if let Some(action) = gate(ctx, plugin, obj, &pref).await {
        return Ok(action);
    }
    let entry = match finalize::prepare(ctx, info, obj, &pref).await? {
        Prepared::Decide(entry) => entry,
        Prepared::Done(action) => return Ok(action),
    };
    // What the primary names now, read before the changes that asked are answered.
    let at = ObjectRef::from_obj_with(obj, ctx.primary.clone());
    for c in &ctx.related {
        if let Some(named) = &c.named {
            named.want(&at, &primary).await.map_err(Failure::Other)?;
        }
    }
    // The changes that asked for a decision until now are answered by this one.
    let asked = ctx.triggers.take(key);
    ctx.holds.answered(key);
    tracing::debug!(asked_ms = ?asked.map(|a| a.elapsed().as_millis()), "deciding");
    // The parsed plan's share of the guest-memory budget is held until the reconcile ends.
    // A plan that asks for objects it did not observe is decided again with them, on a
    // fresh look at the caches.
    let mut required = std::collections::BTreeMap::new();
    let mut asked_for = Vec::new();
    let held = outbound::held_of(obj);
    let mut rounds = 0;
    let (plan, _held, owned) = loop {
        let (mut observed, owned) = observe(ctx, &primary, &pref).map_err(Failure::Other)?;
        observed.required = required.clone();
        observed.answers = held.clone();
        let (plan, held) =
            match decide(ctx, (plugin, role), (obj, &primary, &pref), entry, observed).await? {
                Decided::Plan(plan, held) => (plan, held),
                Decided::Done(action) => return Ok(action),
            };
        if plan.requires.is_empty() || plan.requires == asked_for {
            break (plan, held, owned);
        }
        rounds += 1;
        if rounds > required::MAX_ROUNDS {
            return Err(Failure::Other(format!(
                "the plan asked for other objects {} times in one reconcile (at most {})",
                rounds,
                required::MAX_ROUNDS
            )));
        }
        if let Some(r) = plan.requires.iter().find(|r| {
            crate::rollout::record::is_secrets(&r.kind)
                && !info
                    .permissions
                    .iter()
                    .any(|p| crate::rollout::record::is_secrets(&p.kind))
        }) {
            return Err(Failure::Other(format!(
                "requirement `{}`: Secrets are read only for a plugin that declares them",
                r.name
            )));
        }
        required = required::read(&ctx.writer, &plan.requires, pref.namespace.as_deref())
            .await
            .map_err(Failure::Other)?;
        tracing::debug!(round = rounds, read = ?required.iter().map(|(k, v)| (k, v.len())).collect::<Vec<_>>(),
            "deciding again with the objects the plan asked for");
        asked_for = plan.requires;
    };
    record_decision(&plan);
    let mut steps = match ctx.checker.steps(info, &pref, &plan, &owned).await {
        Ok(steps) => steps,
        Err(v) => return Err(refused(ctx, plugin, (obj, &primary, &pref), v).await),
    };
    record_verdict(None);
    let owned: Vec<_> = ctx
        .related
        .iter()
        .filter(|c| c.relation.selection == crate::runtime::Selection::Owned)
        .map(|c| c.relation.kind.clone())
        .collect();
    crate::shards::scope::label_steps(&mut steps, ctx.shard.as_deref(), &pref.uid, &owned);
    let verdict = match execute_plan(ctx, plugin, (obj, &pref), &steps, &plan, asked).await {
        Err(Failure::Kube(kube::Error::Api(s))) if s.code == 403 => {
            Err(Violation::new("api-server", s.message))
        }
        Err(Failure::Rejected(v)) => Err(v),
        other => Ok(other),
    };
    let changed_meanwhile = match verdict {
        Ok(done) => done?,
        Err(v) => return Err(refused(ctx, plugin, (obj, &primary, &pref), v).await),
    };
    // A cleanup that ends releases the finalizer on the object as read (its resourceVersion
    // the precondition): its answers go with the object, unwritten.
    let releasing = entry == Entry::Cleanup
        && plan.actions.is_empty()
        && plan.requests.is_empty()
        && plan.requeue_after_ms.is_none();
    let answered = if releasing {
        false
    } else {
        outbound::carry_out(ctx, plugin, (obj, &primary, &pref), &plan, &held).await?
    };
    if changed_meanwhile || answered || came_to_rest(ctx, key, &pref.uid) {
        return Ok(Action::requeue(Duration::ZERO));
    }

    // Released once a cleanup has nothing left to write, nothing to ask outside and no
    // reason to be called again.
    if releasing {
        finalize::release(ctx, info, obj, &pref).await?;
        return Ok(Action::await_change());
    }
    Ok(match plan.requeue_after_ms {
        Some(ms) => Action::requeue(Duration::from_millis(ms.max(100))),
        None if entry == Entry::Cleanup => Action::requeue(Duration::from_secs(1)),
        None => Action::await_change(),
    })
}

/// Whether the primary, held back while its plan was carried out, has nothing in progress
/// any more (what it created came to rest before the plan ended): then the decision the
/// last of them asks for is owed now ([`crate::expect::progress`]).
fn came_to_rest(ctx: &Context, key: &str, uid: &str) -> bool {
    if !ctx.holds.holds(key) {
        return false;
    }
    let busy = ctx
        .related
        .iter()
        .filter(|c| c.relation.selection == crate::runtime::Selection::Owned)
        .any(|c| {
            crate::expect::progress::on_the_way(
                &ctx.expectations,
                (&c.relation.kind.group, &c.relation.kind.kind),
                (&c.owners, &c.store, &c.resource),
                uid,
            )
        });
    if busy {
        return false;
    }
    ctx.holds.owe(key);
    true
}

/// A plan the guard (or, for `api-server`, the API server) refused: metric, Warning
/// Event, `Ready=False`.
async fn refused(
    ctx: &Context,
    plugin: &LoadedPlugin,
    (obj, primary, pref): (&DynamicObject, &Value, &PrimaryRef),
    v: Violation,
) -> Failure {
    let info = &plugin.info;
    record_verdict(Some(&v));
    tracing::warn!(rule = v.rule, detail = %v.detail, "plan rejected");
    ctx.metrics
        .rejected_plans
        .get_or_create(&crate::telemetry::metrics::RejectLabels {
            plugin: info.name.clone(),
            rule: v.rule.to_string(),
        })
        .inc();
    publish(ctx, obj, EventType::Warning, "PlanRejected", v.to_string());
    let _ = not_ready(ctx, plugin, primary, pref, "PlanRejected", &v.to_string()).await;
    Failure::Rejected(v)
}

/// Carries out the checked steps, then the status and the Events. Every write that
/// succeeded is expected in the caches, also when a later one fails. `true`: the primary
/// changed meanwhile, and not by this plan's own write ([`crate::expect::Expectations::raced`]): decide
/// again. `asked`: when a
/// related change first asked for this decision; its first object write ends that wait
/// (`wasmop_event_to_action_seconds`).
async fn execute_plan(
    ctx: &Context,
    plugin: &LoadedPlugin,
    (obj, pref): (&DynamicObject, &PrimaryRef),
    steps: &[Step],
    plan: &Plan,
    asked: Option<Instant>,
) -> Result<bool, Failure> {
    let info = &plugin.info;
    if ctx.checker.checks_adoption()
        && let Err(v) = execute::check_adoption(&ctx.writer, info, pref, steps).await?
    {
        return Err(Failure::Rejected(v));
    }
    if let Some(at) = asked.filter(|_| !steps.is_empty()) {
        ctx.metrics
            .event_to_action_seconds
            .get_or_create(&crate::telemetry::metrics::PluginLabels::new(
                &info.name,
                &info.version,
            ))
            .observe(at.elapsed().as_secs_f64());
    }
    let carrying_out = ctx.expectations.carrying_out(&pref.uid);
    execute::run_steps(&ctx.writer, &info.name, steps, &mut |written| {
        own_writes::record(ctx, &pref.uid, written)
    })
    .await?;
    // The cache shows this primary's last status write (the gate waited for it), so a
    // status equal to the cached one would change nothing: no request is sent for it.
    if let Some(status) = plan.status.as_ref().filter(|s| !same_status(obj, s)) {
        let before = obj.data.get("status").unwrap_or(&Value::Null);
        let stored =
            execute::write_status(&ctx.writer, &info.name, &info.primary, pref, before, status)
                .await
                .inspect_err(|e| {
                    if crate::k8s::fence::is_cut_off(e) {
                        own_writes::record_primary_unanswered(ctx, &pref.uid, &info.primary, obj);
                    }
                })?;
        own_writes::record_primary(ctx, &pref.uid, &info.primary, &stored);
    }
    for ev in &plan.events {
        publish(ctx, obj, ev.event_type, &ev.reason, ev.message.clone());
    }
    Ok(carrying_out.finish())
}

/// Whether the primary as cached already has exactly `status`.
fn same_status(obj: &DynamicObject, status: &Value) -> bool {
    obj.data.get("status") == Some(status)
}

/// Error policy: exponential backoff per object, reset on success.
pub fn error_policy(obj: Arc<DynamicObject>, err: &Failure, ctx: Arc<Context>) -> Action {
    let key = object_key(&obj);
    let wait = ctx.backoff.failed(&key);
    tracing::warn!(object = %key, error = %err, retry_in = ?wait, "reconcile failed");
    Action::requeue(wait)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn primary(status: Option<Value>) -> DynamicObject {
        let mut v = json!({"apiVersion": "app.example.com/v1alpha1", "kind": "PodReplica",
            "metadata": {"name": "p", "namespace": "d"}, "spec": {"size": 3}});
        if let Some(s) = status {
            v["status"] = s;
        }
        serde_json::from_value(v).unwrap()
    }

    fn at(rv: &str) -> DynamicObject {
        let mut o = primary(None);
        o.metadata.resource_version = Some(rv.into());
        o.metadata.uid = Some("u".into());
        o
    }

    fn key() -> crate::expect::ObjectKey {
        crate::expect::ObjectKey {
            group: "app.example.com".into(),
            kind: "PodReplica".into(),
            namespace: Some("d".into()),
            name: "p".into(),
        }
    }

    #[test]
    fn a_primary_is_decided_only_as_the_cache_holds_it_after_its_writes_are_seen() {
        use crate::expect::{Expect, Expectations, Seen, triggers::Triggers};
        let expectations = Expectations::new(Duration::from_secs(60));
        let triggers = Triggers::default();
        let written = |rv: &str| Expect::Written {
            resource_version: rv.into(),
        };
        let view = |cached: Option<DynamicObject>, handed: &DynamicObject| {
            settled_view(
                (&expectations, &triggers),
                || cached.map(Arc::new),
                handed,
                ("d/p".into(), "u"),
            )
        };
        // Nothing awaited, the cache as handed: decide.
        assert_eq!(view(Some(at("6")), &at("6")), None);
        // The plan wrote its status at 7; the reconcile after it was handed 6, and the echo
        // settled the write before the gate looked: the cache holds 7, decide again on it
        // (deciding on 6 misses the status: a ChaosPod runs twice).
        expectations.expect("u", key(), written("7"), || None);
        expectations.observe(&key(), Seen::Present(&at("7")));
        assert_eq!(
            view(Some(at("7")), &at("6")),
            Some(Action::requeue(Duration::ZERO))
        );
        // Still waiting for 8: parked (the echo triggers it), the requeue a backstop.
        expectations.expect("u", key(), written("8"), || None);
        let parked = view(Some(at("7")), &at("7")).expect("parked");
        assert!(parked != Action::requeue(Duration::ZERO) && parked != Action::await_change());
        assert!(
            triggers.take("d/p").is_some(),
            "the echo is asked to trigger it"
        );
        // Gone from the cache meanwhile: nothing to decide.
        expectations.observe(&key(), Seen::Present(&at("8")));
        assert_eq!(view(None, &at("8")), Some(Action::await_change()));
    }

    #[test]
    fn only_an_identical_cached_status_saves_the_write() {
        let status = json!({"replicas": 3, "pods": ["a", "b", "c"]});
        assert!(same_status(&primary(Some(status.clone())), &status));
        assert!(!same_status(&primary(None), &status));
        let older = json!({"replicas": 2, "pods": ["a", "b"]});
        assert!(!same_status(&primary(Some(older)), &status));
        // A field the plugin no longer sets still needs the write (apply removes it).
        let more = json!({"replicas": 3, "pods": ["a", "b", "c"], "extra": 1});
        assert!(!same_status(&primary(Some(more)), &status));
    }
}
