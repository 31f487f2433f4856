//! The command line: argument parsing and dispatch. `main.rs` only calls [`main`].

pub mod checkout;
pub mod dev;
pub mod offline;
pub mod project;
pub mod publish;
pub mod push;
pub mod rollout;
pub mod scaffold;
pub mod status;
pub mod target;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::telemetry::traces::Traces;

/// wasmop: Kubernetes operators whose reconcile logic runs in sandboxed WebAssembly
/// plugins.
#[derive(Debug, Parser)]
#[command(name = "wasmop", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print what a plugin declares: name, version, kinds, relations, permissions, CRD.
    Info(offline::info::InfoArgs),
    /// Run one decision offline on objects from YAML files and print the plan as YAML.
    Plan(offline::plan::PlanArgs),
    /// Run golden cases (observed objects in, expected outcome out) through a plugin.
    Test(crate::cmd::offline::test::TestArgs),
    /// Run a wasm32-wasip2 command component (cargo's runner for guest unit tests).
    WasiRun(offline::wasi_run::WasiRunArgs),
    /// Compile plugins ahead of time into a shelf for a host image, which `wasmop run
    /// --compiled-shelf` reads instead of compiling (a new pod starts its bundled plugins
    /// without compiling).
    Compile(offline::compile::CompileArgs),
    /// Run the operator host: watch, ask the plugins, check their plans, carry them out.
    Run(Box<crate::app::RunArgs>),
    /// Upload a plugin version into the cluster (a .wasm file in a ConfigMap, or an
    /// oci:// reference the host pulls) and wait for the host's verdict.
    Push(crate::cmd::push::PushArgs),
    /// Push a plugin to an OCI registry as a wasm artifact (optionally signed); prints the
    /// digest to point a WasmPlugin at (`wasmop push NAME oci://...`).
    Publish(crate::cmd::publish::PublishArgs),
    /// Sign a published plugin (cosign's key-pair format, stored beside it as
    /// `sha256-<digest>.sig`).
    Sign(crate::cmd::publish::SignArgs),
    /// Check a published plugin's cosign signatures against public keys, as the host does.
    Verify(crate::cmd::publish::VerifyArgs),
    /// Make a WasmPlugin's candidate (pushed with --shadow or --canary) its active version;
    /// every object is reconciled by it.
    Promote(crate::cmd::rollout::EndArgs),
    /// Drop a WasmPlugin's candidate; the active version decides every object again.
    Abort(crate::cmd::rollout::EndArgs),
    /// Show each plugin now: active version and digest, candidate and agreement, objects,
    /// reconciles and errors of the last minute, refused plans by rule, shard shares.
    Status(crate::cmd::status::StatusArgs),
    /// Run a plugin version against recorded decisions (`wasmop run --record`) and list
    /// what it decides differently.
    Replay(offline::replay::ReplayArgs),
    /// Print the RBAC that grants a plugin exactly what it declares (its own ServiceAccount,
    /// the host's reads for it, impersonation), for an admin to review and apply.
    Rbac(crate::principals::manifest::RbacArgs),
    /// Print the CustomResourceDefinition of WasmPlugin (YAML).
    Crd,
    /// Build a plugin (Rust, Python, TypeScript or Go) into its component and print its path.
    Build(crate::cmd::project::BuildArgs),
    /// Create a new plugin (Rust, Python, TypeScript or Go) that builds, tests and runs as is.
    New(crate::cmd::scaffold::NewArgs),
    /// Build a plugin (any language `wasmop build` takes), run the host with it, and rebuild
    /// and hot-swap it on every saved change.
    Dev(crate::cmd::dev::DevArgs),
}

/// Logs go to stderr; `WASMOP_LOG` filters them (default `warn` without kube's own line for a
/// failed request, which the command reports with its context; `info` for `run`). Colours
/// only on a terminal: a log file or a pipe gets plain text. With `traces` (`wasmop run`;
/// `Some(true)`: guest lines too, `--trace-guest-logs`), spans are also exported over OTLP when the OpenTelemetry variables ask for it
/// ([`crate::telemetry::traces`]); the returned handle is shut down when the host stops.
/// Without those variables no exporter is built at all.
fn init_logging(default: &str, json: bool, traces: Option<bool>) -> Option<Traces> {
    use std::io::IsTerminal;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{EnvFilter, Layer};
    let filter = EnvFilter::try_from_env("WASMOP_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    let log = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let log = if json {
        log.json().boxed()
    } else {
        log.boxed()
    };
    let exported = match traces {
        Some(guest_logs) => {
            crate::telemetry::traces::layer::<tracing_subscriber::Registry>(guest_logs)
        }
        None => Ok(None),
    };
    let (export, handle, refused) = match exported {
        Ok(Some((layer, handle))) => (Some(layer), Some(handle), None),
        Ok(None) => (None, None, None),
        Err(e) => (None, None, Some(e)),
    };
    let _ = tracing_subscriber::registry()
        .with(export)
        .with(log.with_filter(filter))
        .try_init();
    // Said once the log is there. A refused configuration does not stop the host: it runs
    // without traces, as the OpenTelemetry SDKs do.
    if let Some(e) = refused {
        tracing::error!(error = %e, "traces off: their configuration is refused");
    }
    handle
}

