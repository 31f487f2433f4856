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

/// Counts, per thread, the bytes the host has allocated on its heap (a guest's linear memory
/// is mapped by the engine, not allocated here, so this sees the host's own copies only).
/// A global allocator is unsafe code by nature; this is the only unsafe code of the suite.
#[allow(unsafe_code)]
mod heap {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local! {
        static LIVE: Cell<usize> = const { Cell::new(0) };
        static PEAK: Cell<usize> = const { Cell::new(0) };
    }

    fn grew(by: usize) {
        let _ = LIVE.try_with(|live| {
            let now = live.get() + by;
            live.set(now);
            let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
        });
    }

    fn shrank(by: usize) {
        let _ = LIVE.try_with(|live| live.set(live.get().saturating_sub(by)));
    }

    pub struct Counting;

    // SAFETY: every call is passed on to the system allocator unchanged; the counters are
    // plain thread-local cells that never allocate.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            grew(layout.size());
            unsafe { System.alloc(layout) }
        }
        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            grew(layout.size());
            unsafe { System.alloc_zeroed(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            shrank(layout.size());
            unsafe { System.dealloc(ptr, layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            shrank(layout.size());
            grew(new_size);
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }

    /// Runs `f` and returns its result with the most this thread's heap grew during it.
    pub fn peak_growth<R>(f: impl FnOnce() -> R) -> (R, usize) {
        let start = LIVE.with(Cell::get);
        PEAK.with(|p| p.set(start));
        let r = f();
        (r, PEAK.with(Cell::get).saturating_sub(start))
    }
}

#[global_allocator]
static HEAP: heap::Counting = heap::Counting;

/// An answer over the budget is refused while it still lies in the guest's memory: the host
/// copies none of it. Each of these answers is tens of MiB once lifted into host types (a
/// million Events are 56 MB of records, a 50 MiB error message 50 MiB of string).
#[test]
fn an_answer_over_the_budget_is_refused_before_the_host_copies_it() {
    let sandbox = Sandbox::new(1).unwrap();
    let plugin = hostile(&sandbox, roomy());
    for (mode, figure) in [
        ("events", "1000000 events"),
        ("huge", "1000000 actions"),
        ("long-error", "52428800 bytes"),
        ("long-status", "16777227 bytes"),
    ] {
        let (err, grew) = heap::peak_growth(|| call(&sandbox, &plugin, mode).unwrap_err());
        match err {
            CallError::InvalidOutput(m) => assert!(m.contains(figure), "{mode}: {m}"),
            other => panic!("{mode}: expected invalid output, got {other:?}"),
        }
        println!("{mode}: the host's heap grew by at most {grew} bytes during the call");
        assert!(
            grew < 1 << 20,
            "{mode}: the host copied {grew} bytes of a refused answer"
        );
    }
}
