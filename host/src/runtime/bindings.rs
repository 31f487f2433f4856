//! The only file that holds `bindgen!` for the plugin world, and the conversions between
//! the generated types and the plain types of [`crate::runtime::types`].

use serde_json::Value;

use crate::runtime::budget::{InfoShape, PlanShape};
use crate::runtime::footprint;
use crate::runtime::types as plain;

wasmtime::component::bindgen!({
    world: "plugin",
    path: "../wit",
});

pub use self::wasmop::plugin::host::{
    Host as HostImports, Level, add_to_linker as add_host_to_linker,
};
pub(crate) use self::wasmop::plugin::types as wit;
use crate::runtime::legacy::{self, LegacyBindings, LegacyBindingsPre};
use crate::runtime::store::StoreData;

/// A plugin version's exports, pre-instantiated: a component built against contract 0.4.0,
/// or one built against 0.3.0 adapted to it ([`legacy`]).
pub enum PluginBindingsPre<T: 'static> {
    /// Contract 0.4.0.
    Current(PluginPre<T>),
    /// Contract 0.3.0.
    Legacy(LegacyBindingsPre<T>),
}

/// One instance of a plugin version ([`PluginBindingsPre::instantiate`]).
pub enum PluginBindings {
    /// Contract 0.4.0.
    Current(Plugin),
    /// Contract 0.3.0.
    Legacy(LegacyBindings),
}

impl PluginBindingsPre<StoreData> {
    /// Type-checks a component's exports against 0.4.0, then 0.3.0; the error says what
    /// 0.4.0 missed.
    pub fn new(pre: wasmtime::component::InstancePre<StoreData>) -> wasmtime::Result<Self> {
        match PluginPre::new(pre.clone()) {
            Ok(current) => Ok(Self::Current(current)),
            Err(e) => match LegacyBindingsPre::new(pre) {
                Ok(old) => Ok(Self::Legacy(old)),
                Err(_) => {
                    Err(e
                        .context("the component implements neither wasmop:plugin@0.4.0 nor @0.3.0"))
                }
            },
        }
    }

    /// The contract version the component was built against.
    pub fn contract(&self) -> &'static str {
        match self {
            Self::Current(_) => "0.4.0",
            Self::Legacy(_) => "0.3.0",
        }
    }

    /// A fresh instance in `store`.
    pub fn instantiate(
        &self,
        store: &mut wasmtime::Store<StoreData>,
    ) -> wasmtime::Result<PluginBindings> {
        Ok(match self {
            Self::Current(p) => PluginBindings::Current(p.instantiate(store)?),
            Self::Legacy(p) => PluginBindings::Legacy(p.instantiate(store)?),
        })
    }
}

impl PluginBindings {
    /// `info()`, in 0.4.0's types.
    pub fn call_info(
        &self,
        store: &mut wasmtime::Store<StoreData>,
    ) -> wasmtime::Result<wit::PluginInfo> {
        match self {
            Self::Current(b) => b.call_info(store),
            Self::Legacy(b) => legacy::call_info(b, store),
        }
    }

    /// `reconcile`, in 0.4.0's types.
    pub fn call_reconcile(
        &self,
        store: &mut wasmtime::Store<StoreData>,
        input: &wit::Observed,
    ) -> wasmtime::Result<Result<wit::Plan, wit::ReconcileError>> {
        match self {
            Self::Current(b) => b.call_reconcile(store, input),
            Self::Legacy(b) => legacy::call_decide(b, store, false, input),
        }
    }

    /// `validate`; a 0.3.0 component has none (the host never declares its webhook).
    pub fn call_validate(
        &self,
        store: &mut wasmtime::Store<StoreData>,
        request: &wit::AdmissionRequest,
    ) -> wasmtime::Result<wit::Verdict> {
        match self {
            Self::Current(b) => b.call_validate(store, request),
            Self::Legacy(_) => Err(wasmtime::format_err!("contract 0.3.0 has no validate")),
        }
    }

    /// `default`; a 0.3.0 component has none.
    pub fn call_default(
        &self,
        store: &mut wasmtime::Store<StoreData>,
        object: &str,
    ) -> wasmtime::Result<Result<String, String>> {
        match self {
            Self::Current(b) => b.call_default(store, object),
            Self::Legacy(_) => Err(wasmtime::format_err!("contract 0.3.0 has no default")),
        }
    }

    /// `convert`; a 0.3.0 component has none.
    pub fn call_convert(
        &self,
        store: &mut wasmtime::Store<StoreData>,
        object: &str,
        to_version: &str,
    ) -> wasmtime::Result<Result<String, String>> {
        match self {
            Self::Current(b) => b.call_convert(store, object, to_version),
            Self::Legacy(_) => Err(wasmtime::format_err!("contract 0.3.0 has no convert")),
        }
    }

