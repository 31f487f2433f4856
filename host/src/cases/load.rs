//! Loading a plugin file for the offline commands.

use std::path::Path;

use anyhow::Context;

use crate::runtime::{Limits, LoadedPlugin, Sandbox};

/// Reads and loads `path` into `sandbox` with default limits; errors name the file.
pub fn load_file(sandbox: &Sandbox, path: &Path, limits: Limits) -> anyhow::Result<LoadedPlugin> {
    let bytes = std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
    sandbox
        .load(&bytes, limits)
        .with_context(|| format!("{}: plugin refused", path.display()))
}
