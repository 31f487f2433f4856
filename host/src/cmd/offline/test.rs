//! `wasmop test`: the golden cases of a directory through a plugin ([`crate::cases::golden`]).

use std::path::PathBuf;

use crate::cases::golden::{case_files, run_case};
use crate::cases::load::load_file;
use crate::runtime::{Limits, Sandbox};

/// Arguments of `wasmop test`.
#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// The plugin component (`.wasm`).
    pub plugin: PathBuf,
    /// Directory of case files (`*.yaml`).
    pub cases: PathBuf,
    /// Rewrite each case's `expect` with the actual outcome instead of comparing.
    #[arg(long)]
    pub update: bool,
}

/// Runs `wasmop test`; returns whether every case passed.
pub fn run(args: &TestArgs) -> anyhow::Result<bool> {
    let sandbox = Sandbox::new(1)?;
    let plugin = load_file(&sandbox, &args.plugin, Limits::default())?;
    let files = case_files(&args.cases)?;
    let (mut passed, mut failed) = (0, 0);
    for path in files {
        let r = run_case(&sandbox, &plugin, &path, args.update);
        let name = r
            .path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        match r.failure {
            None => {
                passed += 1;
                println!("ok - {name}");
            }
            Some(why) => {
                failed += 1;
                println!("FAIL - {name}");
                for line in why.lines() {
                    println!("    {line}");
                }
            }
        }
    }
    println!("{} golden cases", plugin.info.name);
    println!("golden: {passed} passed, {failed} failed");
    Ok(failed == 0)
}
