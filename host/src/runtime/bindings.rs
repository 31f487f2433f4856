//! The only file that holds `bindgen!` for the plugin world, and the conversions between
//! the generated types and the plain types of [`super::types`].

use serde_json::Value;
use wasmtime::component::{ComponentType, Lift, WasmList, WasmStr};
use wasmtime::{AsContextMut, StoreContextMut};

use super::budget::{InfoShape, PlanShape};
use super::types as plain;

wasmtime::component::bindgen!({
    world: "plugin",
    path: "../wit",
});

pub use self::Plugin as PluginBindings;
pub use self::PluginPre as PluginBindingsPre;
pub use self::wasmop::plugin::host::{
    Host as HostImports, Level, add_to_linker as add_host_to_linker,
};
use self::wasmop::plugin::types as wit;
/// The generated `observed` record, as a call's argument.
pub(crate) use self::wasmop::plugin::types::Observed as WitObserved;

impl From<wit::KindRef> for plain::KindRef {
    fn from(k: wit::KindRef) -> Self {
        plain::KindRef {
            group: k.group,
            version: k.version,
            kind: k.kind,
            plural: k.plural,
            namespaced: k.namespaced,
        }
    }
}

fn verb(v: wit::Verb) -> plain::Verb {
    match v {
        wit::Verb::Get => plain::Verb::Get,
        wit::Verb::List => plain::Verb::List,
        wit::Verb::Watch => plain::Verb::Watch,
        wit::Verb::Create => plain::Verb::Create,
        wit::Verb::Update => plain::Verb::Update,
        wit::Verb::Patch => plain::Verb::Patch,
        wit::Verb::Delete => plain::Verb::Delete,
        wit::Verb::Adopt => plain::Verb::Adopt,
    }
}

/// Converts the declared info; the CRD string must be JSON.
pub fn info_from_wit(i: wit::PluginInfo) -> Result<plain::PluginInfo, String> {
    let crd = match i.crd {
        Some(s) => {
            Some(serde_json::from_str::<Value>(&s).map_err(|e| format!("crd is not JSON: {e}"))?)
        }
        None => None,
    };
    Ok(plain::PluginInfo {
        name: i.name,
        version: i.version,
        primary: i.primary.into(),
        crd,
        relations: i
            .relations
            .into_iter()
            .map(|r| plain::Relation {
                name: r.name,
                kind: r.kind.into(),
                selection: match r.selection {
                    wit::Selection::Owned => plain::Selection::Owned,
                    wit::Selection::Namespace => plain::Selection::Namespace,
                },
                label_selector: r.label_selector,
                fields: r.fields,
            })
            .collect(),
        permissions: i
            .permissions
            .into_iter()
            .map(|p| plain::Permission {
                kind: p.kind.into(),
                verbs: p.verbs.into_iter().map(verb).collect(),
            })
            .collect(),
        finalizer: i.finalizer,
    })
}

/// Serialises the observed state into the WIT record.
pub fn observed_to_wit(o: &plain::Observed) -> wit::Observed {
    wit::Observed {
        primary: o.primary.to_string(),
        related: o
            .related
            .iter()
            .map(|(name, objs)| wit::RelatedObjects {
                relation: name.clone(),
                objects: objs.iter().map(Value::to_string).collect(),
            })
            .chain(
                o.related_json
                    .iter()
                    .map(|(name, texts)| wit::RelatedObjects {
                        relation: name.clone(),
                        objects: texts.clone(),
                    }),
            )
            .collect(),
        now_unix_ms: o.now_unix_ms,
        seed: o.seed,
    }
}

/// The answer of `reconcile` or `cleanup` as the guest left it in its memory: lists and
/// strings are handles into the guest's linear memory, nothing is copied into the host
/// until [`read_answer`] has measured it against the output budget.
pub(crate) type RawAnswer = Result<RawPlan, RawError>;

/// `plan`, lifted lazily.
#[derive(ComponentType, Lift)]
#[component(record)]
pub(crate) struct RawPlan {
    actions: WasmList<RawAction>,
    status: Option<WasmStr>,
    events: WasmList<RawEvent>,
    #[component(name = "requeue-after-ms")]
    requeue_after_ms: Option<u64>,
}

