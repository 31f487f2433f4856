//! Per-plugin sandbox limits, the host-wide budget of guest memory, and the resource
//! limiter that enforces both.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
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

/// The guest memory the host hands out at once, over every call in flight: a call's linear
/// memory grows only while the total stays within the limit (`wasmop run` derives it from
/// the container's memory limit), so no number of plugins at their per-call cap can grow
/// the host past it. A call refused here fails as out of memory for that one object
/// ([`MemoryLimiter::host_refused`]); its memory is given back when its store is dropped.
#[derive(Debug)]
pub struct GuestMemory {
    limit: usize,
    used: AtomicUsize,
    peak: AtomicUsize,
}

impl GuestMemory {
    /// A budget of `limit` bytes.
    pub fn new(limit: usize) -> Arc<GuestMemory> {
        Arc::new(GuestMemory {
            limit,
            used: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        })
    }

    /// No budget beyond each call's own cap (offline tools, tests).
    pub fn unlimited() -> Arc<GuestMemory> {
        Self::new(usize::MAX)
    }

    /// The limit, in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes of guest memory in use now.
    pub fn in_use(&self) -> usize {
        self.used.load(Ordering::SeqCst)
    }

    /// The most bytes in use at once so far.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }

    /// Takes `bytes` if they fit under the limit.
    fn take(&self, bytes: usize) -> bool {
        let taken = self
            .used
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| {
                used.checked_add(bytes).filter(|total| *total <= self.limit)
            });
        match taken {
            Ok(before) => {
                self.peak.fetch_max(before + bytes, Ordering::SeqCst);
                true
            }
            Err(_) => false,
        }
    }

    fn give_back(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::SeqCst);
    }

    /// Takes `bytes` of the budget for host memory a call's answer holds (its parsed JSON,
    /// [`crate::runtime::footprint`]) until the returned reservation is dropped; `None` if
    /// they do not fit.
    pub fn reserve(self: &Arc<Self>, bytes: usize) -> Option<Reservation> {
        self.take(bytes).then(|| Reservation {
            host: self.clone(),
            bytes,
        })
    }
}

/// Bytes of the host-wide [`GuestMemory`] budget held for an answer until it is dropped.
#[derive(Debug)]
pub struct Reservation {
    host: Arc<GuestMemory>,
    bytes: usize,
}

impl Reservation {
    /// The bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.host.give_back(self.bytes);
    }
}

/// Enforces the memory cap of one store and its share of the host's [`GuestMemory`], and
/// remembers whether it refused a growth, so that the trap that follows can be reported as
/// out-of-memory.
#[derive(Debug)]
pub struct MemoryLimiter {
    memory_bytes: usize,
    host: Arc<GuestMemory>,
    taken: usize,
    /// Set when a memory growth past the cap was refused.
    pub refused: bool,
    /// Set when a memory growth was refused because the host's budget was in use.
    pub host_refused: bool,
}

impl MemoryLimiter {
    /// A limiter for a store with the given cap, drawing on `host`.
    pub fn new(memory_bytes: usize, host: Arc<GuestMemory>) -> Self {
        MemoryLimiter {
            memory_bytes,
            host,
            taken: 0,
            refused: false,
            host_refused: false,
        }
    }
}

impl MemoryLimiter {
    /// The host budget's limit, in bytes.
    pub fn host_limit(&self) -> usize {
        self.host.limit()
    }
}

impl Drop for MemoryLimiter {
    fn drop(&mut self) {
        self.host.give_back(self.taken);
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            self.refused = true;
            return Ok(false);
        }
        let more = desired.saturating_sub(current);
        if !self.host.take(more) {
            self.host_refused = true;
            return Ok(false);
        }
        self.taken += more;
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
    fn calls_share_the_host_budget_and_give_it_back() {
        let host = GuestMemory::new(3 << 20);
        let mut a = MemoryLimiter::new(2 << 20, host.clone());
        let mut b = MemoryLimiter::new(2 << 20, host.clone());
        assert!(a.memory_growing(0, 2 << 20, None).unwrap());
        assert!(b.memory_growing(0, 1 << 20, None).unwrap());
        // Within b's own cap, but the host's 3 MiB are in use.
        assert!(!b.memory_growing(1 << 20, 2 << 20, None).unwrap());
        assert!(b.host_refused && !b.refused);
        assert_eq!(host.in_use(), 3 << 20);
        drop(a);
        assert_eq!(host.in_use(), 1 << 20);
        assert!(b.memory_growing(1 << 20, 2 << 20, None).unwrap());
        drop(b);
        assert_eq!((host.in_use(), host.peak()), (0, 3 << 20));
    }

    #[test]
    fn answers_held_share_the_budget_with_guest_memory() {
        let host = GuestMemory::new(3 << 20);
        let mut guest = MemoryLimiter::new(2 << 20, host.clone());
        assert!(guest.memory_growing(0, 2 << 20, None).unwrap());
        assert!(host.reserve(2 << 20).is_none(), "1 MiB left");
        let answer = host.reserve(1 << 20).expect("fits");
        assert_eq!(host.in_use(), 3 << 20);
        // A guest cannot grow into what an answer holds.
        let mut other = MemoryLimiter::new(2 << 20, host.clone());
        assert!(!other.memory_growing(0, 64 << 10, None).unwrap());
        drop(answer);
        drop(guest);
        assert_eq!(host.in_use(), 0);
    }

    #[test]
    fn refuses_growth_past_the_cap_and_remembers_it() {
        let mut limiter = MemoryLimiter::new(1 << 20, GuestMemory::unlimited());
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
