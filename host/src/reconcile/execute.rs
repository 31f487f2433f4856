//! The executor: carries out checked steps with the Kubernetes API. Creates with generated
//! names are POSTs; everything named goes through server-side apply with the plugin's field
//! manager; deletes carry the UID precondition; the status goes through the status
//! subresource. Every completed write is reported as it happens ([`Written`]), so the
//! caller can expect it in the caches even when a later step fails. Each write is sent from
//! a `write` span of its own, a child of the reconcile's, which ends with the API server's
//! answer ([`write_span`]).

use kube::Client;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions};
use serde_json::{Value, json};
use tracing::Instrument;

use crate::k8s::kinds::api_for;
use crate::k8s::requests::{write_failed, write_span};
use crate::plan::guard::{PrimaryRef, Step, Violation};
use crate::runtime::{KindRef, PluginInfo, Verb};

/// One completed write, as the API server answered it.
#[derive(Debug)]
pub enum Written {
    /// An object created or applied: the object as stored.
    Object {
        /// Its kind.
        kind: KindRef,
        /// The object the API server returned (name, resourceVersion, labels).
        object: Box<DynamicObject>,
    },
    /// An object deleted (or already gone).
    Deleted {
        /// Its kind.
        kind: KindRef,
        /// Namespace.
        namespace: Option<String>,
        /// Name.
        name: String,
        /// UID the delete was made on.
        uid: String,
    },
    /// A step cut off before its answer ([`crate::k8s::fence::is_cut_off`]): the API
    /// server may still carry it out.
    Unanswered(Step),
}

/// The field manager of a plugin's writes.
pub fn field_manager(plugin: &str) -> String {
    format!("wasmop-{plugin}")
}

