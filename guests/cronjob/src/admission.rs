//! Admission and conversion, as the tutorial's webhooks: defaults for the policy, suspension
//! and history limits; a schedule that parses and a name short enough for the Jobs' names;
//! conversion between v1 (storage, `spec.schedule` a string) and v2 (the schedule by field).

use serde_json::{Map, Value, json};
use wasmop_sdk::{AdmissionRequest, FieldError, Operation, Verdict};

use crate::cron::{self, Schedule};
use crate::decide::{DEFAULT_FAILED_LIMIT, DEFAULT_SUCCESSFUL_LIMIT};
use crate::types::GROUP;

/// The longest CronJob name: a Job's name is the CronJob's, a dash and ten digits, and a
/// Job's name must fit a label (63 characters). The test-only `strict` build allows 20.
pub const MAX_NAME: usize = if cfg!(feature = "strict") { 20 } else { 52 };
/// The storage version.
pub const V1: &str = "v1";
/// The structured-schedule version.
pub const V2: &str = "v2";
/// The names of v2's schedule fields, in cron order.
pub const V2_FIELDS: [&str; 5] = ["minute", "hour", "dayOfMonth", "month", "dayOfWeek"];

/// Refuses a schedule that does not parse and a name longer than [`MAX_NAME`].
pub fn validate(request: &AdmissionRequest) -> Verdict {
    if request.operation == Operation::Delete {
        return Verdict::allow();
    }
    let Some(object) = &request.object else {
        return Verdict::allow();
    };
    // A v2 object is judged by its v1 form (its schedule joined).
    let object = match convert(object.clone(), V1) {
        Ok(o) => o,
        Err(e) => return Verdict::invalid(vec![field("spec.schedule", None, e)]),
    };
    let mut errors = Vec::new();
    if let Some(name) = object.pointer("/metadata/name").and_then(Value::as_str)
        && name.len() > MAX_NAME
    {
        errors.push(field(
            "metadata.name",
            Some(json!(name)),
            format!("must be no more than {MAX_NAME} characters"),
        ));
    }
    match object.pointer("/spec/schedule").and_then(Value::as_str) {
        Some(schedule) => {
            if let Err(e) = Schedule::parse(schedule) {
                errors.push(field("spec.schedule", Some(json!(schedule)), e));
            }
        }
        None => errors.push(field(
            "spec.schedule",
            None,
            "a schedule is required".into(),
        )),
    }
    if errors.is_empty() {
        Verdict::allow()
    } else {
        Verdict::invalid(errors)
    }
}

fn field(path: &str, value: Option<Value>, detail: String) -> FieldError {
    FieldError {
        path: path.into(),
        value,
        detail,
    }
}

/// Fills in `concurrencyPolicy: Allow`, `suspend: false` and the history limits (3
/// successful, 1 failed) when absent.
pub fn default(mut object: Value) -> Value {
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
        spec.entry("concurrencyPolicy")
            .or_insert_with(|| json!("Allow"));
        spec.entry("suspend").or_insert_with(|| json!(false));
        spec.entry("successfulJobsHistoryLimit")
            .or_insert_with(|| json!(DEFAULT_SUCCESSFUL_LIMIT));
        spec.entry("failedJobsHistoryLimit")
            .or_insert_with(|| json!(DEFAULT_FAILED_LIMIT));
    }
    object
}

/// The version of an object, from its `apiVersion`.
fn version_of(object: &Value) -> Option<&str> {
    object
        .get("apiVersion")
        .and_then(Value::as_str)?
        .rsplit_once('/')
        .map(|(_, v)| v)
}

