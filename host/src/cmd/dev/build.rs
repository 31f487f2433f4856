//! The plugin crate `wasmop dev` builds: where cargo writes its component, building it with
//! the compiler's messages shown as they come, and handing the result to the host.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::Value;
use tokio::process::Command;

use crate::runtime::digest_of;

/// A plugin crate.
#[derive(Debug, Clone)]
pub struct Crate {
    /// Its directory.
    pub dir: PathBuf,
    /// Its package name.
    pub name: String,
    /// The component a release build writes.
    pub wasm: PathBuf,
}

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

impl Crate {
    /// Reads the crate in `dir` (`cargo metadata`): its name and where its component goes.
    pub async fn open(dir: &Path) -> anyhow::Result<Crate> {
        let manifest = dir.join("Cargo.toml");
        if !manifest.is_file() {
            anyhow::bail!(
                "{}: no Cargo.toml (create a plugin with `wasmop new NAME --kind Kind --group example.com`)",
                dir.display()
            );
        }
        let out = cargo()
            .args([
                "metadata",
                "--no-deps",
                "--format-version",
                "1",
                "--manifest-path",
            ])
            .arg(&manifest)
            .output()
            .await
            .context("running cargo metadata")?;
        if !out.status.success() {
            anyhow::bail!(
                "{}: cargo metadata failed:\n{}",
                manifest.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let meta: Value = serde_json::from_slice(&out.stdout)?;
        // A plugin crate is a workspace of its own: its one package.
        let package = meta["packages"]
            .as_array()
            .and_then(|p| p.first())
            .ok_or_else(|| anyhow::anyhow!("{}: no package", manifest.display()))?;
        let name = package["name"].as_str().unwrap_or_default().to_string();
        let cdylib = package["targets"].as_array().and_then(|ts| {
            ts.iter().find(|t| {
                t["crate_types"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|k| k == "cdylib"))
            })
        });
        let Some(lib) = cdylib else {
            anyhow::bail!(
                "{}: package `{name}` has no cdylib target (a plugin's [lib] needs crate-type = [\"cdylib\", \"rlib\"])",
                manifest.display()
            );
        };
        let lib_name = lib["name"].as_str().unwrap_or(&name).replace('-', "_");
        let target_dir = PathBuf::from(meta["target_directory"].as_str().unwrap_or("target"));
        Ok(Crate {
            dir: dir.canonicalize()?,
            name,
            wasm: target_dir.join(format!("wasm32-wasip2/release/{lib_name}.wasm")),
        })
    }

    /// `cargo build --release --target wasm32-wasip2`, its messages passed through: the
    /// component on success, `None` when the build fails.
    pub async fn build(&self) -> anyhow::Result<Option<PathBuf>> {
        let status = cargo()
            .args([
                "build",
                "--release",
                "--target",
                "wasm32-wasip2",
                "--manifest-path",
            ])
            .arg(self.dir.join("Cargo.toml"))
            .status()
            .await
            .context("running cargo build")?;
        Ok(status.success().then(|| self.wasm.clone()))
    }
}

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
