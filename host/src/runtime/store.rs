//! What each call's fresh [`wasmtime::Store`] holds: a minimal WASI context, the memory
//! limiter, captured stdout/stderr and the log context of the object being reconciled.

use std::sync::Arc;
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxView, WasiView};

use crate::runtime::bindings::{HostImports, Level};
use crate::runtime::limits::{GuestMemory, Limits, MemoryLimiter};

/// The `tracing` target of every line a guest wrote (its `log` calls, its stdout and
/// stderr): in the host's log as any other line; exported to traces only when the host is
/// told to (`--trace-guest-logs`).
pub const GUEST_TARGET: &str = "wasmop::guest";

/// Most WASI resources (pollables, streams) one call may hold at once.
pub const MAX_RESOURCES: usize = 1024;

/// Who a call is for; attached to every line the guest logs.
#[derive(Debug, Clone, Default)]
pub struct CallContext {
    /// Plugin name.
    pub plugin: String,
    /// Plugin version.
    pub version: String,
    /// The object being reconciled (`namespace/name`), empty for `info()`.
    pub object: String,
    /// Time the guest's clocks report, ms since the Unix epoch.
    pub now_unix_ms: i64,
    /// Seed of the guest's random number generators.
    pub seed: u64,
}

/// The data of one store.
pub struct StoreData {
    wasi: WasiCtx,
    table: ResourceTable,
    /// Enforces the memory cap.
    pub limiter: MemoryLimiter,
    /// What the guest wrote to stdout.
    pub stdout: MemoryOutputPipe,
    /// What the guest wrote to stderr (a Rust panic message lands here).
    pub stderr: MemoryOutputPipe,
    /// Log tagging.
    pub ctx: CallContext,
    log_budget: usize,
    /// Guest log lines dropped because the budget ran out.
    pub dropped_logs: usize,
}

/// A wall clock stopped at the observed time: the guest sees the host's `now`, so a
/// decision depends only on its input.
struct FixedWallClock(Duration);

impl HostWallClock for FixedWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_millis(1)
    }
    fn now(&self) -> Duration {
        self.0
    }
}

/// A monotonic clock that never advances, for the same reason. It stands at one second,
/// not at zero: Go's runtime refuses to start on a clock reading zero ("nanotime returning
/// zero").
struct FixedMonotonicClock;

/// Where the monotonic clock of every call stands, in nanoseconds.
pub const MONOTONIC_NOW_NS: u64 = 1_000_000_000;

impl HostMonotonicClock for FixedMonotonicClock {
    fn resolution(&self) -> u64 {
        1
    }
    fn now(&self) -> u64 {
        MONOTONIC_NOW_NS
    }
}

impl StoreData {
    /// A store for one call: no preopens, no network, no environment, no arguments;
    /// clocks fixed at `ctx.now_unix_ms`; random generators seeded from `ctx.seed`.
    pub fn new(limits: &Limits, ctx: CallContext, host: Arc<GuestMemory>) -> Self {
        let stdout = MemoryOutputPipe::new(limits.max_output_bytes);
        let stderr = MemoryOutputPipe::new(limits.max_output_bytes);
        let now = Duration::from_millis(ctx.now_unix_ms.max(0) as u64);
        let wasi = WasiCtx::builder()
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .wall_clock(FixedWallClock(now))
            .monotonic_clock(FixedMonotonicClock)
            .secure_random(StdRng::seed_from_u64(ctx.seed))
            .insecure_random(StdRng::seed_from_u64(ctx.seed ^ 0x9e37_79b9_7f4a_7c15))
            .insecure_random_seed(u128::from(ctx.seed))
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        Self::with(
            wasi,
            MemoryLimiter::new(limits.memory_bytes, host),
            (stdout, stderr),
            ctx,
            limits.max_output_bytes,
        )
    }

    fn with(
        wasi: WasiCtx,
        limiter: MemoryLimiter,
        (stdout, stderr): (MemoryOutputPipe, MemoryOutputPipe),
        ctx: CallContext,
        log_budget: usize,
    ) -> Self {
        let mut table = ResourceTable::new();
        // Every pollable and stream is a host allocation: bounded like the guest's memory.
        table.set_max_capacity(MAX_RESOURCES);
        StoreData {
            wasi,
            table,
            limiter,
            stdout,
            stderr,
            ctx,
            log_budget,
            dropped_logs: 0,
        }
    }

    /// A store for running a WASI command (the guest unit-test runner): the host's stdout
    /// and stderr, the given arguments, real clocks; still no files, network or
    /// environment.
    pub fn for_command(args: &[String], memory_bytes: usize, ctx: CallContext) -> Self {
        let wasi = WasiCtx::builder()
            .inherit_stdout()
            .inherit_stderr()
            .args(args)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        let pipes = (MemoryOutputPipe::new(0), MemoryOutputPipe::new(0));
        let limiter = MemoryLimiter::new(memory_bytes, GuestMemory::unlimited());
        Self::with(wasi, limiter, pipes, ctx, usize::MAX)
    }

    /// Writes what the guest printed to the host's log, one event per line.
    pub fn flush_output(&self) {
        for (stream, pipe) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
            let bytes = pipe.contents();
            for line in String::from_utf8_lossy(&bytes).lines() {
                tracing::info!(
                    target: GUEST_TARGET,
                    plugin = %self.ctx.plugin,
                    version = %self.ctx.version,
                    object = %self.ctx.object,
                    stream,
                    "{line}"
                );
            }
        }
        if self.dropped_logs > 0 {
            tracing::warn!(plugin = %self.ctx.plugin, object = %self.ctx.object,
                dropped = self.dropped_logs, "guest log budget exhausted; lines dropped");
        }
    }

    /// The guest's panic message, if it printed one to stderr.
    pub fn panic_message(&self) -> Option<String> {
        let bytes = self.stderr.contents();
        let text = String::from_utf8_lossy(&bytes);
        let start = text.find("panicked at")?;
        let rest = text[start..].trim();
        // Rust prints "panicked at FILE:LINE:COL:\nMESSAGE\nnote: ...".
        let msg: Vec<&str> = rest
            .lines()
            .take_while(|l| !l.starts_with("note:"))
            .collect();
        Some(msg.join(" ").trim().to_string())
    }
}

impl WasiView for StoreData {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl HostImports for StoreData {
    fn log(&mut self, level: Level, message: String) {
        if message.len() > self.log_budget {
            self.dropped_logs += 1;
            return;
        }
        self.log_budget -= message.len();
        let c = &self.ctx;
        match level {
            Level::Trace => {
                tracing::trace!(target: GUEST_TARGET, plugin = %c.plugin, version = %c.version, object = %c.object, "{message}")
            }
            Level::Debug => {
                tracing::debug!(target: GUEST_TARGET, plugin = %c.plugin, version = %c.version, object = %c.object, "{message}")
            }
            Level::Info => {
                tracing::info!(target: GUEST_TARGET, plugin = %c.plugin, version = %c.version, object = %c.object, "{message}")
            }
            Level::Warn => {
                tracing::warn!(target: GUEST_TARGET, plugin = %c.plugin, version = %c.version, object = %c.object, "{message}")
            }
            Level::Error => {
                tracing::error!(target: GUEST_TARGET, plugin = %c.plugin, version = %c.version, object = %c.object, "{message}")
            }
        }
    }
}