/// `action`, lifted lazily.
#[derive(ComponentType, Lift)]
#[component(variant)]
pub(crate) enum RawAction {
    #[component(name = "apply")]
    Apply(WasmStr),
    #[component(name = "delete")]
    Delete(RawObjectRef),
}

/// `object-ref`, lifted lazily.
#[derive(ComponentType, Lift)]
#[component(record)]
pub(crate) struct RawObjectRef {
    #[component(name = "api-version")]
    api_version: WasmStr,
    kind: WasmStr,
    namespace: Option<WasmStr>,
    name: WasmStr,
    uid: Option<WasmStr>,
}

/// `event`, lifted lazily.
#[derive(ComponentType, Lift)]
#[component(record)]
pub(crate) struct RawEvent {
    #[component(name = "event-type")]
    event_type: wit::EventType,
    reason: WasmStr,
    message: WasmStr,
}

/// `reconcile-error`, lifted lazily.
#[derive(ComponentType, Lift)]
#[component(variant)]
pub(crate) enum RawError {
    #[component(name = "invalid-spec")]
    InvalidSpec(WasmStr),
    #[component(name = "transient")]
    Transient(WasmStr),
    #[component(name = "other")]
    Other(WasmStr),
}

/// What [`read_answer`] found: an answer within the budget, copied into host types, or the
/// budget's refusal.
pub(crate) type ReadAnswer = Result<Result<wit::Plan, wit::ReconcileError>, String>;

/// Measures an answer where it lies, in the guest's memory, against the output budget
/// (`check_plan` for a plan, `check_error` for an error message), and copies it into host
/// types only when it fits: the counts of actions and Events are read before any element,
/// the bytes of every string before any string. A refused answer costs the host a vector of
/// handles at most as long as the limits allow, never a copy of what the guest wrote.
pub(crate) fn read_answer<T: 'static>(
    mut store: StoreContextMut<'_, T>,
    raw: RawAnswer,
    check_plan: impl Fn(PlanShape) -> Result<(), String>,
    check_error: impl FnOnce(usize) -> Result<(), String>,
) -> wasmtime::Result<ReadAnswer> {
    let plan = match raw {
        Ok(plan) => plan,
        Err(e) => {
            let (text, wrap): (&WasmStr, fn(String) -> wit::ReconcileError) = match &e {
                RawError::InvalidSpec(s) => (s, wit::ReconcileError::InvalidSpec),
                RawError::Transient(s) => (s, wit::ReconcileError::Transient),
                RawError::Other(s) => (s, wit::ReconcileError::Other),
            };
            let text = text.to_str(&store)?;
            if let Err(refused) = check_error(text.len()) {
                return Ok(Err(refused));
            }
            return Ok(Ok(Err(wrap(text.into_owned()))));
        }
    };
    // The counts first: a million Events is refused without reading one of them.
    let counts = PlanShape {
        actions: plan.actions.len(),
        events: plan.events.len(),
        bytes: 0,
    };
    if let Err(refused) = check_plan(counts) {
        return Ok(Err(refused));
    }
    let actions = plan
        .actions
        .iter(store.as_context_mut())?
        .collect::<wasmtime::Result<Vec<_>>>()?;
    let events = plan
        .events
        .iter(store.as_context_mut())?
        .collect::<wasmtime::Result<Vec<_>>>()?;
    // Then the bytes, read in place.
    let len = |s: &WasmStr| s.to_str(&store).map(|t| t.len());
    let opt_len = |s: &Option<WasmStr>| s.as_ref().map_or(Ok(0), len);
    let mut bytes = opt_len(&plan.status)?;
    for a in &actions {
        bytes += match a {
            RawAction::Apply(s) => len(s)?,
            RawAction::Delete(r) => {
                len(&r.api_version)?
                    + len(&r.kind)?
                    + opt_len(&r.namespace)?
                    + len(&r.name)?
                    + opt_len(&r.uid)?
            }
        };
    }
    for e in &events {
        bytes += len(&e.reason)? + len(&e.message)?;
    }
    if let Err(refused) = check_plan(PlanShape { bytes, ..counts }) {
        return Ok(Err(refused));
    }
    // Within the budget: now, and only now, copied.
    let own = |s: &WasmStr| s.to_str(&store).map(|t| t.into_owned());
    let own_opt = |s: &Option<WasmStr>| s.as_ref().map(own).transpose();
    let mut copied = Vec::with_capacity(actions.len());
    for a in &actions {
        copied.push(match a {
            RawAction::Apply(s) => wit::Action::Apply(own(s)?),
            RawAction::Delete(r) => wit::Action::Delete(wit::ObjectRef {
                api_version: own(&r.api_version)?,
                kind: own(&r.kind)?,
                namespace: own_opt(&r.namespace)?,
                name: own(&r.name)?,
                uid: own_opt(&r.uid)?,
            }),
        });
    }
    let events = events
        .iter()
        .map(|e| {
            Ok(wit::Event {
                event_type: e.event_type,
                reason: own(&e.reason)?,
                message: own(&e.message)?,
            })
        })
        .collect::<wasmtime::Result<Vec<_>>>()?;
    Ok(Ok(Ok(wit::Plan {
        actions: copied,
        status: own_opt(&plan.status)?,
        events,
        requeue_after_ms: plan.requeue_after_ms,
    })))
}

