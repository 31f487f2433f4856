//! Per-plugin sandbox limits and the resource limiter that enforces the memory cap.

use std::time::Duration;

use wasmtime::ResourceLimiter;

/// Limits applied to every call into one plugin. Each call gets a fresh store, so the
/// limits hold per call, not per plugin lifetime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock budget of one call (instantiation plus the exported function).
    pub deadline: Duration,
    /// Maximum linear memory of the instance, in bytes.
    pub memory_bytes: usize,
    /// Maximum number of actions in a plan.
    pub max_actions: usize,
    /// Maximum number of Events in a plan (each one is an API call).
    pub max_events: usize,
    /// Maximum size of a plan: the bytes of every string in it (objects, status, Events,
    /// delete references) together.
    pub max_plan_bytes: usize,
    /// Maximum size of the message of a `reconcile-error` answer.
    pub max_error_bytes: usize,
    /// Maximum bytes a call may write to stdout and stderr together; more traps.
    pub max_output_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            deadline: Duration::from_secs(1),
            memory_bytes: 64 << 20,
            max_actions: 1000,
            max_events: 100,
            max_plan_bytes: 8 << 20,
            max_error_bytes: 16 << 10,
            max_output_bytes: 64 << 10,
        }
    }
}

/// The largest memory cap a plugin may ask for; the pooling allocator reserves this much
/// address space per memory slot.
pub const MAX_MEMORY_BYTES: usize = 1 << 30;

/// Enforces the memory cap of one store and remembers whether it refused a growth, so that
/// the trap that follows can be reported as out-of-memory.
#[derive(Debug)]
pub struct MemoryLimiter {
    memory_bytes: usize,
    /// Set when a memory growth past the cap was refused.
    pub refused: bool,
}

impl MemoryLimiter {
    /// A limiter for a store with the given cap.
    pub fn new(memory_bytes: usize) -> Self {
        MemoryLimiter {
            memory_bytes,
            refused: false,
        }
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            self.refused = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_growth_past_the_cap_and_remembers_it() {
        let mut limiter = MemoryLimiter::new(1 << 20);
        assert!(limiter.memory_growing(0, 1 << 20, None).unwrap());
        assert!(!limiter.refused);
        assert!(
            !limiter
                .memory_growing(1 << 20, (1 << 20) + 65536, None)
                .unwrap()
        );
        assert!(limiter.refused);
    }
}
