//! The one wasmtime [`Engine`] of the process and the thread that advances its epoch.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::runtime::function_cache::{DEFAULT_CAP_BYTES, FunctionCache};
use crate::runtime::limits::{GuestMemory, MAX_MEMORY_BYTES};

/// How often the epoch advances; deadlines are rounded up to a multiple of this.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);

/// How much of each pooled linear memory and table stays mapped between calls (reset with
/// memset instead of returned to the kernel and faulted in again on the next call). Where
/// the kernel has the `PAGEMAP_SCAN` ioctl (Linux 6.7+), only the pages the call dirtied
/// are reset (`pagemap_scan`); elsewhere the whole prefix is.
const KEEP_RESIDENT_BYTES: usize = 2 << 20;

/// Core module instances one component instance may hold (CPython's component needs 14).
pub const MAX_CORE_INSTANCES_PER_COMPONENT: u32 = 32;

/// Sizing of the engine's pooling allocator.
#[derive(Debug, Clone, Copy)]
pub struct EngineConfig {
    /// Number of instances that may be alive at once (calls in flight plus loading).
    pub max_instances: u32,
    /// Guest memory the host hands out at once over all calls of active versions
    /// ([`GuestMemory`]); `usize::MAX` for no budget beyond each call's cap.
    pub guest_memory_bytes: usize,
    /// The candidates' own budget (shadow decisions), apart from the active versions':
    /// a candidate at its cap never takes memory an active decision needs.
    pub candidate_memory_bytes: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_instances: 64,
            guest_memory_bytes: usize::MAX,
            candidate_memory_bytes: usize::MAX,
        }
    }
}

/// A wasmtime engine (Cranelift with its incremental cache, pooling allocator, epoch
/// interruption) plus the ticker thread that drives epoch deadlines. The ticker advances
/// the epoch only while a call runs ([`SandboxEngine::ticking`]) and is parked otherwise: a
/// host at rest is not woken 200 times a second. Dropping the last clone stops the ticker.
#[derive(Clone)]
pub struct SandboxEngine {
    inner: Arc<Inner>,
}