    /// `cleanup`, in 0.4.0's types.
    pub fn call_cleanup(
        &self,
        store: &mut wasmtime::Store<StoreData>,
        input: &wit::Observed,
    ) -> wasmtime::Result<Result<wit::Plan, wit::ReconcileError>> {
        match self {
            Self::Current(b) => b.call_cleanup(store, input),
            Self::Legacy(b) => legacy::call_decide(b, store, true, input),
        }
    }
}

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
            // Parsed, the CRD may take at most 16 times the largest info (32 MiB).
            footprint::of_json(&s, 16 * crate::runtime::budget::MAX_INFO_BYTES)
                .map_err(|e| format!("crd is refused: {e}"))?;
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
                    wit::Selection::Referenced(r) => {
                        plain::Selection::Referenced(plain::Reference {
                            name_path: r.name_path,
                            namespace_path: r.namespace_path,
                        })
                    }
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
        webhooks: plain::Webhooks {
            validate: i.webhooks.validate,
            default: i.webhooks.default,
            convert: i.webhooks.convert,
        },
        outbound_hosts: i.outbound_hosts,
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
        required: o
            .required
            .iter()
            .map(|(name, objs)| wit::RelatedObjects {
                relation: name.clone(),
                objects: objs.iter().map(Value::to_string).collect(),
            })
            .collect(),
        answers: o.answers.values().map(answer_to_wit).collect(),
    }
}

fn answer_to_wit(a: &plain::Answer) -> wit::Answer {
    let header = |h: &plain::Header| wit::Header {
        name: h.name.clone(),
        value: h.value.clone(),
    };
    wit::Answer {
        key: a.key.clone(),
        outcome: match &a.outcome {
            plain::Outcome::Response(r) => wit::Outcome::Response(wit::Response {
                status: r.status,
                headers: r.headers.iter().map(header).collect(),
                body: r.body.clone(),
                truncated: r.truncated,
            }),
            plain::Outcome::Refused(why) => wit::Outcome::Refused(why.clone()),
            plain::Outcome::Failed(why) => wit::Outcome::Failed(why.clone()),
        },
        at_unix_ms: a.at_unix_ms,
    }
}

/// The most host memory a lift of an answer within `limits` copies: wasmtime's hostcall
/// fuel counts a list as its length times the size of the host type it becomes, and a
/// string as its bytes, and refuses before allocating what goes over. So an answer over
/// this figure is refused without the host holding it, and any answer within the limits
/// (at most `max_actions` actions, `max_events` Events, `max_plan_bytes` bytes of strings,
/// or an error of `max_error_bytes`) fits.
pub fn answer_fuel(limits: &crate::runtime::limits::Limits) -> usize {
    limits
        .max_actions
        .saturating_mul(std::mem::size_of::<wit::Action>())
        .saturating_add(
            limits
                .max_events
                .saturating_mul(std::mem::size_of::<wit::Event>()),
        )
        .saturating_add(limits.max_plan_bytes.max(limits.max_error_bytes))
}

/// The most host memory the lift of `info()` copies: four times its byte budget, room for
/// the host structures of every declaration within [`crate::runtime::budget::MAX_DECLARATIONS`].
pub fn info_fuel() -> usize {
    4 * crate::runtime::budget::MAX_INFO_BYTES
}

/// Size of a plan as it crossed the boundary: its actions, its Events and the bytes of all
/// its strings.
pub fn plan_shape(p: &wit::Plan) -> PlanShape {
    let actions: usize = p
        .actions
        .iter()
        .map(|a| match a {
            wit::Action::Apply(s) => s.len(),
            wit::Action::Delete(r) => {
                r.api_version.len()
                    + r.kind.len()
                    + r.name.len()
                    + r.namespace.as_ref().map_or(0, String::len)
                    + r.uid.as_ref().map_or(0, String::len)
            }
        })
        .sum();
    let events: usize = p
        .events
        .iter()
        .map(|e| e.reason.len() + e.message.len())
        .sum();
    let kind = |k: &wit::KindRef| k.group.len() + k.version.len() + k.kind.len() + k.plural.len();
    let requires: usize = p
        .requires
        .iter()
        .map(|r| {
            r.name.len()
                + kind(&r.kind)
                + r.namespace.as_ref().map_or(0, String::len)
                + match &r.matching {
                    wit::Matching::Name(s) | wit::Matching::Labels(s) => s.len(),
                }
        })
        .sum();
    let requests: usize = p.requests.iter().map(request_bytes).sum();
    PlanShape {
        // Requirements and requests count as actions: each is work the host does.
        actions: p.actions.len() + p.requires.len() + p.requests.len(),
        events: p.events.len(),
        bytes: actions + events + requires + requests + p.status.as_ref().map_or(0, String::len),
    }
}

fn request_bytes(r: &wit::OutboundRequest) -> usize {
    r.key.len()
        + r.method.len()
        + r.url.len()
        + r.headers
            .iter()
            .map(|h| h.name.len() + h.value.len())
            .sum::<usize>()
        + r.body.as_ref().map_or(0, Vec::len)
        + r.credential.as_ref().map_or(0, |c| {
            c.header.len() + c.prefix.len() + c.secret.len() + c.key.len()
        })
        + r.idempotency_key.as_ref().map_or(0, String::len)
        + r.keep_headers.iter().map(String::len).sum::<usize>()
}

