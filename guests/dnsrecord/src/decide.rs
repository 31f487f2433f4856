//! The decisions: what to ask the DNS API, from the record and the answers to what was
//! asked before. Nothing here touches the network: a request goes into the plan, and its
//! answer comes back in `observed.answers` under the request's key.
//!
//! - No record id yet: `POST` under key [`CREATE`] (idempotency key: the object's UID and
//!   how many times it was created), then keep the id the answer gives.
//! - The API holds another version than the spec's: `PUT` under key `update-<fingerprint>`;
//!   a spec changed meanwhile asks under a new key, and the old answer goes. A 404 means the
//!   record vanished outside: created again.
//! - Deleted: `DELETE` under key [`DELETE`]; a 2xx or 404 answer ends the cleanup.
//! - A failure, a 429 or a 5xx: asked again after [`RETRY_MS`] (the plan leaves the key out,
//!   so its answer goes, and carries it again later: the same idempotency key, so the API
//!   applies it once). A refusal: the status says why, asked again after [`REFUSED_MS`].

use wasmop_sdk::conditions::{condition, set_condition};
use wasmop_sdk::k8s::rfc3339;
use wasmop_sdk::{Answer, Observed, OutboundRequest, Plan, ReconcileError};

use crate::types::{DEFAULT_ENDPOINT, DnsRecord, DnsRecordStatus, Record, Stored};

/// The key of the create request.
pub const CREATE: &str = "create";
/// The key of the delete request.
pub const DELETE: &str = "delete";
/// How long after a failed request it is asked again, milliseconds.
pub const RETRY_MS: u64 = 2_000;
/// How long after a refused request it is asked again (an admin may grant it meanwhile).
pub const REFUSED_MS: u64 = 30_000;

const TYPES: &[&str] = &["A", "AAAA", "CNAME", "TXT"];

/// The path in front of the API's routes: none, or `/v2` in the test-only second version.
const VERSION_PATH: &str = if cfg!(feature = "v2") { "/v2" } else { "" };

/// The record, its UID and the DNS API's URL of its zone's records.
struct Target {
    record: DnsRecord,
    uid: String,
    records_url: String,
}

fn target(observed: &Observed) -> Result<Target, ReconcileError> {
    let record: DnsRecord = observed.primary_as()?;
    let spec = &record.spec;
    for (field, value) in [
        ("zone", &spec.zone),
        ("name", &spec.name),
        ("value", &spec.value),
    ] {
        if value.trim().is_empty() || value.contains(['/', '?', '#']) {
            return Err(ReconcileError::InvalidSpec(format!(
                "spec.{field} `{value}`: empty, or a `/`, `?` or `#` in it"
            )));
        }
    }
    if !TYPES.contains(&spec.record_type.as_str()) {
        return Err(ReconcileError::InvalidSpec(format!(
            "spec.type `{}`: one of {}",
            spec.record_type,
            TYPES.join(", ")
        )));
    }
    let endpoint = spec
        .endpoint
        .as_deref()
        .unwrap_or(DEFAULT_ENDPOINT)
        .trim_end_matches('/');
    Ok(Target {
        uid: record.metadata.uid.clone().unwrap_or_default(),
        records_url: format!("{endpoint}{}/zones/{}/records", VERSION_PATH, spec.zone),
        record,
    })
}

impl Target {
    /// `request` with the record's token, when it names one.
    fn authorized(&self, request: OutboundRequest) -> OutboundRequest {
        match &self.record.spec.token_secret {
            Some(secret) => request.credential("Authorization", "Bearer ", secret, "token"),
            None => request,
        }
    }

    fn create(&self, status: &DnsRecordStatus) -> OutboundRequest {
        self.authorized(
            OutboundRequest::post(CREATE, &self.records_url)
                .json(&Record::of(&self.record.spec))
                .idempotency_key(format!("{}-create-{}", self.uid, status.creations))
                .retry(),
        )
    }
}

