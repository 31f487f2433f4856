//! `wasmop compile`: plugins compiled ahead of time into a shelf for the host's image
//! (`wasmop run --compiled-shelf DIR`), each file named as the host's compiled cache names
//! it (the component's digest and the engine's fingerprint), so that a host whose cache
//! starts empty loads its bundled plugins without compiling them.

use std::path::PathBuf;

use crate::cases::load::load_file;
use crate::runtime::{Limits, Sandbox};

/// Arguments of `wasmop compile`.
#[derive(Debug, clap::Args)]
pub struct CompileArgs {
    /// The plugin components (`.wasm`).
    #[arg(required = true)]
    pub plugins: Vec<PathBuf>,
    /// The shelf to write the compiled components to (created if missing). Each is loaded
    /// (its `info()` called) first: a plugin that does not load is refused, as the host
    /// would refuse it.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// Runs `wasmop compile`: prints a line per plugin (name, version, digest).
pub fn run(args: &CompileArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.out)
        .map_err(|e| anyhow::anyhow!("creating {}: {e}", args.out.display()))?;
    let sandbox = Sandbox::new(1)?.with_compiled_dir(&args.out);
    for path in &args.plugins {
        let plugin = load_file(&sandbox, path, Limits::default())?;
        println!(
            "{} {} {} -> {}",
            plugin.info.name,
            plugin.info.version,
            plugin.digest,
            args.out.display()
        );
    }
    Ok(())
}