/// Converts a CronJob to `to_version` (`v1` or `v2`). v2's absent schedule fields are `*`;
/// a v1 schedule must have five fields (a descriptor such as `@daily` is expanded).
pub fn convert(mut object: Value, to_version: &str) -> Result<Value, String> {
    if to_version != V1 && to_version != V2 {
        return Err(format!("CronJob has no version {to_version}"));
    }
    let from = version_of(&object).unwrap_or(V1).to_string();
    if from != to_version
        && let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut)
        && let Some(schedule) = spec.get("schedule")
    {
        let converted = match (from.as_str(), to_version) {
            (V2, V1) => {
                let parts: Vec<&str> = V2_FIELDS
                    .iter()
                    .map(|f| schedule.get(f).and_then(Value::as_str).unwrap_or("*"))
                    .collect();
                json!(parts.join(" "))
            }
            (V1, V2) => {
                let text = schedule.as_str().unwrap_or_default();
                let parts = cron::fields(text)
                    .ok_or_else(|| format!("schedule `{text}` has not five fields"))?;
                let fields: Map<String, Value> = V2_FIELDS
                    .iter()
                    .zip(parts)
                    .map(|(f, p)| (f.to_string(), json!(p)))
                    .collect();
                Value::Object(fields)
            }
            (other, _) => return Err(format!("CronJob has no version {other}")),
        };
        spec.insert("schedule".into(), converted);
    }
    object["apiVersion"] = json!(format!("{GROUP}/{to_version}"));
    Ok(object)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create(object: Value) -> AdmissionRequest {
        AdmissionRequest {
            operation: Operation::Create,
            object: Some(object),
            old_object: None,
            user: "alice".into(),
            dry_run: false,
        }
    }

    fn cronjob(name: &str, schedule: &str) -> Value {
        json!({"apiVersion": "batch.tutorial.kubebuilder.io/v1", "kind": "CronJob",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"schedule": schedule, "jobTemplate": {"spec": {}}}})
    }

    #[test]
    fn a_schedule_that_does_not_parse_is_refused_with_its_value() {
        assert!(validate(&create(cronjob("ok", "*/1 * * * *"))).allowed);
        let v = validate(&create(cronjob("ok", "*/1 * * *")));
        assert!(!v.allowed);
        assert_eq!(v.fields.len(), 1);
        assert_eq!(v.fields[0].path, "spec.schedule");
        assert_eq!(v.fields[0].value, Some(json!("*/1 * * *")));
        let v = validate(&create(cronjob("ok", "61 * * * *")));
        assert!(!v.allowed && v.fields[0].detail.contains("minute"));
    }

    #[test]
    fn a_name_longer_than_52_is_refused() {
        let long = "a".repeat(53);
        let v = validate(&create(cronjob(&long, "@daily")));
        assert!(!v.allowed);
        assert_eq!(v.fields[0].path, "metadata.name");
        assert_eq!(v.fields[0].value, Some(json!(long)));
        assert!(validate(&create(cronjob(&"a".repeat(52), "@daily"))).allowed);
        // Both at once.
        let v = validate(&create(cronjob(&long, "nope")));
        assert_eq!(v.fields.len(), 2);
    }

    #[test]
    fn deletes_are_allowed_and_v2_is_judged_by_its_v1_form() {
        let delete = AdmissionRequest {
            operation: Operation::Delete,
            object: None,
            old_object: Some(cronjob("x", "nope")),
            user: "alice".into(),
            dry_run: false,
        };
        assert!(validate(&delete).allowed);
        let mut v2 = convert(cronjob("ok", "0 * * * *"), V2).unwrap();
        assert!(validate(&create(v2.clone())).allowed);
        v2["spec"]["schedule"]["hour"] = json!("25");
        let v = validate(&create(v2));
        assert_eq!(v.fields[0].value, Some(json!("0 25 * * *")));
    }

    #[test]
    fn defaults_fill_only_what_is_absent() {
        let d = default(cronjob("a", "@daily"));
        assert_eq!(d["spec"]["concurrencyPolicy"], "Allow");
        assert_eq!(d["spec"]["suspend"], false);
        assert_eq!(d["spec"]["successfulJobsHistoryLimit"], 3);
        assert_eq!(d["spec"]["failedJobsHistoryLimit"], 1);
        let mut set = cronjob("a", "@daily");
        set["spec"]["concurrencyPolicy"] = json!("Forbid");
        set["spec"]["suspend"] = json!(true);
        set["spec"]["successfulJobsHistoryLimit"] = json!(0);
        set["spec"]["failedJobsHistoryLimit"] = json!(5);
        assert_eq!(default(set.clone()), set);
        assert_eq!(default(d.clone()), d);
    }

    #[test]
    fn conversion_round_trips() {
        let v1 = cronjob("a", "*/5 1 * JAN 0");
        let v2 = convert(v1.clone(), V2).unwrap();
        assert_eq!(v2["apiVersion"], "batch.tutorial.kubebuilder.io/v2");
        assert_eq!(
            v2["spec"]["schedule"],
            json!({"minute": "*/5", "hour": "1", "dayOfMonth": "*", "month": "JAN", "dayOfWeek": "0"})
        );
        assert_eq!(v2["spec"]["jobTemplate"], v1["spec"]["jobTemplate"]);
        assert_eq!(convert(v2.clone(), V1).unwrap(), v1);
        assert_eq!(convert(v2.clone(), V2).unwrap(), v2);
        assert_eq!(convert(v1.clone(), V1).unwrap(), v1);
        // Absent v2 fields are `*`.
        let mut sparse = v2.clone();
        sparse["spec"]["schedule"] = json!({"minute": "0", "hour": "3"});
        assert_eq!(
            convert(sparse, V1).unwrap()["spec"]["schedule"],
            "0 3 * * *"
        );
        // Descriptors are spelled out; what is not a schedule does not convert.
        let daily = convert(cronjob("a", "@daily"), V2).unwrap();
        assert_eq!(daily["spec"]["schedule"]["hour"], "0");
        assert!(convert(cronjob("a", "* *"), V2).is_err());
        assert!(convert(v1, "v3").is_err());
    }

    #[test]
    fn status_and_other_fields_survive_conversion() {
        let mut v1 = cronjob("a", "0 0 * * *");
        v1["spec"]["concurrencyPolicy"] = json!("Replace");
        v1["spec"]["startingDeadlineSeconds"] = json!(60);
        v1["status"] = json!({"lastScheduleTime": "2026-01-01T00:00:00Z",
            "active": [{"name": "a-1767225600"}]});
        let back = convert(convert(v1.clone(), V2).unwrap(), V1).unwrap();
        assert_eq!(back, v1);
    }
}
