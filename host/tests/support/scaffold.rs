//! Plugins scaffolded by `wasmop new` in a scratch directory, built as their author would.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kube::api::ApiResource;

/// Where scaffolded crates are built: kept between runs (beside the workspace's target
/// directory), so a second run compiles only the new crate.
pub fn scaffold_target() -> PathBuf {
    let cache = std::env::var("WASMOP_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/wasmop"));
    cache.join("scaffold-target")
}

/// The component a release build of the crate `name` writes.
pub fn component_of(name: &str) -> PathBuf {
    scaffold_target().join(format!(
        "wasm32-wasip2/release/{}.wasm",
        name.replace('-', "_")
    ))
}

/// Output and error text of a finished command.
pub fn text_of(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs `cmd`; panics with its output unless it succeeds.
pub fn run_ok(cmd: &mut Command, what: &str) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(out.status.success(), "{what} failed:\n{}", text_of(&out));
    out
}

/// What this workspace's build sets in the environment (the Makefile's target, flags and
/// clippy-driver as the workspace wrapper) and an author's build does not have.
pub const OUR_BUILD_ENV: [&str; 4] = [
    "CARGO_BUILD_TARGET",
    "RUSTFLAGS",
    "RUSTC_WORKSPACE_WRAPPER",
    "CLIPPY_ARGS",
];

/// Removes [`OUR_BUILD_ENV`] from `cmd`.
pub fn without_our_build_env(cmd: &mut Command) -> &mut Command {
    for var in OUR_BUILD_ENV {
        cmd.env_remove(var);
    }
    cmd
}

/// Sets up `cmd` to build in the scaffolded crates' target directory, and nothing of this
/// workspace's build leaks in.
pub fn author_env(cmd: &mut Command) -> &mut Command {
    without_our_build_env(cmd)
        .env("CARGO_TARGET_DIR", scaffold_target())
        .env("CARGO_TERM_COLOR", "never")
}

/// `cargo ARGS` in the scaffolded crate, as its author would run it.
pub fn cargo(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.args(args).current_dir(dir);
    author_env(&mut c);
    c
}

/// `wasmop new NAME --kind Greeting --group example.com --dir DIR`, run from this checkout
/// (so the SDK dependency defaults to it).
pub fn new_greeter_command(name: &str, dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_wasmop"));
    c.args(["new", name, "--kind", "Greeting", "--group", "example.com"])
        .arg("--dir")
        .arg(dir)
        .current_dir(super::repo());
    c
}

/// [`new_greeter_command`], which must succeed.
pub fn new_greeter(name: &str, dir: &Path) -> Output {
    run_ok(&mut new_greeter_command(name, dir), "wasmop new")
}

/// The Greeting API resource of the scaffolded plugin.
pub fn greeting_resource() -> ApiResource {
    ApiResource {
        group: "example.com".into(),
        version: "v1alpha1".into(),
        api_version: "example.com/v1alpha1".into(),
        kind: "Greeting".into(),
        plural: "greetings".into(),
    }
}

/// The languages `wasmop new --lang` takes.
pub const LANGS: [&str; 4] = ["rust", "python", "typescript", "go"];

/// `wasmop new NAME --kind Note --group example.com --lang LANG --effects --dir DIR`, run
/// from this checkout (so the SDK defaults to its own).
pub fn new_effects_command(name: &str, lang: &str, dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_wasmop"));
    c.args(["new", name, "--kind", "Note", "--group", "example.com"])
        .args(["--lang", lang, "--effects", "--dir"])
        .arg(dir)
        .current_dir(super::repo());
    c
}

/// `wasmop build --test` in the plugin at `dir`, as its author would run it (a Rust crate
/// builds in [`scaffold_target`]): the build, then its unit tests in the language's own
/// runner. Returns the output and the component (the last line it prints).
pub fn build_and_test(dir: &Path, what: &str) -> (Output, PathBuf) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_wasmop"));
    c.args(["build", "--test"]).current_dir(dir);
    author_env(&mut c);
    let out = run_ok(&mut c, what);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let wasm = PathBuf::from(stdout.lines().rfind(|l| !l.trim().is_empty()).unwrap_or(""));
    assert!(
        wasm.is_file(),
        "{what}: no component at `{}`",
        wasm.display()
    );
    (out, wasm)
}
