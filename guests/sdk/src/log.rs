//! Logging from a plugin: lines go to the host's structured log, tagged with the plugin
//! and the object being reconciled. Outside WebAssembly they go to stderr.

/// Log severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Very detailed.
    Trace,
    /// Debugging.
    Debug,
    /// Normal operation.
    Info,
    /// Something odd.
    Warn,
    /// Something failed.
    Error,
}

/// Writes one log line.
pub fn log(level: Level, message: &str) {
    #[cfg(target_family = "wasm")]
    {
        use crate::bindings::wasmop::plugin::host::{Level as L, log};
        let l = match level {
            Level::Trace => L::Trace,
            Level::Debug => L::Debug,
            Level::Info => L::Info,
            Level::Warn => L::Warn,
            Level::Error => L::Error,
        };
        log(l, message);
    }
    #[cfg(not(target_family = "wasm"))]
    eprintln!("[{level:?}] {message}");
}

/// Logs at info level.
pub fn info(message: &str) {
    log(Level::Info, message);
}

/// Logs at debug level.
pub fn debug(message: &str) {
    log(Level::Debug, message);
}

/// Logs at warn level.
pub fn warn(message: &str) {
    log(Level::Warn, message);
}
