//! `wasmop info`: what a plugin declares, as YAML.

use std::path::PathBuf;

use serde::Serialize;

use crate::cases::load::load_file;
use crate::runtime::{Limits, PluginInfo, Sandbox};

/// Arguments of `wasmop info`.
#[derive(Debug, clap::Args)]
pub struct InfoArgs {
    /// The plugin component (`.wasm`).
    pub plugin: PathBuf,
    /// Print only the CustomResourceDefinition the plugin defines (YAML).
    #[arg(long)]
    pub crd: bool,
}

#[derive(Serialize)]
struct Shown<'a> {
    digest: &'a str,
    size: usize,
    /// The contract version the component was built against.
    contract: &'static str,
    #[serde(flatten)]
    info: &'a PluginInfo,
}

/// Runs `wasmop info`.
pub fn run(args: &InfoArgs) -> anyhow::Result<()> {
    let sandbox = Sandbox::new(1)?;
    let plugin = load_file(&sandbox, &args.plugin, Limits::default())?;
    if args.crd {
        let crd = plugin
            .info
            .crd
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("plugin `{}` defines no CRD", plugin.info.name))?;
        print!("{}", crate::cases::input::to_yaml(crd)?);
        return Ok(());
    }
    let shown = Shown {
        digest: &plugin.digest,
        size: plugin.size,
        contract: plugin.contract(),
        info: &plugin.info,
    };
    print!("{}", crate::cases::input::to_yaml(&shown)?);
    Ok(())
}
