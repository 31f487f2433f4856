//! Plugins built against contract 0.3.0 (`wit/legacy/plugin-0.3.0.wit`), bound beside
//! 0.4.0 and adapted to its types: a component built before 0.4.0 keeps running unchanged,
//! with no webhooks, no references, no requirements and no requests (0.3.0 cannot say
//! them). The adapters copy field by field; the budget checks of [`super::bindings`] run on
//! the adapted values, which are no larger than what the guest handed over.

use wasmtime::Store;

use super::bindings::wit;
use super::store::StoreData;

wasmtime::component::bindgen!({
    world: "plugin",
    path: "../wit/legacy/plugin-0.3.0.wit",
});

use self::wasmop::plugin::host::{Host, Level as OldLevel};
use self::wasmop::plugin::types as old;

pub(crate) use self::Plugin as LegacyBindings;
pub(crate) use self::PluginPre as LegacyBindingsPre;
pub(crate) use self::wasmop::plugin::host::add_to_linker as add_legacy_host_to_linker;

impl Host for StoreData {
    fn log(&mut self, level: OldLevel, message: String) {
        let level = match level {
            OldLevel::Trace => super::bindings::Level::Trace,
            OldLevel::Debug => super::bindings::Level::Debug,
            OldLevel::Info => super::bindings::Level::Info,
            OldLevel::Warn => super::bindings::Level::Warn,
            OldLevel::Error => super::bindings::Level::Error,
        };
        super::bindings::HostImports::log(self, level, message);
    }
}

fn kind(k: old::KindRef) -> wit::KindRef {
    wit::KindRef {
        group: k.group,
        version: k.version,
        kind: k.kind,
        plural: k.plural,
        namespaced: k.namespaced,
    }
}

fn verb(v: old::Verb) -> wit::Verb {
    match v {
        old::Verb::Get => wit::Verb::Get,
        old::Verb::List => wit::Verb::List,
        old::Verb::Watch => wit::Verb::Watch,
        old::Verb::Create => wit::Verb::Create,
        old::Verb::Update => wit::Verb::Update,
        old::Verb::Patch => wit::Verb::Patch,
        old::Verb::Delete => wit::Verb::Delete,
        old::Verb::Adopt => wit::Verb::Adopt,
    }
}

/// A 0.3.0 `info()` as 0.4.0 says it: no webhooks, no outbound hosts.
fn info(i: old::PluginInfo) -> wit::PluginInfo {
    wit::PluginInfo {
        name: i.name,
        version: i.version,
        primary: kind(i.primary),
        crd: i.crd,
        relations: i
            .relations
            .into_iter()
            .map(|r| wit::Relation {
                name: r.name,
                kind: kind(r.kind),
                selection: match r.selection {
                    old::Selection::Owned => wit::Selection::Owned,
                    old::Selection::Namespace => wit::Selection::Namespace,
                },
                label_selector: r.label_selector,
                fields: r.fields,
            })
            .collect(),
        permissions: i
            .permissions
            .into_iter()
            .map(|p| wit::Permission {
                kind: kind(p.kind),
                verbs: p.verbs.into_iter().map(verb).collect(),
            })
            .collect(),
        finalizer: i.finalizer,
        webhooks: wit::Webhooks {
            validate: false,
            default: false,
            convert: false,
        },
        outbound_hosts: Vec::new(),
    }
}

/// A 0.4.0 observed state as 0.3.0 reads it (a 0.3.0 plan never requires nor requests, so
/// what is dropped is always empty).
fn observed(o: &wit::Observed) -> old::Observed {
    old::Observed {
        primary: o.primary.clone(),
        related: o
            .related
            .iter()
            .map(|r| old::RelatedObjects {
                relation: r.relation.clone(),
                objects: r.objects.clone(),
            })
            .collect(),
        now_unix_ms: o.now_unix_ms,
        seed: o.seed,
    }
}

fn plan(p: old::Plan) -> wit::Plan {
    wit::Plan {
        actions: p
            .actions
            .into_iter()
            .map(|a| match a {
                old::Action::Apply(s) => wit::Action::Apply(s),
                old::Action::Delete(r) => wit::Action::Delete(wit::ObjectRef {
                    api_version: r.api_version,
                    kind: r.kind,
                    namespace: r.namespace,
                    name: r.name,
                    uid: r.uid,
                }),
            })
            .collect(),
        status: p.status,
        events: p
            .events
            .into_iter()
            .map(|e| wit::Event {
                event_type: match e.event_type {
                    old::EventType::Normal => wit::EventType::Normal,
                    old::EventType::Warning => wit::EventType::Warning,
                },
                reason: e.reason,
                message: e.message,
            })
            .collect(),
        requeue_after_ms: p.requeue_after_ms,
        requires: Vec::new(),
        requests: Vec::new(),
    }
}

fn error(e: old::ReconcileError) -> wit::ReconcileError {
    match e {
        old::ReconcileError::InvalidSpec(s) => wit::ReconcileError::InvalidSpec(s),
        old::ReconcileError::Transient(s) => wit::ReconcileError::Transient(s),
        old::ReconcileError::Other(s) => wit::ReconcileError::Other(s),
    }
}

/// `info()` of a 0.3.0 instance, in 0.4.0's types.
pub(crate) fn call_info(
    b: &LegacyBindings,
    store: &mut Store<StoreData>,
) -> wasmtime::Result<wit::PluginInfo> {
    b.call_info(store).map(info)
}

/// `reconcile` or `cleanup` of a 0.3.0 instance, in 0.4.0's types.
pub(crate) fn call_decide(
    b: &LegacyBindings,
    store: &mut Store<StoreData>,
    cleanup: bool,
    input: &wit::Observed,
) -> wasmtime::Result<Result<wit::Plan, wit::ReconcileError>> {
    let input = observed(input);
    let answer = if cleanup {
        b.call_cleanup(store, &input)?
    } else {
        b.call_reconcile(store, &input)?
    };
    Ok(answer.map(plan).map_err(error))
}
