//! Status conditions following Kubernetes conventions, with transition times that only
//! move when the condition's status changes (so an unchanged world yields an unchanged
//! status).

pub use wasmop_contract::Condition;

/// Sets condition `type_` in `conditions`, keeping the old transition time when the status
/// did not change.
pub fn set_condition(conditions: &mut Vec<Condition>, previous: &[Condition], mut new: Condition) {
    if let Some(old) = previous.iter().find(|c| c.type_ == new.type_)
        && old.status == new.status
    {
        new.last_transition_time = old.last_transition_time.clone();
    }
    conditions.retain(|c| c.type_ != new.type_);
    conditions.push(new);
}

/// Builds a condition.
pub fn condition(
    type_: &str,
    ok: bool,
    reason: &str,
    message: impl Into<String>,
    now_rfc3339: &str,
    generation: Option<i64>,
) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: if ok { "True" } else { "False" }.to_string(),
        reason: reason.to_string(),
        message: message.into(),
        last_transition_time: now_rfc3339.to_string(),
        observed_generation: generation,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_time_moves_only_on_status_change() {
        let prev = vec![condition("Ready", true, "Ok", "", "t1", Some(1))];
        let mut out = vec![];
        set_condition(
            &mut out,
            &prev,
            condition("Ready", true, "Ok", "", "t2", Some(2)),
        );
        assert_eq!(out[0].last_transition_time, "t1");
        let mut out = vec![];
        set_condition(
            &mut out,
            &prev,
            condition("Ready", false, "Scaling", "", "t3", Some(2)),
        );
        assert_eq!(out[0].last_transition_time, "t3");
    }
}
