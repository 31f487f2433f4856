//! Shared helpers of the host's integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

/// Where the plugin components were built (`make plugins`); `WASMOP_PLUGIN_DIR` overrides.
pub fn plugin_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("WASMOP_PLUGIN_DIR") {
        return PathBuf::from(dir);
    }
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("wasm32-wasip2/plugin")
}

/// The bytes of a built plugin, with a clear message when it has not been built.
pub fn plugin_bytes(file: &str) -> Vec<u8> {
    let path = plugin_dir().join(file);
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; build the plugins first with `make plugins`",
            path.display()
        )
    })
}