/// The words for an answer that did not succeed.
fn why(answer: &Answer) -> String {
    match &answer.outcome {
        wasmop_sdk::Outcome::Response(r) => format!(
            "HTTP {}: {}",
            r.status,
            String::from_utf8_lossy(&r.body)
                .chars()
                .take(200)
                .collect::<String>()
        ),
        wasmop_sdk::Outcome::Refused(rule) => format!("refused by the host: {rule}"),
        wasmop_sdk::Outcome::Failed(e) => format!("failed: {e}"),
    }
}

/// `plan` with `status`, its `Ready` condition said from `synced` and `message`.
fn with_status(plan: Plan, mut status: DnsRecordStatus, observed: &Observed, reason: &str) -> Plan {
    let previous = status.conditions.clone();
    let generation = observed
        .primary
        .pointer("/metadata/generation")
        .and_then(serde_json::Value::as_i64);
    let ready = condition(
        "Ready",
        status.synced,
        reason,
        status.message.clone(),
        &rfc3339(observed.now_unix_ms),
        generation,
    );
    set_condition(&mut status.conditions, &previous, ready);
    plan.status(&status)
}

/// A plan that waits before asking again: the key left out (its answer goes), the status
/// saying why.
fn later(observed: &Observed, mut status: DnsRecordStatus, doing: &str, answer: &Answer) -> Plan {
    let (wait, reason) = if answer.refused().is_some() {
        (REFUSED_MS, "Refused")
    } else {
        (RETRY_MS, "Failing")
    };
    status.synced = false;
    status.message = format!("{doing}: {}; again in {} s", why(answer), wait / 1000);
    with_status(Plan::new(), status, observed, reason).requeue_after_ms(wait)
}

/// Decides what the DNS API should be asked for `observed`'s record.
pub fn reconcile(observed: &Observed) -> Result<Plan, ReconcileError> {
    let t = target(observed)?;
    let spec = &t.record.spec;
    let want = Record::of(spec);
    let fingerprint = want.fingerprint(&spec.zone);
    let mut status = t.record.status.clone().unwrap_or_default();
    let mut plan = Plan::new();

    if status.record_id.is_none() {
        match observed.answer(CREATE) {
            None => {
                status.synced = false;
                status.message = "creating the record".into();
                let plan = plan.request(t.create(&status));
                return Ok(with_status(plan, status, observed, "Creating"));
            }
            Some(a) => match a.success() {
                Some(r) => {
                    let stored: Stored = r.json().map_err(ReconcileError::Transient)?;
                    status.applied = Some(stored.record.fingerprint(&spec.zone));
                    status.record_id = Some(stored.id);
                    status.creations += 1;
                }
                None => return Ok(later(observed, status, "creating the record", a)),
            },
        }
    }
    let id = status.record_id.clone().unwrap_or_default();

    if status.applied.as_deref() != Some(fingerprint.as_str()) {
        let key = format!("update-{fingerprint}");
        match observed.answer(&key) {
            None => {
                plan = plan.request(
                    t.authorized(
                        OutboundRequest::put(&key, format!("{}/{id}", t.records_url))
                            .json(&want)
                            .idempotency_key(format!("{}-{key}", t.uid))
                            .retry(),
                    ),
                );
                status.synced = false;
                status.message = "updating the record".into();
                return Ok(with_status(plan, status, observed, "Updating"));
            }
            Some(a) => match (a.success(), a.response().map(|r| r.status)) {
                (Some(r), _) => {
                    let stored: Stored = r.json().map_err(ReconcileError::Transient)?;
                    status.applied = Some(stored.record.fingerprint(&spec.zone));
                }
                (None, Some(404)) => {
                    status.record_id = None;
                    status.applied = None;
                    status.synced = false;
                    status.message =
                        "the record vanished from the DNS API; creating it again".into();
                    return Ok(plan.request(t.create(&status)).status(&status));
                }
                (None, _) => return Ok(later(observed, status, "updating the record", a)),
            },
        }
    }
    status.synced = status.applied.as_deref() == Some(fingerprint.as_str());
    status.message = format!("record {id} is as the spec says");
    Ok(with_status(plan, status, observed, "Synced"))
}

