//! `wasmop wasi-run`: runs a `wasm32-wasip2` command component (a guest's unit-test
//! binary) in the production engine, so guest tests run under the same wasmtime as the
//! plugins. Used as cargo's runner: `CARGO_TARGET_WASM32_WASIP2_RUNNER="wasmop wasi-run"`.

use std::path::PathBuf;

use anyhow::Context;
use wasmtime::Store;
use wasmtime::component::{Component, Linker};
use wasmtime_wasi::p2::bindings::sync::CommandPre;

use crate::runtime::limits::MAX_MEMORY_BYTES;
use crate::runtime::store::StoreData;
use crate::runtime::{CallContext, Sandbox};

/// Arguments of `wasmop wasi-run`.
#[derive(Debug, clap::Args)]
pub struct WasiRunArgs {
    /// The command component (`.wasm`).
    pub component: PathBuf,
    /// Arguments passed to the component (after its name).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

/// Runs the command and returns its exit code.
pub fn run(args: &WasiRunArgs) -> anyhow::Result<i32> {
    let sandbox = Sandbox::new(1)?;
    let engine = sandbox.engine().engine();
    let component = Component::from_file(engine, &args.component)
        .map_err(|e| anyhow::anyhow!("{e:#}"))
        .with_context(|| format!("{}: cannot compile", args.component.display()))?;
    // A test binary is no plugin: it gets all of WASI, real clocks included (a test may
    // sleep), but still no files, network or environment (see `StoreData::for_command`).
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
        .map_err(|e| anyhow::anyhow!("linking WASI: {e:#}"))?;
    let pre = linker
        .instantiate_pre(&component)
        .map_err(|e| anyhow::anyhow!("{}: {e:#}", args.component.display()))?;
    let pre = CommandPre::new(pre).map_err(|e| anyhow::anyhow!("not a WASI command: {e:#}"))?;
    let mut argv = vec![args.component.display().to_string()];
    argv.extend(args.args.iter().cloned());
    let ctx = CallContext {
        plugin: "wasi-run".into(),
        ..CallContext::default()
    };
    let mut store = Store::new(engine, StoreData::for_command(&argv, MAX_MEMORY_BYTES, ctx));
    store.limiter(|d| &mut d.limiter);
    // Tests may run long: the deadline is effectively unlimited.
    store.set_epoch_deadline(u64::MAX / 2);
    let result = pre
        .instantiate(&mut store)
        .and_then(|cmd| cmd.wasi_cli_run().call_run(&mut store));
    match result {
        Ok(Ok(())) => Ok(0),
        Ok(Err(())) => Ok(1),
        Err(e) => match e.downcast_ref::<wasmtime_wasi::I32Exit>() {
            Some(exit) => Ok(exit.0),
            None => {
                eprintln!("wasmop wasi-run: {}: {e:?}", args.component.display());
                Ok(101)
            }
        },
    }
}
