//! Nothing a guest can do blocks a host thread past its deadline: its time stands still, so
//! a sleep ends at once, and waiting for time to pass only spins until the deadline stops
//! it. Each call runs on a thread of its own and must end within a bound (the upper bound is
//! asserted, not only the lower), so a regression fails instead of hanging the suite.

use std::sync::mpsc;

use super::*;

/// Deadline of the hostile calls here.
const DEADLINE: Duration = Duration::from_millis(200);
/// How long after its deadline a call may end: the epoch tick plus a generous allowance
/// for a loaded machine.
const SLACK: Duration = Duration::from_millis(800);

/// Runs one call of `mode` on a thread; returns its result and how long it took, or panics
/// when it has not ended within `bound`.
fn timed_call(mode: &'static str, bound: Duration) -> (Result<(), CallError>, Duration) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let sandbox = Sandbox::new(1).unwrap();
        let plugin = hostile(
            &sandbox,
            Limits {
                deadline: DEADLINE,
                ..short_limits()
            },
        );
        let start = Instant::now();
        let result = call(&sandbox, &plugin, mode);
        let _ = tx.send((result, start.elapsed()));
    });
    rx.recv_timeout(bound)
        .unwrap_or_else(|_| panic!("mode `{mode}` did not end within {bound:?}"))
}

#[test]
fn an_hour_of_sleep_ends_at_once_because_guest_time_stands_still() {
    let (result, took) = timed_call("sleep", DEADLINE + SLACK + Duration::from_secs(5));
    result.expect("the guest wakes up and answers");
    assert!(took < DEADLINE, "the sleep took {took:?}");
    println!("an hour of guest sleep took {took:?}");
}

#[test]
fn sleeping_or_waiting_in_a_loop_is_stopped_at_the_deadline() {
    for mode in ["sleep-loop", "wait"] {
        let (result, took) = timed_call(mode, DEADLINE + SLACK + Duration::from_secs(5));
        assert_eq!(result, Err(CallError::Timeout(DEADLINE)), "{mode}");
        assert!(took >= DEADLINE, "{mode}: stopped early, after {took:?}");
        assert!(
            took <= DEADLINE + SLACK,
            "{mode}: stopped late, after {took:?}"
        );
        println!("{mode} stopped after {took:?} (deadline {DEADLINE:?})");
    }
}

#[test]
fn stdin_is_closed_not_waited_on() {
    let (result, took) = timed_call("stdin", DEADLINE + SLACK + Duration::from_secs(5));
    result.expect("reading stdin finds its end");
    assert!(took < DEADLINE, "reading stdin took {took:?}");
}

#[test]
fn healthy_calls_answer_while_every_permit_is_held_by_a_sleeper() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let permits = 2;
        let sandbox = Sandbox::new(permits).unwrap();
        let sleeper = Arc::new(hostile(
            &sandbox,
            Limits {
                deadline: DEADLINE,
                ..short_limits()
            },
        ));
        let good = Arc::new(hostile(&sandbox, Limits::default()));
        let sleepers: Vec<_> = (0..permits)
            .map(|i| {
                let (sandbox, sleeper) = (sandbox.clone(), sleeper.clone());
                tokio::spawn(async move {
                    sandbox
                        .decide(
                            sleeper,
                            Entry::Reconcile,
                            observed("sleep-loop"),
                            format!("s{i}"),
                        )
                        .await
                })
            })
            .collect();
        // The sleepers hold every permit now; a healthy call waits for one of them to be
        // stopped at its deadline, never longer.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let start = Instant::now();
        let answer = tokio::time::timeout(
            DEADLINE + SLACK + Duration::from_secs(5),
            sandbox.decide(good, Entry::Reconcile, observed("ok"), "ok".into()),
        )
        .await
        .expect("the healthy call got a permit");
        let took = start.elapsed();
        assert!(matches!(answer, Ok(Ok(_))), "{answer:?}");
        assert!(took <= DEADLINE + SLACK, "the healthy call waited {took:?}");
        for s in sleepers {
            assert_eq!(s.await.unwrap(), Err(CallError::Timeout(DEADLINE)));
        }
        println!(
            "a healthy call answered after {took:?} with {permits} sleepers holding every permit"
        );
    });
}
