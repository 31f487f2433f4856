//! `wasmop plan`: one decision from YAML files, printed as YAML.

use std::path::PathBuf;

use crate::cases::decision::{decide, now_ms, parse_time};
use crate::cases::input::{complete_object, read_objects, read_one, to_yaml};
use crate::cases::load::load_file;
use crate::runtime::{Limits, Outcome, Sandbox};

/// Arguments of `wasmop plan`.
#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// The plugin component (`.wasm`).
    pub plugin: PathBuf,
    /// YAML file with the primary object to reconcile.
    #[arg(long)]
    pub object: PathBuf,
    /// YAML files with the other objects of the namespace (several documents per file);
    /// the plugin sees those its relations select, as it would in a cluster.
    #[arg(long = "related")]
    pub related: Vec<PathBuf>,
    /// Random seed handed to the plugin.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The time handed to the plugin (RFC 3339); default: now.
    #[arg(long, value_parser = parse_time)]
    pub now: Option<i64>,
}

/// Runs `wasmop plan`, printing the outcome as YAML. Returns whether a plan came out.
pub fn run(args: &PlanArgs) -> anyhow::Result<bool> {
    let sandbox = Sandbox::new(1)?;
    let plugin = load_file(&sandbox, &args.plugin, Limits::default())?;
    let mut primary = read_one(&args.object)?;
    complete_object(&mut primary, plugin.info.primary.namespaced);
    let mut objects = Vec::new();
    for path in &args.related {
        objects.extend(read_objects(path)?);
    }
    let outcome = decide(
        &sandbox,
        &plugin,
        &primary,
        &objects,
        args.now.unwrap_or_else(now_ms),
        args.seed,
        &Default::default(),
    )?;
    print!("{}", to_yaml(&outcome)?);
    Ok(matches!(outcome, Outcome::Plan(_)))
}