/// Deletes the record from the DNS API before the object goes; done once the API says it
/// is gone (or never had it).
pub fn cleanup(observed: &Observed) -> Result<Plan, ReconcileError> {
    let t = target(observed)?;
    let mut status = t.record.status.clone().unwrap_or_default();
    // An id the status does not show yet: the answer of a create still held.
    let id = status.record_id.clone().or_else(|| {
        observed
            .answer(CREATE)
            .and_then(Answer::success)
            .and_then(|r| r.json::<Stored>().ok())
            .map(|s| s.id)
    });
    let Some(id) = id else {
        return Ok(Plan::new());
    };
    match observed.answer(DELETE) {
        None => {
            status.message = format!("deleting record {id}");
            status.synced = false;
            let plan = Plan::new().request(
                t.authorized(
                    OutboundRequest::delete(DELETE, format!("{}/{id}", t.records_url))
                        .idempotency_key(format!("{}-delete-{id}", t.uid))
                        .retry(),
                ),
            );
            Ok(with_status(plan, status, observed, "Deleting"))
        }
        Some(a) if a.success().is_some() || a.response().is_some_and(|r| r.status == 404) => {
            Ok(Plan::new())
        }
        Some(a) => Ok(later(observed, status, &format!("deleting record {id}"), a)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use wasmop_sdk::{Outcome, Response};

    fn record(status: Value, deleting: bool) -> Observed {
        let mut o = json!({"apiVersion": "dns.example.com/v1alpha1", "kind": "DnsRecord",
            "metadata": {"name": "www", "namespace": "d", "uid": "u-1"},
            "spec": {"endpoint": "http://127.0.0.1:9000", "zone": "example.org",
                "name": "www", "value": "192.0.2.1", "tokenSecret": "dns-token"},
            "status": status});
        if deleting {
            o["metadata"]["deletionTimestamp"] = json!("2026-12-07T00:00:00Z");
        }
        Observed::new(o)
    }

    fn answer(key: &str, status: u16, body: Value) -> Answer {
        Answer {
            key: key.into(),
            outcome: Outcome::Response(Response {
                status,
                headers: vec![],
                body: serde_json::to_vec(&body).unwrap(),
                truncated: false,
            }),
            at_unix_ms: 0,
        }
    }

    fn stored(value: &str) -> Value {
        json!({"id": "r-7", "zone": "example.org", "name": "www", "type": "A", "value": value, "ttl": 300})
    }

    fn fp(value: &str) -> String {
        Record {
            name: "www".into(),
            record_type: "A".into(),
            value: value.into(),
            ttl: 300,
        }
        .fingerprint("example.org")
    }

    #[test]
    fn a_new_record_is_created_once_and_its_id_kept() {
        let plan = reconcile(&record(json!({}), false)).unwrap();
        assert_eq!(plan.requests.len(), 1);
        let r = &plan.requests[0];
        assert_eq!((r.key.as_str(), r.method.as_str()), (CREATE, "POST"));
        assert_eq!(r.url, "http://127.0.0.1:9000/zones/example.org/records");
        assert_eq!(r.idempotency_key.as_deref(), Some("u-1-create-0"));
        assert!(r.retry);
        let c = r.credential.as_ref().unwrap();
        assert_eq!(
            (c.secret.as_str(), c.key.as_str(), c.prefix.as_str()),
            ("dns-token", "token", "Bearer ")
        );
        let body: Value = serde_json::from_slice(r.body.as_ref().unwrap()).unwrap();
        assert_eq!(
            body,
            json!({"name": "www", "type": "A", "value": "192.0.2.1", "ttl": 300})
        );

        let answered =
            record(json!({}), false).with_answer(answer(CREATE, 201, stored("192.0.2.1")));
        let plan = reconcile(&answered).unwrap();
        assert!(plan.requests.is_empty(), "the key is let go");
        let status = plan.status.unwrap();
        assert_eq!(status["recordId"], "r-7");
        assert_eq!(status["synced"], true);
        assert_eq!(status["creations"], 1);
    }

    #[test]
    fn a_changed_spec_is_put_under_a_new_key_and_a_vanished_record_created_again() {
        let synced =
            json!({"recordId": "r-7", "applied": fp("192.0.2.9"), "synced": true, "creations": 1});
        let plan = reconcile(&record(synced.clone(), false)).unwrap();
        let r = &plan.requests[0];
        let key = format!("update-{}", fp("192.0.2.1"));
        assert_eq!((r.key.as_str(), r.method.as_str()), (key.as_str(), "PUT"));
        assert_eq!(r.url, "http://127.0.0.1:9000/zones/example.org/records/r-7");
        assert_eq!(
            r.idempotency_key.as_deref(),
            Some(format!("u-1-{key}").as_str())
        );

        let done = reconcile(&record(synced.clone(), false).with_answer(answer(
            &key,
            200,
            stored("192.0.2.1"),
        )))
        .unwrap();
        assert!(done.requests.is_empty());
        assert_eq!(done.status.unwrap()["synced"], true);

        let gone = reconcile(&record(synced, false).with_answer(answer(
            &key,
            404,
            json!({"error": "no such record"}),
        )))
        .unwrap();
        let r = &gone.requests[0];
        assert_eq!(
            (r.key.as_str(), r.idempotency_key.as_deref()),
            (CREATE, Some("u-1-create-1"))
        );
    }

    #[test]
    fn failures_wait_and_ask_again_refusals_wait_longer() {
        let failed = reconcile(&record(json!({}), false).with_answer(answer(
            CREATE,
            503,
            json!({"error": "busy"}),
        )))
        .unwrap();
        assert!(failed.requests.is_empty());
        assert_eq!(failed.requeue_after_ms, Some(RETRY_MS));
        assert!(
            failed.status.unwrap()["message"]
                .as_str()
                .unwrap()
                .contains("HTTP 503")
        );
        let refused = Answer {
            key: CREATE.into(),
            outcome: Outcome::Refused(
                "not-granted: http://127.0.0.1:9000 is declared but not granted".into(),
            ),
            at_unix_ms: 0,
        };
        let plan = reconcile(&record(json!({}), false).with_answer(refused)).unwrap();
        assert_eq!(plan.requeue_after_ms, Some(REFUSED_MS));
        assert!(
            plan.status.unwrap()["message"]
                .as_str()
                .unwrap()
                .contains("not-granted")
        );
    }

    #[test]
    fn cleanup_deletes_the_record_and_ends_when_the_api_says_it_is_gone() {
        assert_eq!(cleanup(&record(json!({}), true)).unwrap(), Plan::new());
        let with_id = json!({"recordId": "r-7", "applied": fp("192.0.2.1"), "synced": true});
        let plan = cleanup(&record(with_id.clone(), true)).unwrap();
        let r = &plan.requests[0];
        assert_eq!((r.key.as_str(), r.method.as_str()), (DELETE, "DELETE"));
        assert_eq!(r.idempotency_key.as_deref(), Some("u-1-delete-r-7"));
        for status in [204, 404] {
            let done = cleanup(&record(with_id.clone(), true).with_answer(answer(
                DELETE,
                status,
                json!(null),
            )))
            .unwrap();
            assert!(
                done.requests.is_empty()
                    && done.requeue_after_ms.is_none()
                    && done.actions.is_empty()
            );
        }
        let failed =
            cleanup(&record(with_id, true).with_answer(answer(DELETE, 500, json!({})))).unwrap();
        assert_eq!(
            failed.requeue_after_ms,
            Some(RETRY_MS),
            "not released: called again"
        );
        // A create answered but not yet in the status: its record is deleted too.
        let held = record(json!({}), true).with_answer(answer(CREATE, 201, stored("192.0.2.1")));
        assert_eq!(
            cleanup(&held).unwrap().requests[0].url,
            "http://127.0.0.1:9000/zones/example.org/records/r-7"
        );
    }

    #[test]
    fn a_bad_spec_is_refused_with_its_field() {
        let mut o = record(json!({}), false);
        o.primary["spec"]["type"] = json!("MX");
        assert!(
            matches!(reconcile(&o), Err(ReconcileError::InvalidSpec(m)) if m.contains("spec.type"))
        );
        o.primary["spec"]["type"] = json!("A");
        o.primary["spec"]["name"] = json!("a/b");
        assert!(
            matches!(reconcile(&o), Err(ReconcileError::InvalidSpec(m)) if m.contains("spec.name"))
        );
    }
}
