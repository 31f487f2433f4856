//! Handing what `wasmop dev` built ([`crate::cmd::project`]) to the host.

use std::path::Path;

use anyhow::Context;

use crate::runtime::digest_of;

/// Copies the component into the host's plugins directory (written aside, then renamed, so
/// the host never reads half a file); returns its digest.
pub fn install(wasm: &Path, plugins: &Path) -> anyhow::Result<String> {
    let bytes = std::fs::read(wasm).with_context(|| format!("reading {}", wasm.display()))?;
    let file = wasm.file_name().context("the component has no file name")?;
    let target = plugins.join(file);
    let aside = target.with_extension("wasm.partial");
    std::fs::write(&aside, &bytes).with_context(|| format!("writing {}", aside.display()))?;
    std::fs::rename(&aside, &target).with_context(|| format!("writing {}", target.display()))?;
    Ok(digest_of(&bytes))
}