/// The namespace (if any) and name of an object to apply.
fn namespace_and_name(object: &Value) -> (Option<&str>, &str) {
    let s = |p: &str| object.pointer(p).and_then(Value::as_str);
    (
        s("/metadata/namespace"),
        s("/metadata/name").unwrap_or_default(),
    )
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// Most writes of one run sent at once (see [`run_steps`]).
pub const MAX_TOGETHER: usize = 16;

/// Carries out `steps` in order; stops at the first failure. `done` hears of every write
/// that succeeded, and of every one cut off before its answer (which may still land), in
/// the steps' order, before any later step starts.
///
/// A run of consecutive creates of one kind (all with generated names, so none can name
/// another) or of consecutive deletes of one kind (each by UID) goes out together, up to
/// [`MAX_TOGETHER`] at once, as the ReplicaSet controller sends a replica set's pods: the
/// API server gets them in one round trip instead of one after the other, and nothing could
/// tell their order apart. When one of them fails, the run's others still complete (and are
/// reported), and the first failure in the steps' order is returned.
pub async fn run_steps(
    client: &Client,
    plugin: &str,
    steps: &[Step],
    done: &mut (dyn FnMut(Written) + Send),
) -> Result<(), kube::Error> {
    let manager = field_manager(plugin);
    for run in runs(steps) {
        for chunk in run.chunks(MAX_TOGETHER) {
            let results = futures::future::join_all(
                chunk
                    .iter()
                    .map(|s| write_one(client, plugin, &manager, s).instrument(span_of(s))),
            )
            .await;
            let mut first_error = None;
            for (step, result) in chunk.iter().zip(results) {
                match result {
                    Ok(Some(written)) => done(written),
                    Ok(None) => {}
                    Err(e) => {
                        if crate::k8s::fence::is_cut_off(&e) {
                            done(Written::Unanswered(step.clone()));
                        }
                        first_error.get_or_insert(e);
                    }
                }
            }
            if let Some(e) = first_error {
                return Err(e);
            }
        }
    }
    Ok(())
}

/// `steps` cut into runs that may go out together: consecutive creates of one kind,
/// consecutive deletes of one kind; every other step is a run of its own.
fn runs(steps: &[Step]) -> Vec<&[Step]> {
    let together = |a: &Step, b: &Step| match (a, b) {
        (Step::Create { kind: x, .. }, Step::Create { kind: y, .. }) => x == y,
        (Step::Delete { kind: x, .. }, Step::Delete { kind: y, .. }) => x == y,
        _ => false,
    };
    steps.chunk_by(together).collect()
}

/// The `write` span of one step.
fn span_of(step: &Step) -> tracing::Span {
    match step {
        Step::Create { kind, object } => {
            let (ns, name) = namespace_and_name(object);
            write_span("POST", &kind.kind, ns, name)
        }
        Step::Apply { kind, object } => {
            let (ns, name) = namespace_and_name(object);
            write_span("PATCH", &kind.kind, ns, name)
        }
        Step::Delete { kind, target } => write_span(
            "DELETE",
            &kind.kind,
            target.namespace.as_deref(),
            &target.name,
        ),
    }
}

/// Carries out one step, in its `write` span (which records a failure); `None`: nothing to
/// expect (see [`write_step`]).
async fn write_one(
    client: &Client,
    plugin: &str,
    manager: &str,
    step: &Step,
) -> Result<Option<Written>, kube::Error> {
    let result = write_step(client, plugin, manager, step).await;
    if let Err(e) = &result {
        write_failed(e);
    }
    result
}

/// Carries out one step; `None`: nothing to expect (a delete without UID, or refused by its
/// UID precondition because a newer object has the name).
async fn write_step(
    client: &Client,
    plugin: &str,
    manager: &str,
    step: &Step,
) -> Result<Option<Written>, kube::Error> {
    match step {
        Step::Create { kind, object } => {
            let ns = object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str);
            let api = api_for(client, kind, ns);
            let obj: DynamicObject =
                serde_json::from_value(object.clone()).map_err(kube::Error::SerdeError)?;
            let created = api
                .create(
                    &PostParams {
                        field_manager: Some(manager.to_string()),
                        ..Default::default()
                    },
                    &obj,
                )
                .await?;
            if let Some(name) = &created.metadata.name {
                tracing::Span::current().record("name", name.as_str());
            }
            tracing::info!(plugin, kind = %kind.kind, name = ?created.metadata.name, "created");
            Ok(Some(Written::Object {
                kind: kind.clone(),
                object: Box::new(created),
            }))
        }
        Step::Apply { kind, object } => {
            let (ns, name) = namespace_and_name(object);
            let api = api_for(client, kind, ns);
            let applied = api
                .patch(
                    name,
                    &PatchParams::apply(manager).force(),
                    &Patch::Apply(object),
                )
                .await?;
            tracing::info!(plugin, kind = %kind.kind, name, "applied");
            Ok(Some(Written::Object {
                kind: kind.clone(),
                object: Box::new(applied),
            }))
        }
        Step::Delete { kind, target } => {
            let api = api_for(client, kind, target.namespace.as_deref());
            let params = DeleteParams {
                preconditions: target.uid.clone().map(|uid| Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match api.delete(&target.name, &params).await {
                Ok(_) => {
                    tracing::info!(plugin, kind = %kind.kind, name = %target.name, "deleted")
                }
                Err(e) if is_status(&e, 404) => {
                    tracing::debug!(plugin, name = %target.name, "already gone")
                }
                Err(e) if is_status(&e, 409) => {
                    tracing::warn!(plugin, name = %target.name, "not deleted: the UID precondition failed (a newer object has that name)");
                    return Ok(None);
                }
                Err(e) => return Err(e),
            }
            Ok(target.uid.as_ref().map(|uid| Written::Deleted {
                kind: kind.clone(),
                namespace: target.namespace.clone(),
                name: target.name.clone(),
                uid: uid.clone(),
            }))
        }
    }
}

/// The `adoption` rule, judged against the cluster before any step is sent: an apply to an
/// existing object that the primary does not control (another controller does, or none)
/// is refused unless the plugin declares `adopt` on its kind. Reads each object applied to
/// by name, as the plugin (which is why `wasmop rbac` grants `get` with `patch`).
pub async fn check_adoption(
    client: &Client,
    info: &PluginInfo,
    primary: &PrimaryRef,
    steps: &[Step],
) -> Result<Result<(), Violation>, kube::Error> {
    for step in steps {
        let Step::Apply { kind, object } = step else {
            continue;
        };
        if info.allows(&kind.api_version(), &kind.kind, Verb::Adopt) {
            continue;
        }
        let (ns, name) = namespace_and_name(object);
        let Some(existing) = api_for(client, kind, ns).get_opt(name).await? else {
            continue;
        };
        let controller = existing
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true));
        if controller.is_some_and(|c| c.uid == primary.uid) {
            continue;
        }
        let by = match controller {
            Some(c) => format!("is controlled by {} {}", c.kind, c.name),
            None => "is controlled by nothing".to_string(),
        };
        return Ok(Err(Violation::new(
            "adoption",
            format!(
                "{} {name} exists and {by}; the plugin does not declare `adopt` on {}",
                kind.kind, kind.kind
            ),
        )));
    }
    Ok(Ok(()))
}

