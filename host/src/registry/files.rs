//! Loading the plugins of a directory.

use std::path::{Path, PathBuf};

/// The `*.wasm` files of `dir`, sorted.
pub fn plugin_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| anyhow::anyhow!("{}: cannot read the plugins directory: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "wasm"))
        .collect();
    files.sort();
    Ok(files)
}