fn block_on<T>(f: impl std::future::Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(f)
}

fn print_wasmplugin_crd() -> anyhow::Result<()> {
    use kube::CustomResourceExt;
    print!(
        "{}",
        crate::cases::input::to_yaml(&crate::registry::WasmPlugin::crd())?
    );
    Ok(())
}

fn run_host(args: crate::app::RunArgs) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(crate::app::run(args))
}

/// A returning member is a new member: the host's term under a Lease ended (`error`), so
/// this process replaces itself with a fresh run of the same command (same binary, same
/// arguments and environment, same PID), whose caches are listed anew. Returns only if that
/// fails.
fn start_afresh(error: anyhow::Error) -> anyhow::Error {
    use std::os::unix::process::CommandExt;
    tracing::error!(error = %error, "starting afresh as a new member");
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return anyhow::anyhow!("{error}; cannot find this binary to start afresh: {e}"),
    };
    let failed = std::process::Command::new(&exe)
        .args(std::env::args_os().skip(1))
        .exec();
    anyhow::anyhow!("{error}; cannot start {} afresh: {failed}", exe.display())
}

/// The name kubectl runs its plugin `wasmop` by (`kubectl wasmop ...`): the binary, or a
/// symlink to it, on `PATH` under this name.
const KUBECTL_PLUGIN: &str = "kubectl-wasmop";

/// The arguments; under the name [`KUBECTL_PLUGIN`] the help and errors say
/// `kubectl wasmop`, as kubectl users type it.
fn parse() -> Cli {
    use clap::{CommandFactory, FromArgMatches};
    let as_plugin = std::env::args_os().next().is_some_and(|arg0| {
        std::path::Path::new(&arg0).file_name() == Some(std::ffi::OsStr::new(KUBECTL_PLUGIN))
    });
    if !as_plugin {
        return Cli::parse();
    }
    let matches = Cli::command()
        .name("kubectl wasmop")
        .bin_name("kubectl wasmop")
        .get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

/// Parses the arguments and runs the command.
pub fn main() -> ExitCode {
    let cli = parse();
    // Registries are reached with reqwest on rustls; its crypto is ring's, as the API
    // server's (one TLS stack). Installing fails only if a provider is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let traces = match &cli.command {
        Command::Run(a) => init_logging("info", a.log_format == "json", Some(a.trace_guest_logs)),
        // A command reports a failed request itself, with what it was doing: kube's own
        // ERROR line for it would say the same twice, without the context.
        _ => init_logging("warn,kube_client=off", false, None),
    };
    let result = match &cli.command {
        Command::Run(a) => {
            let ran = run_host((**a).clone());
            // The runtime has stopped: the spans still queued go out before the process
            // ends or starts afresh.
            if let Some(traces) = traces {
                traces.shutdown();
            }
            match ran {
                Err(e) if e.is::<crate::k8s::lease::TermExpired>() => Err(start_afresh(e)),
                other => other.map(|()| ExitCode::SUCCESS),
            }
        }
        Command::Push(a) => block_on(crate::cmd::push::run(a)).map(exit_if),
        Command::Publish(a) => {
            block_on(crate::cmd::publish::publish(a)).map(|()| ExitCode::SUCCESS)
        }
        Command::Sign(a) => block_on(crate::cmd::publish::sign(a)).map(|()| ExitCode::SUCCESS),
        Command::Verify(a) => block_on(crate::cmd::publish::verify(a)).map(exit_if),
        Command::Promote(a) => block_on(crate::cmd::rollout::run(a, true)).map(exit_if),
        Command::Abort(a) => block_on(crate::cmd::rollout::run(a, false)).map(exit_if),
        Command::Status(a) => block_on(crate::cmd::status::run(a)).map(exit_if),
        Command::Replay(a) => offline::replay::run(a).map(exit_if),
        Command::Rbac(a) => crate::principals::manifest::run(a).map(|()| ExitCode::SUCCESS),
        Command::Crd => print_wasmplugin_crd().map(|()| ExitCode::SUCCESS),
        Command::Build(a) => block_on(crate::cmd::project::run(a)).map(|()| ExitCode::SUCCESS),
        Command::New(a) => crate::cmd::scaffold::run(a).map(|()| ExitCode::SUCCESS),
        Command::Dev(a) => block_on(crate::cmd::dev::run(a)).map(|()| ExitCode::SUCCESS),
        Command::Info(a) => offline::info::run(a).map(|()| ExitCode::SUCCESS),
        Command::Compile(a) => offline::compile::run(a).map(|()| ExitCode::SUCCESS),
        Command::Plan(a) => offline::plan::run(a).map(exit_if),
        Command::Test(a) => crate::cmd::offline::test::run(a).map(exit_if),
        Command::WasiRun(a) => {
            offline::wasi_run::run(a).map(|c| ExitCode::from(c.clamp(0, 255) as u8))
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("wasmop: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn exit_if(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
