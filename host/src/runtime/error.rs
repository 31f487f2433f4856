//! Errors of the runtime: a failed call into a plugin, and a refused plugin version.

use std::time::Duration;

/// Why a call into a plugin produced no answer. None of these crash the host; each
/// concerns one call only.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The call ran past its deadline and was interrupted.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The guest tried to grow its memory past the cap.
    #[error("out of memory: the guest tried to use more than {0} bytes")]
    OutOfMemory(usize),
    /// The guest's memory could not grow: the host's guest-memory budget (bytes) was in use
    /// by other calls at that moment. Retried with backoff like any fault.
    #[error(
        "out of memory: the host's guest-memory budget of {0} bytes (--guest-memory-mib) was in use by other calls"
    )]
    HostMemory(usize),
    /// The guest trapped (a Rust panic, an `unreachable`, a bad memory access ...).
    #[error("trapped: {0}")]
    Trap(String),
    /// The guest returned something the host refuses: malformed JSON, or a plan over the
    /// size or action limits.
    #[error("invalid output: {0}")]
    InvalidOutput(String),
    /// The host could not run the call (instance pool exhausted, runtime shut down).
    #[error("sandbox unavailable: {0}")]
    Unavailable(String),
}

impl CallError {
    /// A short metric label for the error kind.
    pub fn kind(&self) -> &'static str {
        match self {
            CallError::Timeout(_) => "timeout",
            CallError::OutOfMemory(_) => "out_of_memory",
            CallError::HostMemory(_) => "host_memory",
            CallError::Trap(_) => "trap",
            CallError::InvalidOutput(_) => "invalid_output",
            CallError::Unavailable(_) => "unavailable",
        }
    }
}

/// Why a plugin version was refused. The message names what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The bytes are not WebAssembly at all.
    #[error("not a WebAssembly file (bad magic number)")]
    NotWasm,
    /// A core module rather than a component.
    #[error(
        "a core WebAssembly module, not a component: build the plugin with \
         `cargo build --target wasm32-wasip2` (or wrap it with `wasm-tools component new`)"
    )]
    CoreModule,
    /// Compilation failed (invalid or unsupported WebAssembly).
    #[error("does not compile: {0}")]
    Compile(String),
    /// The component does not match the `wasmop:plugin/plugin` world.
    #[error("does not match the wasmop:plugin world: {0}")]
    World(String),
    /// Calling `info()` failed.
    #[error("info() failed: {0}")]
    Info(#[from] CallError),
    /// `info()` returned something invalid.
    #[error("invalid plugin info: {0}")]
    InvalidInfo(String),
}
