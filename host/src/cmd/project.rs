//! A plugin's source directory in any language the host runs: a Rust crate (`Cargo.toml`), a
//! Python package (`pyproject.toml` with `[tool.wasmop]`), a TypeScript package
//! (`package.json` with a `wasmop` member) or a Go module (`go.mod` replacing `wasmop/sdk`).
//! `wasmop build` and `wasmop dev` build each the way its language does: cargo for Rust; for
//! the others the pinned toolchains of the wasmop checkout the plugin's SDK comes from
//! (`guests/toolchains/plugin`, next to the SDK: componentize-py; tsc, rolldown and
//! componentize-js; `guests/toolchains/go/plugin`: go and jco).

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::Value;
use tokio::process::Command;

/// The languages a plugin may be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// Rust, with the `wasmop-sdk` crate (cargo, `wasm32-wasip2`).
    Rust,
    /// Python, with `guests/sdk-py` (componentize-py; tests with pytest).
    Python,
    /// TypeScript, with `guests/sdk-ts` (componentize-js; tests with node's test runner).
    Typescript,
    /// Go (stock Go, `GOOS=wasip1`), with `guests/sdk-go` (its wit-bindgen bindings, jco's
    /// wit-component and the WASI reactor adapter; tests with `go test`).
    Go,
}

impl Lang {
    /// The name used on the command line and in messages.
    pub fn name(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::Typescript => "typescript",
            Lang::Go => "go",
        }
    }
}

/// A plugin's source directory.
#[derive(Debug, Clone)]
pub struct Project {
    /// Its directory.
    pub dir: PathBuf,
    /// Its package name.
    pub name: String,
    /// Its language.
    pub lang: Lang,
    /// The component a build writes.
    pub wasm: PathBuf,
    /// The toolchain script that builds it (Python, TypeScript, Go).
    toolchain: Option<PathBuf>,
}

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

/// Directories never looked into for sources: build outputs, dependencies, caches.
pub const NOT_SOURCES: &[&str] = &[
    "target",
    "build",
    "node_modules",
    "__pycache__",
    ".pytest_cache",
    ".git",
];

/// The toolchain script of the wasmop checkout holding `sdk` (its `guests/sdk-py`,
/// `guests/sdk-ts` or `guests/sdk-go`).
fn toolchain_of(sdk: &Path, lang: Lang, manifest: &Path) -> anyhow::Result<PathBuf> {
    let script = match lang {
        Lang::Go => sdk.join("../toolchains/go/plugin"),
        _ => sdk.join("../toolchains/plugin"),
    };
    if !script.is_file() {
        anyhow::bail!(
            "{}: the SDK it names ({}) is not in a wasmop checkout (no guests/toolchains/plugin next to it)",
            manifest.display(),
            sdk.display()
        );
    }
    Ok(script)
}

