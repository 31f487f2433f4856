//! One budget for everything a plugin returns: too many Events, a huge error message or a
//! huge status is refused quickly with the figure, before the host parses or acts on it.

use super::*;

fn refused(mode: &str, limits: Limits) -> (String, Duration) {
    let sandbox = Sandbox::new(1).unwrap();
    let plugin = hostile(&sandbox, limits);
    let start = Instant::now();
    let err = call(&sandbox, &plugin, mode).unwrap_err();
    let took = start.elapsed();
    match err {
        CallError::InvalidOutput(m) => (m, took),
        other => panic!("{mode}: expected invalid output, got {other:?}"),
    }
}

fn roomy() -> Limits {
    Limits {
        memory_bytes: 256 << 20,
        deadline: Duration::from_secs(10),
        ..Limits::default()
    }
}

#[test]
fn a_million_empty_events_are_refused_by_count() {
    let (m, _) = refused("events", roomy());
    assert_eq!(m, "plan has 1000000 events, the limit is 100");
}

#[test]
fn a_50_mib_error_message_is_refused_by_size_and_not_printed() {
    let (m, took) = refused("long-error", roomy());
    assert_eq!(m, "error message is 52428800 bytes, the limit is 16384");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    println!("a 50 MiB error message refused after {took:?}");
}

#[test]
fn a_16_mib_status_counts_against_the_plan_bytes() {
    let (m, _) = refused("long-status", roomy());
    assert!(m.starts_with("plan is 16777227 bytes"), "{m}");
}