/// Bytes of the message of an error answer.
pub fn error_bytes(e: &wit::ReconcileError) -> usize {
    match e {
        wit::ReconcileError::InvalidSpec(s)
        | wit::ReconcileError::Transient(s)
        | wit::ReconcileError::Other(s) => s.len(),
    }
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
        if let wit::Selection::Referenced(to) = &r.selection {
            names.push(to.name_path.len());
            names.extend(to.namespace_path.as_ref().map(String::len));
        }
    }
    names.extend(i.outbound_hosts.iter().map(String::len));
    for p in &i.permissions {
        names.extend(kind(&p.kind));
    }
    InfoShape {
        version: i.version.len(),
        longest_name: names.iter().copied().max().unwrap_or(0),
        declarations: i.relations.len() + i.permissions.len() + i.outbound_hosts.len(),
        bytes: names.iter().sum::<usize>()
            + i.version.len()
            + i.crd.as_ref().map_or(0, String::len),
    }
}

/// The host memory the JSON parts of `p` (its applied objects and its status) take once
/// parsed, measured without parsing them ([`footprint`]); refused with the reason when
/// together they would take more than `limit`, nest too deep or are not JSON.
pub fn plan_footprint(p: &wit::Plan, limit: usize) -> Result<usize, String> {
    let mut total = 0usize;
    let parts = p
        .actions
        .iter()
        .enumerate()
        .filter_map(|(i, a)| match a {
            wit::Action::Apply(s) => Some((format!("action {i}: apply object"), s)),
            wit::Action::Delete(_) => None,
        })
        .chain(p.status.iter().map(|s| ("status".to_string(), s)));
    for (what, text) in parts {
        let left = limit.saturating_sub(total);
        match footprint::of_json(text, left) {
            Ok(bytes) => total += bytes,
            Err(footprint::Refused::TooLarge { .. }) => {
                return Err(format!(
                    "the plan's JSON, parsed, would take more than {limit} bytes of host \
                     memory (the call's memory cap; over it at {what})"
                ));
            }
            Err(e) => return Err(format!("{what} is refused: {e}")),
        }
    }
    Ok(total)
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
        requires: p.requires.into_iter().map(requirement_from_wit).collect(),
        requests: p.requests.into_iter().map(request_from_wit).collect(),
    })
}

fn requirement_from_wit(r: wit::Requirement) -> plain::Requirement {
    plain::Requirement {
        name: r.name,
        kind: r.kind.into(),
        namespace: r.namespace,
        matching: match r.matching {
            wit::Matching::Name(n) => plain::Matching::Name(n),
            wit::Matching::Labels(l) => plain::Matching::Labels(l),
        },
    }
}

fn request_from_wit(r: wit::OutboundRequest) -> plain::OutboundRequest {
    plain::OutboundRequest {
        key: r.key,
        method: r.method,
        url: r.url,
        headers: r
            .headers
            .into_iter()
            .map(|h| plain::Header {
                name: h.name,
                value: h.value,
            })
            .collect(),
        body: r.body,
        credential: r.credential.map(|c| plain::Credential {
            header: c.header,
            prefix: c.prefix,
            secret: c.secret,
            key: c.key,
        }),
        idempotency_key: r.idempotency_key,
        retry: r.retry,
        keep_headers: r.keep_headers,
    }
}

/// Converts the plugin's own error answer.
pub fn error_from_wit(e: wit::ReconcileError) -> plain::ReconcileError {
    match e {
        wit::ReconcileError::InvalidSpec(s) => plain::ReconcileError::InvalidSpec(s),
        wit::ReconcileError::Transient(s) => plain::ReconcileError::Transient(s),
        wit::ReconcileError::Other(s) => plain::ReconcileError::Other(s),
    }
}

/// An admission request in WIT form.
pub fn admission_to_wit(r: &plain::AdmissionRequest) -> wit::AdmissionRequest {
    wit::AdmissionRequest {
        operation: match r.operation {
            plain::Operation::Create => wit::Operation::Create,
            plain::Operation::Update => wit::Operation::Update,
            plain::Operation::Delete => wit::Operation::Delete,
        },
        object: r.object.as_ref().map(Value::to_string),
        old_object: r.old_object.as_ref().map(Value::to_string),
        user: r.user.clone(),
        dry_run: r.dry_run,
    }
}

/// Bytes of the strings of a verdict.
pub fn verdict_bytes(v: &wit::Verdict) -> usize {
    v.fields
        .iter()
        .map(|f| f.path.len() + f.value.as_ref().map_or(0, String::len) + f.detail.len())
        .sum::<usize>()
        + v.message.as_ref().map_or(0, String::len)
        + v.warnings.iter().map(String::len).sum::<usize>()
}

/// Converts a verdict; a refused value that is not JSON is kept as a JSON string.
pub fn verdict_from_wit(v: wit::Verdict) -> plain::Verdict {
    plain::Verdict {
        allowed: v.allowed,
        fields: v
            .fields
            .into_iter()
            .map(|f| plain::FieldError {
                path: f.path,
                value: f
                    .value
                    .map(|t| serde_json::from_str(&t).unwrap_or(Value::String(t))),
                detail: f.detail,
            })
            .collect(),
        message: v.message,
        warnings: v.warnings,
    }
}
