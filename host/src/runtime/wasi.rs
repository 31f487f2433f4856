//! The WASI a plugin gets: what Rust's std needs to run and nothing it can block on or
//! reach out with.
//!
//! Linked: `wasi:cli` (stdio into the log, no arguments, no environment, exit),
//! `wasi:io`, `wasi:clocks` (both read the observed `now`), `wasi:random` (seeded from the
//! call's seed) and `wasi:filesystem` (with no preopened directory there is nothing to
//! open). Not linked: `wasi:sockets` (TCP, UDP, name lookup). Language runtimes built on
//! wasi-libc (CPython in componentize-py, Go) import them whether or not the plugin ever
//! opens a socket, so a component importing `wasi:sockets` loads with every one of those
//! functions a trap naming it ([`stubbed`]): the plugin never gets a socket, and a call is a
//! fault of that call. Any other unknown import is refused at load, by name.
//!
//! Nothing to block on: a guest's time stands still (its clocks read the `now` it was
//! given), so every monotonic-clock pollable is ready at once: a sleep of any length ends
//! as soon as it starts, and a guest that waits for time to pass only spins, which the
//! epoch deadline stops. With wasmtime-wasi's own clock, `std::thread::sleep` or a
//! `subscribe-duration` pollable blocks inside a host call, where epoch interruption does
//! not reach, and holds a thread and a sandbox permit for as long as the guest asked.
//! Stdin is closed and stdout/stderr are in-memory pipes, so streams never wait either.

use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, HasData, Linker, Resource, ResourceTable, ResourceType};
use wasmtime_wasi::WasiView;
use wasmtime_wasi::cli::{WasiCli, WasiCliView};
use wasmtime_wasi::clocks::{WasiClocks, WasiClocksCtxView, WasiClocksView};
use wasmtime_wasi::filesystem::{WasiFilesystem, WasiFilesystemView};
use wasmtime_wasi::p2::bindings::clocks::monotonic_clock::{self, Duration, Instant};
use wasmtime_wasi::p2::bindings::{cli, clocks, filesystem, random, sync};
use wasmtime_wasi::p2::{DynPollable, Pollable, subscribe};
use wasmtime_wasi::random::{WasiRandom, WasiRandomView};

/// Links the plugin's WASI into `linker` (see the module docs for what and why).
pub fn add_to_linker<T: WasiView>(l: &mut Linker<T>) -> wasmtime::Result<()> {
    sync::io::error::add_to_linker::<T, Table>(l, |t| t.ctx().table)?;
    sync::io::poll::add_to_linker::<T, Table>(l, |t| t.ctx().table)?;
    sync::io::streams::add_to_linker::<T, Table>(l, |t| t.ctx().table)?;

    clocks::wall_clock::add_to_linker::<T, WasiClocks>(l, T::clocks)?;
    monotonic_clock::add_to_linker::<T, StillTime>(l, |t| StillClock(t.clocks()))?;

    random::random::add_to_linker::<T, WasiRandom>(l, T::random)?;
    random::insecure::add_to_linker::<T, WasiRandom>(l, T::random)?;
    random::insecure_seed::add_to_linker::<T, WasiRandom>(l, T::random)?;

    cli::exit::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::environment::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::stdin::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::stdout::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::stderr::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_input::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_output::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stdin::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stdout::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stderr::add_to_linker::<T, WasiCli>(l, T::cli)?;

    filesystem::preopens::add_to_linker::<T, WasiFilesystem>(l, T::filesystem)?;
    sync::filesystem::types::add_to_linker::<T, WasiFilesystem>(l, T::filesystem)?;
    Ok(())
}

/// Whether an import the host does not link is satisfied by functions that trap when called
/// (the module docs say why): only `wasi:sockets`.
pub fn stubbed(import: &str) -> bool {
    import.starts_with("wasi:sockets/")
}

/// Defines every function of the instances `names` that `component` imports as a trap that
/// names it, and their resources as resources the host never creates.
pub fn add_trapping_stubs<T: 'static>(
    linker: &mut Linker<T>,
    component: &Component,
    names: &[String],
) -> wasmtime::Result<()> {
    let engine = linker.engine().clone();
    for (name, item) in component.component_type().imports(&engine) {
        if !names.iter().any(|n| n == name) {
            continue;
        }
        let ComponentItem::ComponentInstance(instance) = item.ty else {
            wasmtime::bail!("import `{name}` is not an interface");
        };
        let mut inst = linker.instance(name)?;
        for (export, item) in instance.exports(&engine) {
            match item.ty {
                ComponentItem::ComponentFunc(_) => {
                    let called = format!("{name}#{export}");
                    inst.func_new(export, move |_, _, _, _| {
                        wasmtime::bail!("`{called}` called: plugins have no network")
                    })?;
                }
                ComponentItem::Resource(_) => {
                    inst.resource(export, stub_resource(export), |_, _| Ok(()))?;
                }
                ComponentItem::Type(_) => {}
                _ => wasmtime::bail!("import `{name}` exports `{export}`, not a function"),
            }
        }
    }
    Ok(())
}

/// The type of resource `name` in a stubbed interface: `wasi:io`'s own where the interface
/// uses one of them (a stub's signature names them), else one no host function ever makes.
fn stub_resource(name: &str) -> ResourceType {
    match name {
        "pollable" => ResourceType::host::<wasmtime_wasi::p2::DynPollable>(),
        "input-stream" => ResourceType::host::<wasmtime_wasi::p2::DynInputStream>(),
        "output-stream" => ResourceType::host::<wasmtime_wasi::p2::DynOutputStream>(),
        "error" => ResourceType::host::<wasmtime_wasi::p2::IoError>(),
        _ => ResourceType::host::<Stubbed>(),
    }
}

/// The resources of stubbed interfaces: never created, since every function that would
/// make one traps.
struct Stubbed;

/// `wasi:io` works on the resource table alone.
struct Table;

impl HasData for Table {
    type Data<'a> = &'a mut ResourceTable;
}

/// `wasi:clocks/monotonic-clock` for a guest whose time stands still.
struct StillTime;

impl HasData for StillTime {
    type Data<'a> = StillClock<'a>;
}

/// The monotonic clock of the store (fixed for plugins) whose pollables are all ready.
struct StillClock<'a>(WasiClocksCtxView<'a>);

/// A pollable that is ready as soon as it is asked.
struct Elapsed;

#[wasmtime_wasi::async_trait]
impl Pollable for Elapsed {
    async fn ready(&mut self) {}
}

impl StillClock<'_> {
    fn elapsed(&mut self) -> wasmtime::Result<Resource<DynPollable>> {
        let pollable = self.0.table.push(Elapsed)?;
        subscribe(self.0.table, pollable)
    }
}

impl monotonic_clock::Host for StillClock<'_> {
    fn now(&mut self) -> wasmtime::Result<Instant> {
        monotonic_clock::Host::now(&mut self.0)
    }

    fn resolution(&mut self) -> wasmtime::Result<Duration> {
        monotonic_clock::Host::resolution(&mut self.0)
    }

    fn subscribe_instant(&mut self, _when: Instant) -> wasmtime::Result<Resource<DynPollable>> {
        self.elapsed()
    }

    fn subscribe_duration(&mut self, _for: Duration) -> wasmtime::Result<Resource<DynPollable>> {
        self.elapsed()
    }
}