impl Project {
    /// Reads the plugin in `dir`: its language, name and where its component goes.
    pub async fn open(dir: &Path) -> anyhow::Result<Project> {
        let dir = dir
            .canonicalize()
            .with_context(|| format!("{}: no such directory", dir.display()))?;
        if dir.join("Cargo.toml").is_file() {
            return Self::rust(&dir).await;
        }
        let pyproject = dir.join("pyproject.toml");
        if pyproject.is_file() {
            let text = std::fs::read_to_string(&pyproject)?;
            let doc: toml::Table = toml::from_str(&text)
                .with_context(|| format!("{}: not valid TOML", pyproject.display()))?;
            let settings = doc
                .get("tool")
                .and_then(|t| t.get("wasmop"))
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "{}: no [tool.wasmop] table (create a plugin with `wasmop new NAME --lang python ...`)",
                        pyproject.display()
                    )
                })?;
            let name = doc
                .get("project")
                .and_then(|p| p.get("name"))
                .and_then(|n| n.as_str())
                .ok_or_else(|| anyhow::anyhow!("{}: no [project] name", pyproject.display()))?;
            let sdk = settings
                .get("sdk")
                .and_then(|s| s.as_str())
                .ok_or_else(|| {
                    anyhow::anyhow!("{}: no `sdk` in [tool.wasmop]", pyproject.display())
                })?;
            return Self::scripted(&dir, name, Lang::Python, sdk, &pyproject);
        }
        let gomod = dir.join("go.mod");
        if gomod.is_file() {
            let text = std::fs::read_to_string(&gomod)?;
            let module = text
                .lines()
                .find_map(|l| l.trim().strip_prefix("module "))
                .ok_or_else(|| anyhow::anyhow!("{}: no module line", gomod.display()))?;
            // `replace wasmop/sdk => PATH`, alone or in a replace block.
            let sdk = text
                .lines()
                .filter_map(|l| l.split_once("=>"))
                .find(|(from, _)| from.split_whitespace().last() == Some("wasmop/sdk"))
                .map(|(_, to)| to.trim())
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "{}: no `replace wasmop/sdk => PATH` (the Go SDK of a wasmop checkout, guests/sdk-go)",
                        gomod.display()
                    )
                })?;
            let name = module.rsplit('/').next().unwrap_or(module);
            return Self::scripted(&dir, name, Lang::Go, sdk, &gomod);
        }
        let package = dir.join("package.json");
        if package.is_file() {
            let doc: Value = serde_json::from_slice(&std::fs::read(&package)?)
                .with_context(|| format!("{}: not valid JSON", package.display()))?;
            let sdk = doc["wasmop"]["sdk"].as_str().ok_or_else(|| {
                anyhow::anyhow!(
                    "{}: no \"wasmop\": {{\"sdk\": ...}} member (create a plugin with `wasmop new NAME --lang typescript ...`)",
                    package.display()
                )
            })?;
            let name = doc["name"]
                .as_str()
                .ok_or_else(|| anyhow::anyhow!("{}: no name", package.display()))?;
            return Self::scripted(&dir, name, Lang::Typescript, sdk, &package);
        }
        anyhow::bail!(
            "{}: not a plugin (no Cargo.toml, pyproject.toml or package.json; create one with `wasmop new NAME --kind Kind --group example.com [--lang python|typescript|go]`)",
            dir.display()
        )
    }

    fn scripted(
        dir: &Path,
        name: &str,
        lang: Lang,
        sdk: &str,
        manifest: &Path,
    ) -> anyhow::Result<Project> {
        let sdk = dir.join(sdk);
        let toolchain = toolchain_of(&sdk, lang, manifest)?;
        Ok(Project {
            dir: dir.to_path_buf(),
            name: name.to_string(),
            lang,
            wasm: dir
                .join("build")
                .join(format!("{}.wasm", name.replace('-', "_"))),
            toolchain: Some(toolchain),
        })
    }

    /// A Rust crate (`cargo metadata`).
    async fn rust(dir: &Path) -> anyhow::Result<Project> {
        let manifest = dir.join("Cargo.toml");
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
        Ok(Project {
            dir: dir.to_path_buf(),
            name,
            lang: Lang::Rust,
            wasm: target_dir.join(format!("wasm32-wasip2/release/{lib_name}.wasm")),
            toolchain: None,
        })
    }

    /// Builds the component, the compiler's messages passed through: its path on success,
    /// `None` when the build fails.
    pub async fn build(&self) -> anyhow::Result<Option<PathBuf>> {
        let status = match &self.toolchain {
            None => cargo()
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
                .context("running cargo build")?,
            Some(script) => Command::new(script)
                .arg("build")
                .arg(&self.dir)
                .arg(&self.wasm)
                .status()
                .await
                .with_context(|| format!("running {}", script.display()))?,
        };
        Ok(status.success().then(|| self.wasm.clone()))
    }

    /// Runs the plugin's own unit tests natively (pytest, node's test runner; `cargo test`,
    /// which runs them under wasmtime, for Rust): whether they pass.
    pub async fn test(&self) -> anyhow::Result<bool> {
        let status = match &self.toolchain {
            None => cargo()
                .arg("test")
                .arg("--manifest-path")
                .arg(self.dir.join("Cargo.toml"))
                .status()
                .await
                .context("running cargo test")?,
            Some(script) => Command::new(script)
                .arg("test")
                .arg(&self.dir)
                .status()
                .await
                .with_context(|| format!("running {}", script.display()))?,
        };
        Ok(status.success())
    }
}

/// Arguments of `wasmop build`.
#[derive(Debug, clap::Args)]
pub struct BuildArgs {
    /// The plugin's directory (a Rust crate, a Python or TypeScript package, a Go module, as
    /// `wasmop new` makes them).
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// Run the plugin's own unit tests too, after the build (cargo test, pytest,
    /// node --test, go test).
    #[arg(long)]
    pub test: bool,
}

/// Runs `wasmop build`: builds the component and prints its path.
pub async fn run(args: &BuildArgs) -> anyhow::Result<()> {
    let project = Project::open(&args.dir).await?;
    eprintln!(
        "building {} ({}) in {} ...",
        project.name,
        project.lang.name(),
        project.dir.display()
    );
    let Some(wasm) = project.build().await? else {
        anyhow::bail!("the build of {} failed (messages above)", project.name);
    };
    if args.test && !project.test().await? {
        anyhow::bail!("the unit tests of {} failed (messages above)", project.name);
    }
    println!("{}", wasm.display());
    Ok(())
}