/// Size of what `info()` returned.
pub fn info_shape(i: &wit::PluginInfo) -> InfoShape {
    let kind = |k: &wit::KindRef| [&k.group, &k.version, &k.kind, &k.plural].map(|s| s.len());
    let mut names: Vec<usize> = vec![i.name.len()];
    names.extend(kind(&i.primary));
    names.extend(i.finalizer.as_ref().map(String::len));
    for r in &i.relations {
        names.push(r.name.len());
        names.extend(kind(&r.kind));
        names.extend(r.label_selector.as_ref().map(String::len));
        names.extend(r.fields.iter().flatten().map(String::len));
    }
    for p in &i.permissions {
        names.extend(kind(&p.kind));
    }
    InfoShape {
        version: i.version.len(),
        longest_name: names.iter().copied().max().unwrap_or(0),
        declarations: i.relations.len() + i.permissions.len(),
        bytes: names.iter().sum::<usize>()
            + i.version.len()
            + i.crd.as_ref().map_or(0, String::len),
    }
}

/// Converts a plan, parsing its JSON parts. Limits are checked by the caller first.
pub fn plan_from_wit(p: wit::Plan) -> Result<plain::Plan, String> {
    let mut actions = Vec::with_capacity(p.actions.len());
    for (i, a) in p.actions.into_iter().enumerate() {
        actions.push(match a {
            wit::Action::Apply(s) => {
                let v: Value = serde_json::from_str(&s)
                    .map_err(|e| format!("action {i}: apply object is not JSON: {e}"))?;
                if !v.is_object() {
                    return Err(format!("action {i}: apply object is not a JSON object"));
                }
                plain::Action::Apply(v)
            }
            wit::Action::Delete(r) => plain::Action::Delete(plain::ObjectRef {
                api_version: r.api_version,
                kind: r.kind,
                namespace: r.namespace,
                name: r.name,
                uid: r.uid,
            }),
        });
    }
    let status = match p.status {
        Some(s) => Some(
            serde_json::from_str::<Value>(&s).map_err(|e| format!("status is not JSON: {e}"))?,
        ),
        None => None,
    };
    Ok(plain::Plan {
        actions,
        status,
        events: p
            .events
            .into_iter()
            .map(|e| plain::Event {
                event_type: match e.event_type {
                    wit::EventType::Normal => plain::EventType::Normal,
                    wit::EventType::Warning => plain::EventType::Warning,
                },
                reason: e.reason,
                message: e.message,
            })
            .collect(),
        requeue_after_ms: p.requeue_after_ms,
    })
}

/// Converts the plugin's own error answer.
pub fn error_from_wit(e: wit::ReconcileError) -> plain::ReconcileError {
    match e {
        wit::ReconcileError::InvalidSpec(s) => plain::ReconcileError::InvalidSpec(s),
        wit::ReconcileError::Transient(s) => plain::ReconcileError::Transient(s),
        wit::ReconcileError::Other(s) => plain::ReconcileError::Other(s),
    }
}
