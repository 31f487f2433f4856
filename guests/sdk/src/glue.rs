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
                    plain::Selection::Referenced(to) => {
                        wit::Selection::Referenced(wit::Reference {
                            name_path: to.name_path,
                            namespace_path: to.namespace_path,
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
            .map(|p| wit::Permission {
                kind: kind(p.kind),
                verbs: p.verbs.into_iter().map(verb).collect(),
            })
            .collect(),
        finalizer: i.finalizer,
        webhooks: wit::Webhooks {
            validate: i.webhooks.validate,
            default: i.webhooks.default,
            convert: i.webhooks.convert,
        },
        outbound_hosts: i.outbound_hosts,
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
    let mut required = std::collections::BTreeMap::new();
    for g in o.required {
        let objects = g
            .objects
            .iter()
            .map(|s| parse(s))
            .collect::<Result<Vec<_>, _>>()?;
        required.insert(g.relation, objects);
    }
    Ok(Observed {
        primary: parse(&o.primary)?,
        related: Default::default(),
        related_json,
        now_unix_ms: o.now_unix_ms,
        seed: o.seed,
        required,
        answers: o
            .answers
            .into_iter()
            .map(|a| (a.key.clone(), answer(a)))
            .collect(),
    })
}

fn answer(a: wit::Answer) -> plain::Answer {
    plain::Answer {
        key: a.key,
        outcome: match a.outcome {
            wit::Outcome::Response(r) => plain::Outcome::Response(plain::Response {
                status: r.status,
                headers: r
                    .headers
                    .into_iter()
                    .map(|h| plain::Header {
                        name: h.name,
                        value: h.value,
                    })
                    .collect(),
                body: r.body,
                truncated: r.truncated,
            }),
            wit::Outcome::Refused(why) => plain::Outcome::Refused(why),
            wit::Outcome::Failed(why) => plain::Outcome::Failed(why),
        },
        at_unix_ms: a.at_unix_ms,
    }
}

fn requirement(r: plain::Requirement) -> wit::Requirement {
    wit::Requirement {
        name: r.name,
        kind: kind(r.kind),
        namespace: r.namespace,
        matching: match r.matching {
            plain::Matching::Name(n) => wit::Matching::Name(n),
            plain::Matching::Labels(l) => wit::Matching::Labels(l),
        },
    }
}

fn request(r: plain::OutboundRequest) -> wit::OutboundRequest {
    wit::OutboundRequest {
        key: r.key,
        method: r.method,
        url: r.url,
        headers: r
            .headers
            .into_iter()
            .map(|h| wit::Header {
                name: h.name,
                value: h.value,
            })
            .collect(),
        body: r.body,
        credential: r.credential.map(|c| wit::Credential {
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
        requires: p.requires.into_iter().map(requirement).collect(),
        requests: p.requests.into_iter().map(request).collect(),
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

/// Runs `validate` on WIT input. An admission request the host sent malformed is refused.
pub fn validate(
    r: wit::AdmissionRequest,
    f: fn(&plain::AdmissionRequest) -> plain::Verdict,
) -> wit::Verdict {
    let parse = |s: Option<String>| -> Result<Option<serde_json::Value>, String> {
        s.map(|t| serde_json::from_str(&t).map_err(|e| format!("host sent malformed JSON: {e}")))
            .transpose()
    };
    let verdict = match (parse(r.object), parse(r.old_object)) {
        (Ok(object), Ok(old_object)) => f(&plain::AdmissionRequest {
            operation: match r.operation {
                wit::Operation::Create => plain::Operation::Create,
                wit::Operation::Update => plain::Operation::Update,
                wit::Operation::Delete => plain::Operation::Delete,
            },
            object,
            old_object,
            user: r.user,
            dry_run: r.dry_run,
        }),
        (Err(e), _) | (_, Err(e)) => plain::Verdict::deny(e),
    };
    wit::Verdict {
        allowed: verdict.allowed,
        fields: verdict
            .fields
            .into_iter()
            .map(|f| wit::FieldError {
                path: f.path,
                value: f.value.map(|v| v.to_string()),
                detail: f.detail,
            })
            .collect(),
        message: verdict.message,
        warnings: verdict.warnings,
    }
}

/// Runs `default` or `convert` on a JSON object in and out.
pub fn transform(
    object: String,
    f: impl FnOnce(serde_json::Value) -> Result<serde_json::Value, String>,
) -> Result<String, String> {
    let v = serde_json::from_str(&object).map_err(|e| format!("host sent malformed JSON: {e}"))?;
    f(v).map(|v| v.to_string())
}
