//! One budget for everything a plugin returns: too many Events, a huge error message or a
//! huge status is refused quickly with the figure, before the host parses or acts on it.

use super::*;

/// Calls mode `mode` with `spec.count` (how many Events, actions or bytes it returns) and
/// returns the refusal's message and how long the call took.
fn refused(mode: &str, count: usize) -> (String, Duration) {
    let sandbox = Sandbox::new(1).unwrap();
    let plugin = hostile(&sandbox, roomy());
    let start = Instant::now();
    let err = call_counted(&sandbox, &plugin, mode, count).unwrap_err();
    let took = start.elapsed();
    match err {
        CallError::InvalidOutput(m) => (m, took),
        other => panic!("{mode}: expected invalid output, got {other:?}"),
    }
}

fn call_counted(
    sandbox: &Sandbox,
    plugin: &LoadedPlugin,
    mode: &str,
    count: usize,
) -> Result<(), CallError> {
    let mut observed = observed(mode);
    observed.primary["spec"]["count"] = count.into();
    sandbox
        .decide_blocking(plugin, Entry::Reconcile, &observed, mode)
        .map(|r| {
            r.expect("no reconcile error");
        })
}

fn roomy() -> Limits {
    Limits {
        memory_bytes: 256 << 20,
        deadline: Duration::from_secs(10),
        ..Limits::default()
    }
}

/// Just over a limit, the answer is read and refused with the exact figure and limit.
#[test]
fn one_over_a_limit_is_refused_with_its_figure() {
    let limits = Limits::default();
    let status_over = limits.max_plan_bytes + 1 - r#"{"text":""}"#.len();
    for (mode, count, message) in [
        ("events", 101, "plan has 101 events, the limit is 100"),
        ("huge", 1001, "plan has 1001 actions, the limit is 1000"),
        (
            "long-error",
            limits.max_error_bytes + 1,
            "error message is 16385 bytes, the limit is 16384",
        ),
        (
            "long-status",
            status_over,
            "plan is 8388609 bytes, the limit is 8388608",
        ),
    ] {
        assert_eq!(refused(mode, count).0, message, "{mode}");
    }
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

/// Far over the budget, an answer is refused while it still lies in the guest's memory: the
/// host copies none of it. Each of these is tens of MiB once copied into host types (a
/// million Events are 56 MB of records, a 50 MiB error message 50 MiB of string).
#[test]
fn far_over_the_budget_an_answer_is_refused_before_the_host_copies_it() {
    let sandbox = Sandbox::new(1).unwrap();
    let plugin = hostile(&sandbox, roomy());
    for (mode, count) in [
        ("events", 1_000_000),
        ("huge", 1_000_000),
        ("long-error", 50 << 20),
        ("long-status", 16 << 20),
    ] {
        let start = Instant::now();
        let (err, grew) =
            heap::peak_growth(|| call_counted(&sandbox, &plugin, mode, count).unwrap_err());
        let took = start.elapsed();
        match err {
            CallError::InvalidOutput(m) => assert!(
                m.starts_with("the plugin handed the host more than") && m.contains("100 events"),
                "{mode}: {m}"
            ),
            other => panic!("{mode}: expected invalid output, got {other:?}"),
        }
        println!("{mode} x {count}: refused in {took:?}; the host's heap grew by {grew} bytes");
        assert!(
            grew < 1 << 20,
            "{mode}: the host copied {grew} bytes of a refused answer"
        );
        assert!(took < Duration::from_secs(5), "{mode}: took {took:?}");
    }
}

/// `[0,0,0,…]` within the output budget as text is some 130 MiB parsed: the host measures
/// what the parse would take before parsing, and refuses it over the call's memory cap,
/// its heap growing by the answer's text alone.
#[test]
fn an_answer_small_as_text_and_huge_parsed_is_refused_before_it_is_parsed() {
    let sandbox = Sandbox::new(1).unwrap();
    let plugin = hostile(&sandbox, Limits::default());
    let text = 8_000_005;
    let start = Instant::now();
    let (err, grew) =
        heap::peak_growth(|| call_counted(&sandbox, &plugin, "amplify", text).unwrap_err());
    let took = start.elapsed();
    match err {
        CallError::InvalidOutput(m) => assert!(
            m.contains("parsed, would take more than 67108864 bytes"),
            "{m}"
        ),
        other => panic!("expected invalid output, got {other:?}"),
    }
    println!("amplify x {text}: refused in {took:?}; the host's heap grew by {grew} bytes");
    assert!(
        grew < 2 * text,
        "the host's heap grew by {grew} bytes for a {text}-byte answer"
    );
}

/// What a parsed answer holds counts against the host-wide guest-memory budget: an answer
/// that fits the call's cap but not the budget fails as `host_memory`; with room, it passes.
#[test]
fn a_parsed_answer_counts_against_the_host_wide_budget() {
    // 500,000 elements: about 32 MB counted, under the 64 MiB cap of a call, over the 24 MiB
    // the active versions have of a 32 MiB budget.
    let count = 1_000_001;
    let tight = Sandbox::with_guest_memory(4, 32 << 20).unwrap();
    let plugin = hostile(&tight, Limits::default());
    match call_counted(&tight, &plugin, "amplify", count) {
        Err(CallError::HostMemory(limit)) => {
            assert_eq!(limit, tight.engine().guest_memory().limit())
        }
        other => panic!("expected the host budget to refuse it, got {other:?}"),
    }
    assert_eq!(tight.engine().guest_memory().in_use(), 0, "given back");
    let roomy = Sandbox::with_guest_memory(4, 128 << 20).unwrap();
    let plugin = hostile(&roomy, Limits::default());
    call_counted(&roomy, &plugin, "amplify", count).expect("fits the budget");
    assert_eq!(roomy.engine().guest_memory().in_use(), 0, "given back");
}

/// The count made before parsing is an upper bound of what `serde_json` allocates for the
/// value, for the shapes a hostile answer can take and for a real object.
#[test]
fn the_measure_before_parsing_bounds_what_the_parse_allocates() {
    use wasmop::runtime::footprint;
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p-1",
        "namespace": "default", "labels": {"app": "p", "wasmop.dev/shard": "0"},
        "ownerReferences": [{"apiVersion": "app.example.com/v1alpha1", "kind": "PodReplica",
        "name": "p", "uid": "8b5f", "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"containers": [{"name": "busybox", "image": "busybox", "command": ["sleep", "3600"]}]}})
    .to_string();
    let shapes = [
        ("zeros", format!("[{}0]", "0,".repeat(100_000))),
        ("empty arrays", format!("[{}[]]", "[],".repeat(100_000))),
        ("empty objects", format!("[{}{{}}]", "{},".repeat(100_000))),
        (
            "one-letter keys",
            format!(
                "{{{}}}",
                (0..50_000)
                    .map(|i| format!("\"{i}\":0"))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        ),
        ("nested", format!("{}{}", "[".repeat(99), "]".repeat(99))),
        ("strings", format!("[{}\"\"]", "\"a\",".repeat(100_000))),
        ("pods", format!("[{}]", vec![pod.as_str(); 1000].join(","))),
    ];
    for (what, text) in shapes {
        let counted = footprint::of_json(&text, usize::MAX).expect("within");
        let (value, grew) =
            heap::peak_growth(|| serde_json::from_str::<serde_json::Value>(&text).unwrap());
        drop(value);
        println!(
            "{what}: {} bytes of text, {grew} allocated, {counted} counted",
            text.len()
        );
        assert!(
            counted >= grew,
            "{what}: {grew} allocated, {counted} counted"
        );
    }
}