/// Writes the primary's desired status through the status subresource, as a JSON merge
/// patch from `stored` (the status the cache holds, which the gate waited for) to `status`,
/// with the plugin's field manager; returns the primary as stored. The desired status is
/// the whole status: what `status` lacks is removed.
pub async fn write_status(
    client: &Client,
    plugin: &str,
    kind: &KindRef,
    primary: &PrimaryRef,
    stored: &Value,
    status: &Value,
) -> Result<DynamicObject, kube::Error> {
    let api = api_for(client, kind, primary.namespace.as_deref());
    let params = PatchParams {
        field_manager: Some(field_manager(plugin)),
        ..PatchParams::default()
    };
    let body = json!({"status": crate::k8s::merge_patch::between(stored, status)});
    let span = write_span(
        "PATCH",
        &kind.kind,
        primary.namespace.as_deref(),
        &primary.name,
    );
    span.record("subresource", "status");
    async {
        let stored = api
            .patch_status(&primary.name, &params, &Patch::Merge(&body))
            .await;
        stored.inspect_err(|e| write_failed(e))
    }
    .instrument(span)
    .await
}

/// Sets the host's condition (type `Ready`, status `False`) on the primary's status,
/// keeping the other conditions: used when the plugin could not decide or its plan was
/// refused. A status schema without `conditions` simply prunes it. Returns the primary as
/// stored, or `None` when the condition was already there (nothing written).
pub async fn mark_not_ready(
    client: &Client,
    kind: &KindRef,
    primary: &Value,
    pref: &PrimaryRef,
    reason: &str,
    message: &str,
) -> Result<Option<DynamicObject>, kube::Error> {
    let mut conditions: Vec<Value> = primary
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let unchanged = conditions.iter().any(|c| {
        c["type"] == "Ready"
            && c["status"] == "False"
            && c["reason"] == reason
            && c["message"] == message
    });
    if unchanged {
        return Ok(None);
    }
    conditions.retain(|c| c["type"] != "Ready");
    conditions.push(json!({
        "type": "Ready", "status": "False", "reason": reason, "message": message,
        "lastTransitionTime": jiff::Timestamp::now().round(jiff::Unit::Second).unwrap_or_else(|_| jiff::Timestamp::now()).to_string(),
        "observedGeneration": primary.pointer("/metadata/generation"),
    }));
    let api = api_for(client, kind, pref.namespace.as_deref());
    let span = write_span("PATCH", &kind.kind, pref.namespace.as_deref(), &pref.name);
    span.record("subresource", "status");
    async {
        let stored = api
            .patch_status(
                &pref.name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"conditions": conditions}})),
            )
            .await;
        stored.inspect_err(|e| write_failed(e))
    }
    .instrument(span)
    .await
    .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::ObjectRef;

    fn kind(k: &str) -> KindRef {
        KindRef {
            group: String::new(),
            version: "v1".into(),
            kind: k.into(),
            plural: format!("{}s", k.to_lowercase()),
            namespaced: true,
        }
    }

    fn create(k: &str) -> Step {
        Step::Create {
            kind: kind(k),
            object: json!({"metadata": {"generateName": "x-"}}),
        }
    }

    fn apply(k: &str) -> Step {
        Step::Apply {
            kind: kind(k),
            object: json!({"metadata": {"name": "x"}}),
        }
    }

    fn delete(k: &str) -> Step {
        Step::Delete {
            kind: kind(k),
            target: ObjectRef {
                api_version: "v1".into(),
                kind: k.into(),
                namespace: Some("d".into()),
                name: "x".into(),
                uid: Some("u".into()),
            },
        }
    }

    fn lengths(steps: &[Step]) -> Vec<usize> {
        runs(steps).iter().map(|r| r.len()).collect()
    }

    #[test]
    fn creates_and_deletes_of_one_kind_go_together() {
        let steps = [create("Pod"), create("Pod"), create("Pod")];
        assert_eq!(lengths(&steps), [3]);
        let steps = [delete("Pod"), delete("Pod"), create("Pod"), create("Pod")];
        assert_eq!(lengths(&steps), [2, 2]);
    }

    #[test]
    fn other_kinds_and_applies_keep_their_order() {
        // A ConfigMap created before the pods that could read it, each apply alone.
        let steps = [
            create("ConfigMap"),
            create("Pod"),
            create("Pod"),
            apply("Service"),
            apply("Service"),
            delete("Pod"),
            delete("ConfigMap"),
        ];
        assert_eq!(lengths(&steps), [1, 2, 1, 1, 1, 1]);
        assert!(runs(&[]).is_empty());
    }
}
