//! Conversions between the generated bindings and the SDK's plain types, used by
//! [`crate::export_plugin!`]. Not part of the public API.
#![cfg_attr(not(target_family = "wasm"), allow(dead_code))]

use crate::Plugin;
use crate::bindings::wasmop::plugin::types as wit;
use crate::types as plain;
use crate::types::Observed;

fn kind(k: plain::KindRef) -> wit::KindRef {
    wit::KindRef {
        group: k.group,
        version: k.version,
        kind: k.kind,
        plural: k.plural,
        namespaced: k.namespaced,
    }
}

fn verb(v: plain::Verb) -> wit::Verb {
    match v {
        plain::Verb::Get => wit::Verb::Get,
        plain::Verb::List => wit::Verb::List,
        plain::Verb::Watch => wit::Verb::Watch,
        plain::Verb::Create => wit::Verb::Create,
        plain::Verb::Update => wit::Verb::Update,
        plain::Verb::Patch => wit::Verb::Patch,
        plain::Verb::Delete => wit::Verb::Delete,
        plain::Verb::Adopt => wit::Verb::Adopt,
    }
}

/// `info()` of plugin `P` in WIT form.
pub fn info<P: Plugin>() -> wit::PluginInfo {
    let i = P::info();
    wit::PluginInfo {
        name: i.name,
        version: i.version,
        primary: kind(i.primary),
        crd: i.crd.map(|c| c.to_string()),
        relations: i
            .relations
            .into_iter()
            .map(|r| wit::Relation {
                name: r.name,
                kind: kind(r.kind),
                selection: match r.selection {
                    plain::Selection::Owned => wit::Selection::Owned,
                    plain::Selection::Namespace => wit::Selection::Namespace,
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
    }
}

fn observed(o: wit::Observed) -> Result<Observed, plain::ReconcileError> {
    let parse = |s: &str| {
        serde_json::from_str(s)
            .map_err(|e| plain::ReconcileError::Other(format!("host sent malformed JSON: {e}")))
    };
    // Related objects stay JSON text: `related_as` reads them straight into typed structs.
    let related_json = o
        .related
        .into_iter()
        .map(|g| (g.relation, g.objects))
        .collect();
    Ok(Observed {
        primary: parse(&o.primary)?,
        related: Default::default(),
        related_json,
        now_unix_ms: o.now_unix_ms,
        seed: o.seed,
    })
}

fn error(e: plain::ReconcileError) -> wit::ReconcileError {
    match e {
        plain::ReconcileError::InvalidSpec(s) => wit::ReconcileError::InvalidSpec(s),
        plain::ReconcileError::Transient(s) => wit::ReconcileError::Transient(s),
        plain::ReconcileError::Other(s) => wit::ReconcileError::Other(s),
    }
}

fn plan(p: plain::Plan) -> wit::Plan {
    wit::Plan {
        actions: p
            .actions
            .into_iter()
            .map(|a| match a {
                plain::Action::Apply(v) => wit::Action::Apply(v.to_string()),
                plain::Action::Delete(r) => wit::Action::Delete(wit::ObjectRef {
                    api_version: r.api_version,
                    kind: r.kind,
                    namespace: r.namespace,
                    name: r.name,
                    uid: r.uid,
                }),
            })
            .collect(),
        status: p.status.map(|s| s.to_string()),
        events: p
            .events
            .into_iter()
            .map(|e| wit::Event {
                event_type: match e.event_type {
                    plain::EventType::Normal => wit::EventType::Normal,
                    plain::EventType::Warning => wit::EventType::Warning,
                },
                reason: e.reason,
                message: e.message,
            })
            .collect(),
        requeue_after_ms: p.requeue_after_ms,
    }
}

/// Runs a decision function on WIT input and converts its answer.
pub fn decide(
    o: wit::Observed,
    f: fn(&Observed) -> Result<plain::Plan, plain::ReconcileError>,
) -> Result<wit::Plan, wit::ReconcileError> {
    let observed = observed(o).map_err(error)?;
    f(&observed).map(plan).map_err(error)
}