struct Inner {
    engine: Engine,
    functions: Arc<FunctionCache>,
    guest_memory: Arc<GuestMemory>,
    candidate_memory: Arc<GuestMemory>,
    stop: Arc<AtomicBool>,
    /// Calls in flight ([`Ticking`]).
    calls: Arc<AtomicUsize>,
    /// Epoch ticks so far.
    ticks: Arc<AtomicU64>,
    ticker: Option<JoinHandle<()>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// A call in flight, for the epoch ticker ([`SandboxEngine::ticking`]): while one is alive
/// the epoch advances every [`EPOCH_TICK`].
pub(crate) struct Ticking {
    calls: Arc<AtomicUsize>,
}

impl Drop for Ticking {
    fn drop(&mut self) {
        self.calls.fetch_sub(1, Ordering::AcqRel);
    }
}

impl SandboxEngine {
    /// Builds the engine and starts its epoch ticker.
    pub fn new(cfg: EngineConfig) -> wasmtime::Result<Self> {
        // Sized from the components the host runs (`make bench` prints them; the counts
        // from wasmtime's pooling errors): per component instance, the Rust PodReplica has 3
        // core instances, 1 memory and 2 tables; TypeScript (StarlingMonkey) 4, 1, 2; Python
        // (CPython, its libraries as separate modules, the WASI adapter) 14, 1, 2. Per
        // component: room for more than twice the largest language's core instances, and
        // spare memories and tables. In total: every instance alive at once may be the
        // largest language's (a pool sized for Rust ran out at the eighth concurrent Python
        // call). A slot is address space reserved, not memory used.
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(cfg.max_instances)
            .total_core_instances(cfg.max_instances * MAX_CORE_INSTANCES_PER_COMPONENT)
            .total_memories(cfg.max_instances * 2)
            .total_tables(cfg.max_instances * 4)
            .max_memories_per_component(2)
            .max_memory_size(MAX_MEMORY_BYTES)
            .max_core_instances_per_component(MAX_CORE_INSTANCES_PER_COMPONENT)
            .max_tables_per_component(8)
            .linear_memory_keep_resident(KEEP_RESIDENT_BYTES)
            .table_keep_resident(KEEP_RESIDENT_BYTES)
            .pagemap_scan(Enabled::Auto);
        let functions = Arc::new(FunctionCache::new(DEFAULT_CAP_BYTES));
        let mut config = Config::new();
        config.enable_incremental_compilation(functions.clone())?;
        config
            .strategy(wasmtime::Strategy::Cranelift)
            .cranelift_opt_level(wasmtime::OptLevel::Speed)
            .epoch_interruption(true)
            .wasm_component_model(true)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&config)?;
        let stop = Arc::new(AtomicBool::new(false));
        let calls = Arc::new(AtomicUsize::new(0));
        let ticks = Arc::new(AtomicU64::new(0));
        let ticker = {
            let (engine, stop) = (engine.clone(), stop.clone());
            let (calls, ticks) = (calls.clone(), ticks.clone());
            std::thread::Builder::new()
                .name("wasmop-epoch".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        if calls.load(Ordering::Acquire) == 0 {
                            // Woken by the next call (an unpark before this park makes it
                            // return at once) or by the engine's drop.
                            std::thread::park();
                            continue;
                        }
                        std::thread::sleep(EPOCH_TICK);
                        engine.increment_epoch();
                        ticks.fetch_add(1, Ordering::Relaxed);
                    }
                })?
        };
        Ok(SandboxEngine {
            inner: Arc::new(Inner {
                engine,
                functions,
                guest_memory: GuestMemory::new(cfg.guest_memory_bytes),
                candidate_memory: GuestMemory::new(cfg.candidate_memory_bytes),
                stop,
                calls,
                ticks,
                ticker: Some(ticker),
            }),
        })
    }

    /// Marks a call in flight until the guard drops: the epoch advances meanwhile (its
    /// deadline is counted in ticks from now). Take it before setting the deadline.
    pub(crate) fn ticking(&self) -> Ticking {
        let calls = self.inner.calls.clone();
        if calls.fetch_add(1, Ordering::AcqRel) == 0
            && let Some(t) = &self.inner.ticker
        {
            t.thread().unpark();
        }
        Ticking { calls }
    }

    /// How many times the epoch advanced since the engine was built (what the tests look
    /// at).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn ticks(&self) -> u64 {
        self.inner.ticks.load(Ordering::Relaxed)
    }

    /// The wasmtime engine.
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// The guest memory budget the calls of active versions draw on (and `info()`).
    pub fn guest_memory(&self) -> &Arc<GuestMemory> {
        &self.inner.guest_memory
    }

    /// The candidates' own guest memory budget.
    pub fn candidate_memory(&self) -> &Arc<GuestMemory> {
        &self.inner.candidate_memory
    }

    /// The compiled functions kept for the next version (see [`FunctionCache`]).
    pub fn functions(&self) -> &FunctionCache {
        &self.inner.functions
    }

    /// Number of epoch ticks that covers `deadline`. The first tick may come at any
    /// moment after the call starts, so one tick is added: a call is never stopped before
    /// its deadline, and at most one tick after it.
    pub fn ticks_for(deadline: Duration) -> u64 {
        let tick = EPOCH_TICK.as_nanos();
        deadline.as_nanos().div_ceil(tick) as u64 + 1
    }

    /// A fingerprint of the wasmtime version and engine configuration, for cache keys.
    pub fn fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.inner
            .engine
            .precompile_compatibility_hash()
            .hash(&mut h);
        h.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_epoch_advances_only_while_a_call_runs() {
        let engine = SandboxEngine::new(EngineConfig::default()).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(engine.ticks(), 0, "ticked with no call in flight");
        let call = engine.ticking();
        let started = std::time::Instant::now();
        while engine.ticks() < 3 {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "no tick while a call runs"
            );
            std::thread::sleep(EPOCH_TICK);
        }
        drop(call);
        let at_end = engine.ticks();
        std::thread::sleep(Duration::from_millis(100));
        // The tick under way when the call ended may still land; then none.
        assert!(
            engine.ticks() <= at_end + 1,
            "ticked {} times after the last call ended",
            engine.ticks() - at_end
        );
    }

    #[test]
    fn deadline_rounds_up_to_whole_ticks() {
        assert_eq!(SandboxEngine::ticks_for(Duration::from_millis(1)), 2);
        assert_eq!(SandboxEngine::ticks_for(Duration::from_millis(5)), 2);
        assert_eq!(SandboxEngine::ticks_for(Duration::from_millis(6)), 3);
        assert_eq!(SandboxEngine::ticks_for(Duration::from_secs(1)), 201);
    }

    /// Five functions that call each other; `$new` (when given) goes first, shifting every
    /// index, and `$last` returns `last`.
    fn module(new: bool, last: i32) -> String {
        let first = if new {
            "(func $new (param i32) (result i32) local.get 0 i32.const 99 i32.mul)"
        } else {
            ""
        };
        format!(
            r#"(module (memory 1)
              {first}
              (func $sum (param i32 i32) (result i32) local.get 0 local.get 1 i32.add)
              (func $twice (param i32) (result i32) local.get 0 local.get 0 call $sum)
              (func $load (param i32) (result i32) local.get 0 i32.load call $twice)
              (func $loop (param i32) (result i32) (local i32)
                (block (loop
                  local.get 0 i32.eqz br_if 1
                  local.get 1 local.get 0 call $load i32.add local.set 1
                  local.get 0 i32.const 1 i32.sub local.set 0 br 0))
                local.get 1)
              (func $last (result i32) i32.const {last})
              (export "loop" (func $loop)) (export "last" (func $last)))"#
        )
    }

    #[test]
    fn a_new_version_compiles_only_what_changed() {
        let engine = SandboxEngine::new(EngineConfig {
            max_instances: 1,
            ..EngineConfig::default()
        })
        .unwrap();
        wasmtime::Module::new(engine.engine(), module(false, 1)).unwrap();
        let (hits0, misses0) = engine.functions().hits_and_misses();
        assert_eq!(hits0, 0, "nothing to reuse at first");
        assert!(misses0 >= 5, "every function compiled: {misses0}");
        // Packed after the compile, as the sandbox does: the entries serve as before.
        engine.functions().pack();
        // One function added in front (every index shifts), one changed: the four others
        // and what they share come from the cache.
        wasmtime::Module::new(engine.engine(), module(true, 2)).unwrap();
        let (hits, misses) = engine.functions().hits_and_misses();
        assert!(hits - hits0 >= 4, "reused {} functions", hits - hits0);
        assert!(
            misses - misses0 >= 2 && misses - misses0 < misses0,
            "compiled {} again (first time {misses0})",
            misses - misses0
        );
        assert!(engine.functions().bytes() > 0);
    }
}
