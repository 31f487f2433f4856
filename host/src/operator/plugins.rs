//! Loading the plugins of a directory.

use std::path::{Path, PathBuf};

use crate::runtime::{Limits, LoadedPlugin, Sandbox};

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

/// Loads every plugin of `dir`. A file that is refused is logged and skipped; two files
/// declaring the same plugin name are an error; no plugin at all is an error.
pub async fn load_dir(
    sandbox: &Sandbox,
    dir: &Path,
    limits: Limits,
) -> anyhow::Result<Vec<LoadedPlugin>> {
    let mut loaded: Vec<LoadedPlugin> = Vec::new();
    for path in plugin_files(dir)? {
        let bytes = tokio::fs::read(&path).await?;
        match sandbox.load_async(bytes, limits).await {
            Ok(p) => {
                if loaded.iter().any(|q| q.info.name == p.info.name) {
                    anyhow::bail!(
                        "{}: a second plugin named `{}`",
                        path.display(),
                        p.info.name
                    );
                }
                tracing::info!(file = %path.display(), plugin = %p.info.name, version = %p.info.version,
                    digest = %p.digest, "plugin loaded");
                loaded.push(p);
            }
            Err(e) => tracing::error!(file = %path.display(), error = %e, "plugin refused"),
        }
    }
    if loaded.is_empty() {
        anyhow::bail!("{}: no plugin could be loaded (*.wasm)", dir.display());
    }
    Ok(loaded)
}
