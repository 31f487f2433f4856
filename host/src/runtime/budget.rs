//! One budget for everything a plugin returns, checked before anything it returned is
//! parsed or acted on: the number of actions and of Events in a plan, the bytes of every
//! string in it (objects, status, Event reasons and messages, delete references), the bytes
//! of an error message, and the lengths of what `info()` declares. Over the budget, the
//! answer is refused with the figure and the limit (`InvalidOutput` for a decision, an
//! invalid info for a load): a plugin cannot make the host send a million Events, write a
//! multi-megabyte message into a status, or put a novel into a metric label.
//!
//! The sizes are measured on the generated types by `bindings` (this module sees plain
//! numbers only, so the policy is testable without a component).

use crate::runtime::limits::Limits;

/// The measured size of a returned plan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlanShape {
    /// Number of actions.
    pub actions: usize,
    /// Number of Events.
    pub events: usize,
    /// Bytes of every string in the plan together.
    pub bytes: usize,
}

/// The measured size of what `info()` returned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InfoShape {
    /// Bytes of the version string.
    pub version: usize,
    /// Bytes of the longest name (of a kind, plural, group, relation, finalizer, selector, field path).
    pub longest_name: usize,
    /// Number of relations plus permissions.
    pub declarations: usize,
    /// Bytes of every string together, the CRD included.
    pub bytes: usize,
}

/// Longest plugin version accepted (it is shown in statuses and metric labels).
pub const MAX_VERSION_BYTES: usize = 64;
/// Longest name in `info()`: Kubernetes' longest names (a DNS subdomain, a qualified
/// finalizer) fit in it.
pub const MAX_NAME_BYTES: usize = 320;
/// Most relations plus permissions one plugin may declare.
pub const MAX_DECLARATIONS: usize = 64;
/// Largest `info()` answer, the CRD included (a ConfigMap holds at most 1 MiB of plugin).
pub const MAX_INFO_BYTES: usize = 2 << 20;

/// Checks a plan against the per-call limits.
pub fn check_plan(plan: PlanShape, limits: &Limits) -> Result<(), String> {
    if plan.actions > limits.max_actions {
        return Err(format!(
            "plan has {} actions, the limit is {}",
            plan.actions, limits.max_actions
        ));
    }
    if plan.events > limits.max_events {
        return Err(format!(
            "plan has {} events, the limit is {}",
            plan.events, limits.max_events
        ));
    }
    if plan.bytes > limits.max_plan_bytes {
        return Err(format!(
            "plan is {} bytes, the limit is {}",
            plan.bytes, limits.max_plan_bytes
        ));
    }
    Ok(())
}

/// Checks the message of a `reconcile-error` answer.
pub fn check_error(message_bytes: usize, limits: &Limits) -> Result<(), String> {
    if message_bytes > limits.max_error_bytes {
        return Err(format!(
            "error message is {message_bytes} bytes, the limit is {}",
            limits.max_error_bytes
        ));
    }
    Ok(())
}

/// Checks what `info()` returned, before it is converted or validated.
pub fn check_info(info: InfoShape) -> Result<(), String> {
    if info.version > MAX_VERSION_BYTES {
        return Err(format!(
            "version is {} bytes, the limit is {MAX_VERSION_BYTES}",
            info.version
        ));
    }
    if info.longest_name > MAX_NAME_BYTES {
        return Err(format!(
            "a declared name is {} bytes, the limit is {MAX_NAME_BYTES}",
            info.longest_name
        ));
    }
    if info.declarations > MAX_DECLARATIONS {
        return Err(format!(
            "{} relations and permissions declared, the limit is {MAX_DECLARATIONS}",
            info.declarations
        ));
    }
    if info.bytes > MAX_INFO_BYTES {
        return Err(format!(
            "info is {} bytes, the limit is {MAX_INFO_BYTES}",
            info.bytes
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_within_every_limit_passes_and_each_limit_names_its_figure() {
        let limits = Limits::default();
        let fine = PlanShape {
            actions: limits.max_actions,
            events: limits.max_events,
            bytes: limits.max_plan_bytes,
        };
        assert_eq!(check_plan(fine, &limits), Ok(()));
        let too_many_events = PlanShape {
            events: 1_000_000,
            ..fine
        };
        assert_eq!(
            check_plan(too_many_events, &limits),
            Err(format!(
                "plan has 1000000 events, the limit is {}",
                limits.max_events
            ))
        );
        let err = check_plan(
            PlanShape {
                actions: limits.max_actions + 1,
                ..fine
            },
            &limits,
        )
        .unwrap_err();
        assert!(err.contains("actions"), "{err}");
        let err = check_plan(
            PlanShape {
                bytes: limits.max_plan_bytes + 1,
                ..fine
            },
            &limits,
        )
        .unwrap_err();
        assert!(
            err.contains(&format!("{} bytes", limits.max_plan_bytes + 1)),
            "{err}"
        );
    }

    #[test]
    fn error_messages_have_a_limit() {
        let limits = Limits::default();
        assert_eq!(check_error(limits.max_error_bytes, &limits), Ok(()));
        let err = check_error(50 << 20, &limits).unwrap_err();
        assert!(err.contains("52428800 bytes"), "{err}");
    }

    #[test]
    fn info_limits_cover_version_names_declarations_and_size() {
        let fine = InfoShape {
            version: 5,
            longest_name: 40,
            declarations: 3,
            bytes: 10_000,
        };
        assert_eq!(check_info(fine), Ok(()));
        for (shape, word) in [
            (
                InfoShape {
                    version: 65,
                    ..fine
                },
                "version",
            ),
            (
                InfoShape {
                    longest_name: 321,
                    ..fine
                },
                "name",
            ),
            (
                InfoShape {
                    declarations: 65,
                    ..fine
                },
                "relations",
            ),
            (
                InfoShape {
                    bytes: MAX_INFO_BYTES + 1,
                    ..fine
                },
                "info is",
            ),
        ] {
            let err = check_info(shape).unwrap_err();
            assert!(err.contains(word), "{word}: {err}");
        }
    }
}
