//! The one wasmtime [`Engine`] of the process and the thread that advances its epoch.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::limits::MAX_MEMORY_BYTES;

/// How often the epoch advances; deadlines are rounded up to a multiple of this.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);

/// How much of each pooled linear memory and table stays mapped between calls (reset with
/// memset instead of returned to the kernel and faulted in again on the next call). Where
/// the kernel has the `PAGEMAP_SCAN` ioctl (Linux 6.7+), only the pages the call dirtied
/// are reset (`pagemap_scan`); elsewhere the whole prefix is.
const KEEP_RESIDENT_BYTES: usize = 2 << 20;

/// Sizing of the engine's pooling allocator.
#[derive(Debug, Clone, Copy)]
pub struct EngineConfig {
    /// Number of instances that may be alive at once (calls in flight plus loading).
    pub max_instances: u32,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig { max_instances: 64 }
    }
}

/// A wasmtime engine (Cranelift, pooling allocator, epoch interruption) plus the ticker
/// thread that drives epoch deadlines. Dropping the last clone stops the ticker.
#[derive(Clone)]
pub struct SandboxEngine {
    inner: Arc<Inner>,
}

struct Inner {
    engine: Engine,
    stop: Arc<AtomicBool>,
    ticker: Option<JoinHandle<()>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
    }
}

impl SandboxEngine {
    /// Builds the engine and starts its epoch ticker.
    pub fn new(cfg: EngineConfig) -> wasmtime::Result<Self> {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(cfg.max_instances)
            .total_core_instances(cfg.max_instances * 4)
            .total_memories(cfg.max_instances * 2)
            .total_tables(cfg.max_instances * 4)
            .max_memories_per_component(2)
            .max_memory_size(MAX_MEMORY_BYTES)
            .max_core_instances_per_component(16)
            .max_tables_per_component(8)
            .linear_memory_keep_resident(KEEP_RESIDENT_BYTES)
            .table_keep_resident(KEEP_RESIDENT_BYTES)
            .pagemap_scan(Enabled::Auto);
        let mut config = Config::new();
        config
            .strategy(wasmtime::Strategy::Cranelift)
            .cranelift_opt_level(wasmtime::OptLevel::Speed)
            .epoch_interruption(true)
            .wasm_component_model(true)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&config)?;
        let stop = Arc::new(AtomicBool::new(false));
        let ticker = {
            let engine = engine.clone();
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("wasmop-epoch".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(EPOCH_TICK);
                        engine.increment_epoch();
                    }
                })?
        };
        Ok(SandboxEngine {
            inner: Arc::new(Inner {
                engine,
                stop,
                ticker: Some(ticker),
            }),
        })
    }

    /// The wasmtime engine.
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
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
    fn deadline_rounds_up_to_whole_ticks() {
        assert_eq!(SandboxEngine::ticks_for(Duration::from_millis(1)), 2);
        assert_eq!(SandboxEngine::ticks_for(Duration::from_millis(5)), 2);
        assert_eq!(SandboxEngine::ticks_for(Duration::from_millis(6)), 3);
        assert_eq!(SandboxEngine::ticks_for(Duration::from_secs(1)), 201);
    }
}
