//! `wasmop new`: a standalone plugin, outside any workspace, that builds, passes its unit
//! tests and its golden case untouched. In Rust: a crate that builds with a plain `cargo
//! build --release` and tests under wasmtime with `cargo test`. In Python, TypeScript or Go:
//! a package on the wasmop SDK of a checkout, built and tested by `wasmop build --test`
//! (componentize-py and pytest; componentize-js, tsc and node's test runner; Go for
//! `GOOS=wasip1` and jco's wit-component, then gofmt, go vet and go test). The same decision
//! in every language, so the same golden case.
//!
//! Two templates: the default keeps a ConfigMap per object; `--effects` keeps a record per
//! object in an outside HTTP API by requests the host sends (contract 0.4.0,
//! `docs/effects.md`). The effects variant swaps the plugin's source, its tests, the golden
//! case, the sample and the README of a language's file list; the build files are shared.
//!
//! Split by concern: [`names`] (what a name, a kind, a group and a version may be) and the
//! templates under `template/` (rendered by [`render`]).

pub mod names;

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::cmd::project::Lang;

/// Arguments of `wasmop new`.
#[derive(Debug, clap::Args)]
pub struct NewArgs {
    /// Name of the plugin: a DNS label (lowercase letters, digits, '-'), also the crate's name.
    pub name: String,
    /// Kind of its custom resource, UpperCamelCase (for example `PodReplica`).
    #[arg(long)]
    pub kind: String,
    /// API group of the custom resource (for example `example.com`).
    #[arg(long)]
    pub group: String,
    /// API version of the custom resource.
    #[arg(long, default_value = "v1alpha1")]
    pub version: String,
    /// Plural resource name (default: the kind in lowercase with its English plural).
    #[arg(long)]
    pub plural: Option<String>,
    /// Directory to create (default: ./NAME); must not exist or be empty.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// The language of the plugin.
    #[arg(long, value_enum, default_value = "rust")]
    pub lang: Lang,
    /// The wasmop SDK of the language (`guests/sdk`, `guests/sdk-py`, `guests/sdk-ts` or
    /// `guests/sdk-go` of a wasmop checkout; default: the checkout this command runs in, or
    /// the one wasmop was built from).
    #[arg(long, conflicts_with = "sdk_git")]
    pub sdk: Option<PathBuf>,
    /// The Rust SDK as a git dependency instead (a repository URL).
    #[arg(long)]
    pub sdk_git: Option<String>,
    /// An operator with effects outside the cluster instead of the default (a ConfigMap per
    /// object): a record per object in an outside HTTP API, kept by requests the host sends.
    ///
    /// It keeps each object's spec as a record in the API at `spec.endpoint`: its plans carry
    /// requests the host sends (POST to create, PUT to update, DELETE in the cleanup of its
    /// finalizer), and its next decision reads their answers. It declares the origins it may
    /// reach (`https://api.example.com`, `http://127.0.0.1:*`); an admin grants them with
    /// `wasmop run --outbound-grant NAME=ORIGIN`. Its unit tests and golden case pass
    /// untouched, in every language. See docs/effects.md.
    #[arg(long)]
    pub effects: bool,
}

/// The values a template is rendered with.
#[derive(Debug, Clone)]
pub struct Values {
    /// Plugin and crate name.
    pub name: String,
    /// The kind.
    pub kind: String,
    /// The API group.
    pub group: String,
    /// The API version.
    pub version: String,
    /// The plural resource name.
    pub plural: String,
    /// The `wasmop-sdk` dependency, as a TOML inline table (Rust).
    pub sdk: String,
    /// The SDK's directory (Python, TypeScript, Go).
    pub sdk_path: String,
    /// The `wasmop` binary that runs the unit tests.
    pub wasmop: String,
}

/// The files of a new Python plugin: path inside the package, template.
const PYTHON_FILES: &[(&str, &str)] = &[
    (
        "pyproject.toml",
        include_str!("template/python/pyproject.toml.tmpl"),
    ),
    ("app.py", include_str!("template/python/app.py.tmpl")),
    (
        "{{crate}}/__init__.py",
        include_str!("template/python/plugin.py.tmpl"),
    ),
    (
        "tests/test_{{crate}}.py",
        include_str!("template/python/test_plugin.py.tmpl"),
    ),
    (".gitignore", include_str!("template/python/gitignore.tmpl")),
    (
        "cases/01-first-decision.yaml",
        include_str!("template/case.yaml.tmpl"),
    ),
    ("sample.yaml", include_str!("template/sample.yaml.tmpl")),
    ("README.md", include_str!("template/python/README.md.tmpl")),
];

/// The files of a new TypeScript plugin: path inside the package, template.
const TYPESCRIPT_FILES: &[(&str, &str)] = &[
    (
        "package.json",
        include_str!("template/typescript/package.json.tmpl"),
    ),
    (
        "tsconfig.json",
        include_str!("template/typescript/tsconfig.json.tmpl"),
    ),
    (
        "src/app.ts",
        include_str!("template/typescript/app.ts.tmpl"),
    ),
    (
        "src/plugin.ts",
        include_str!("template/typescript/plugin.ts.tmpl"),
    ),
    (
        "test/plugin.test.ts",
        include_str!("template/typescript/plugin.test.ts.tmpl"),
    ),
    (
        ".gitignore",
        include_str!("template/typescript/gitignore.tmpl"),
    ),
    (
        "cases/01-first-decision.yaml",
        include_str!("template/case.yaml.tmpl"),
    ),
    ("sample.yaml", include_str!("template/sample.yaml.tmpl")),
    (
        "README.md",
        include_str!("template/typescript/README.md.tmpl"),
    ),
];

/// The files of a new Go plugin: path inside the module, template. The plugin's package is
/// `{{crate}}` (a Go package name has no '-'); its files are not named after the plugin, so
/// that no name reads as a build constraint (`_test`, `_linux`, `_wasm`, ...).
const GO_FILES: &[(&str, &str)] = &[
    ("go.mod", include_str!("template/go/go.mod.tmpl")),
    ("main.go", include_str!("template/go/main.go.tmpl")),
    (
        "{{crate}}/plugin.go",
        include_str!("template/go/plugin.go.tmpl"),
    ),
    (
        "{{crate}}/plugin_test.go",
        include_str!("template/go/plugin_test.go.tmpl"),
    ),
    (".gitignore", include_str!("template/go/gitignore.tmpl")),
    (
        "cases/01-first-decision.yaml",
        include_str!("template/case.yaml.tmpl"),
    ),
    ("sample.yaml", include_str!("template/sample.yaml.tmpl")),
    ("README.md", include_str!("template/go/README.md.tmpl")),
];

/// The files of a new plugin in `lang` (the default template).
fn default_files(lang: Lang) -> &'static [(&'static str, &'static str)] {
    match lang {
        Lang::Rust => FILES,
        Lang::Python => PYTHON_FILES,
        Lang::Typescript => TYPESCRIPT_FILES,
        Lang::Go => GO_FILES,
    }
}

/// The files `--effects` swaps in, in every language: the golden case and the sample.
const EFFECTS_SHARED: &[(&str, &str)] = &[
    (
        "cases/01-first-decision.yaml",
        include_str!("template/effects/case.yaml.tmpl"),
    ),
    (
        "sample.yaml",
        include_str!("template/effects/sample.yaml.tmpl"),
    ),
];

/// The files `--effects` swaps in for a Rust plugin (its unit tests are in `src/lib.rs`).
const EFFECTS_RUST: &[(&str, &str)] = &[
    ("src/lib.rs", include_str!("template/effects/lib.rs.tmpl")),
    ("README.md", include_str!("template/effects/README.md.tmpl")),
];

/// The files `--effects` swaps in for a Python plugin.
const EFFECTS_PYTHON: &[(&str, &str)] = &[
    (
        "{{crate}}/__init__.py",
        include_str!("template/effects/python/plugin.py.tmpl"),
    ),
    (
        "tests/test_{{crate}}.py",
        include_str!("template/effects/python/test_plugin.py.tmpl"),
    ),
    (
        "README.md",
        include_str!("template/effects/python/README.md.tmpl"),
    ),
];

/// The files `--effects` swaps in for a TypeScript plugin.
const EFFECTS_TYPESCRIPT: &[(&str, &str)] = &[
    (
        "src/plugin.ts",
        include_str!("template/effects/typescript/plugin.ts.tmpl"),
    ),
    (
        "test/plugin.test.ts",
        include_str!("template/effects/typescript/plugin.test.ts.tmpl"),
    ),
    (
        "README.md",
        include_str!("template/effects/typescript/README.md.tmpl"),
    ),
];

/// The files `--effects` swaps in for a Go plugin.
const EFFECTS_GO: &[(&str, &str)] = &[
    (
        "{{crate}}/plugin.go",
        include_str!("template/effects/go/plugin.go.tmpl"),
    ),
    (
        "{{crate}}/plugin_test.go",
        include_str!("template/effects/go/plugin_test.go.tmpl"),
    ),
    (
        "README.md",
        include_str!("template/effects/go/README.md.tmpl"),
    ),
];

/// What `--effects` swaps into the default files of `lang`, by path.
fn effects_swaps(lang: Lang) -> [&'static [(&'static str, &'static str)]; 2] {
    let own = match lang {
        Lang::Rust => EFFECTS_RUST,
        Lang::Python => EFFECTS_PYTHON,
        Lang::Typescript => EFFECTS_TYPESCRIPT,
        Lang::Go => EFFECTS_GO,
    };
    [EFFECTS_SHARED, own]
}

/// The files of a new plugin in `lang`: the default template's, or with `effects` the same
/// list with the entries of [`effects_swaps`] in place of those of the same path.
fn files(lang: Lang, effects: bool) -> Vec<(&'static str, &'static str)> {
    let swaps = if effects {
        effects_swaps(lang)
    } else {
        [&[][..]; 2]
    };
    default_files(lang)
        .iter()
        .map(|&(path, template)| {
            swaps
                .iter()
                .flat_map(|s| s.iter())
                .find(|(p, _)| *p == path)
                .copied()
                .unwrap_or((path, template))
        })
        .collect()
}

/// The files of a new Rust plugin: path inside the crate, template.
const FILES: &[(&str, &str)] = &[
    ("Cargo.toml", include_str!("template/Cargo.toml.tmpl")),
    (
        ".cargo/config.toml",
        include_str!("template/cargo-config.toml.tmpl"),
    ),
    (
        "rust-toolchain.toml",
        include_str!("../../../../rust-toolchain.toml"),
    ),
    (".gitignore", include_str!("template/gitignore.tmpl")),
    ("src/lib.rs", include_str!("template/lib.rs.tmpl")),
    (
        "cases/01-first-decision.yaml",
        include_str!("template/case.yaml.tmpl"),
    ),
    ("sample.yaml", include_str!("template/sample.yaml.tmpl")),
    ("README.md", include_str!("template/README.md.tmpl")),
    // The versions wasmop and its SDK are built and tested with: the new crate starts from
    // them (cargo drops what it does not use), so it builds as this checkout does.
    ("Cargo.lock", include_str!("../../../../Cargo.lock")),
];

/// `template` with every `{{key}}` replaced.
pub fn render(template: &str, v: &Values) -> String {
    template
        .replace("{{name}}", &v.name)
        .replace("{{crate}}", &v.name.replace('-', "_"))
        .replace("{{Kind}}", &v.kind)
        .replace("{{group}}", &v.group)
        .replace("{{version}}", &v.version)
        .replace("{{plural}}", &v.plural)
        .replace("{{sdk}}", &v.sdk)
        .replace("{{sdk_path}}", &toml_escape(&v.sdk_path))
        .replace("{{wasmop}}", &toml_escape(&v.wasmop))
}

fn toml_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// Whether `dir` holds the wasmop SDK crate.
fn is_sdk(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("Cargo.toml"))
        .is_ok_and(|t| t.contains("name = \"wasmop-sdk\""))
}

/// The SDK of the checkout around `from`, else of the checkout wasmop was built from.
fn checkout_sdk(from: &Path) -> Option<PathBuf> {
    crate::cmd::checkout::find(from, "guests/sdk/Cargo.toml")
        .map(|root| root.join("guests/sdk"))
        .filter(|d| is_sdk(d))
}

/// Where the SDK of `lang` is in a checkout, and the file that marks it.
fn sdk_in_checkout(lang: Lang) -> (&'static str, &'static str) {
    match lang {
        Lang::Rust => ("guests/sdk", "Cargo.toml"),
        Lang::Python => ("guests/sdk-py", "wasmop_sdk/__init__.py"),
        Lang::Typescript => ("guests/sdk-ts", "src/component.ts"),
        Lang::Go => ("guests/sdk-go", "go.mod"),
    }
}

/// The directory of the Python, TypeScript or Go SDK (`--sdk`, else the checkout's).
fn sdk_directory(args: &NewArgs) -> anyhow::Result<String> {
    let (dir, marker) = sdk_in_checkout(args.lang);
    let path = match &args.sdk {
        Some(p) if p.join(marker).is_file() => p.clone(),
        Some(p) => anyhow::bail!(
            "{}: not the wasmop {} SDK (no {marker} there; it is `{dir}` in a wasmop checkout)",
            p.display(),
            args.lang.name()
        ),
        None => crate::cmd::checkout::find(&std::env::current_dir()?, &format!("{dir}/{marker}"))
            .map(|root| root.join(dir))
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "cannot find the wasmop {} SDK: run `wasmop new` inside a wasmop checkout, or pass --sdk PATH (a checkout's {dir})",
                    args.lang.name()
                )
            })?,
    };
    let path = path
        .canonicalize()
        .with_context(|| format!("{}", path.display()))?;
    Ok(path.to_string_lossy().into_owned())
}

fn sdk_dependency(args: &NewArgs) -> anyhow::Result<String> {
    if let Some(url) = &args.sdk_git {
        return Ok(format!("{{ git = \"{}\" }}", toml_escape(url)));
    }
    let path = match &args.sdk {
        Some(p) if is_sdk(p) => p.clone(),
        Some(p) => anyhow::bail!(
            "{}: not the wasmop SDK (no Cargo.toml of `wasmop-sdk` there; it is `guests/sdk` in a wasmop checkout)",
            p.display()
        ),
        None => checkout_sdk(&std::env::current_dir()?).ok_or_else(|| {
            anyhow::anyhow!(
                "cannot find the wasmop SDK: run `wasmop new` inside a wasmop checkout, or pass --sdk PATH (a checkout's guests/sdk) or --sdk-git URL"
            )
        })?,
    };
    let path = path
        .canonicalize()
        .with_context(|| format!("{}", path.display()))?;
    Ok(format!(
        "{{ path = \"{}\" }}",
        toml_escape(&path.to_string_lossy())
    ))
}

/// The Go keywords, which cannot name a package.
const GO_KEYWORDS: &[&str] = &[
    "break",
    "case",
    "chan",
    "const",
    "continue",
    "default",
    "defer",
    "else",
    "fallthrough",
    "for",
    "func",
    "go",
    "goto",
    "if",
    "import",
    "interface",
    "map",
    "package",
    "range",
    "return",
    "select",
    "struct",
    "switch",
    "type",
    "var",
];

/// The module paths `go` reserves: the standard library's top-level packages (Go 1.26; a
/// module of the same path makes their imports ambiguous) and the patterns it treats apart.
const GO_RESERVED: &[&str] = &[
    "all", "bufio", "builtin", "bytes", "cmd", "cmp", "context", "crypto", "embed", "encoding",
    "errors", "expvar", "flag", "fmt", "hash", "html", "image", "io", "iter", "log", "maps",
    "math", "mime", "net", "os", "path", "plugin", "reflect", "regexp", "runtime", "slices",
    "sort", "std", "strconv", "strings", "structs", "sync", "syscall", "testing", "time",
    "unicode", "unique", "unsafe", "weak",
];

/// Whether `name` (a valid plugin name) can be a Go module's path (`{{name}}`) and name its
/// package (`{{crate}}`), which the main package imports.
fn check_go_package(name: &str) -> anyhow::Result<()> {
    if GO_KEYWORDS.contains(&name) || name == "main" {
        anyhow::bail!(
            "`{name}` cannot name a Go plugin: its package would be `{name}`, a Go keyword or the main package (for example `{name}-op`)"
        );
    }
    if GO_RESERVED.contains(&name) {
        anyhow::bail!(
            "`{name}` cannot name a Go plugin: its module would be `{name}`, a package of Go's standard library (for example `{name}-op`)"
        );
    }
    Ok(())
}

/// Checks the arguments and works out the values and the directory.
pub fn plan(args: &NewArgs) -> anyhow::Result<(Values, PathBuf)> {
    let checks = [
        names::check_name(&args.name),
        names::check_kind(&args.kind),
        names::check_group(&args.group),
        names::check_version(&args.version),
    ];
    if let Some(Err(e)) = checks.into_iter().find(Result::is_err) {
        anyhow::bail!(e);
    }
    if args.lang == Lang::Go {
        check_go_package(&args.name)?;
    }
    let plural = args
        .plural
        .clone()
        .unwrap_or_else(|| names::plural_of(&args.kind));
    names::check_name(&plural).map_err(|_| {
        anyhow::anyhow!("`{plural}` is not a valid plural: lowercase letters, digits and '-'")
    })?;
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(&args.name));
    if let Ok(mut entries) = std::fs::read_dir(&dir)
        && entries.next().is_some()
    {
        anyhow::bail!(
            "{} exists and is not empty: choose another --dir, or remove it",
            dir.display()
        );
    }
    if dir.exists() && !dir.is_dir() {
        anyhow::bail!("{} exists and is not a directory", dir.display());
    }
    let wasmop = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .context("locating the wasmop binary (the unit tests' runner)")?;
    let values = Values {
        name: args.name.clone(),
        kind: args.kind.clone(),
        group: args.group.clone(),
        version: args.version.clone(),
        plural,
        sdk: String::new(),
        sdk_path: String::new(),
        wasmop: wasmop.to_string_lossy().into_owned(),
    };
    let values = match args.lang {
        Lang::Rust => Values {
            sdk: sdk_dependency(args)?,
            ..values
        },
        _ if args.sdk_git.is_some() => {
            anyhow::bail!("--sdk-git is for Rust plugins; pass --sdk PATH (a checkout's SDK)")
        }
        _ => Values {
            sdk_path: sdk_directory(args)?,
            ..values
        },
    };
    Ok((values, dir))
}

/// Writes the plugin for `values` in `lang` into `dir` (with `effects`, the effects
/// variant); returns the files written.
pub fn write(
    values: &Values,
    lang: Lang,
    effects: bool,
    dir: &Path,
) -> anyhow::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for (path, template) in files(lang, effects) {
        let file = dir.join(render(path, values));
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&file, render(template, values))
            .with_context(|| format!("writing {}", file.display()))?;
        written.push(file);
    }
    Ok(written)
}

/// Runs `wasmop new`.
pub fn run(args: &NewArgs) -> anyhow::Result<()> {
    let (values, dir) = plan(args)?;
    write(&values, args.lang, args.effects, &dir)?;
    // What runs it on a cluster: the effects variant's requests reach only granted origins.
    let cluster = if args.effects {
        format!(
            "(see README.md to run it on a cluster; an admin grants the API's origin: wasmop run --outbound-grant {}=https://api.example.com)",
            values.name
        )
    } else {
        "(see README.md to run it on a cluster)".to_string()
    };
    let what = if args.effects {
        "operator with effects outside the cluster"
    } else {
        "plugin"
    };
    if args.lang != Lang::Rust {
        let wasm = format!("build/{}.wasm", values.name.replace('-', "_"));
        println!(
            "created {} {what} `{}` for {} ({}/{}) in {}\n\nnext:\n  cd {}\n  wasmop build --test         # {wasm}, then its unit tests\n  wasmop test {wasm} cases\n  {cluster}",
            args.lang.name(),
            values.name,
            values.kind,
            values.group,
            values.version,
            dir.display(),
            dir.display()
        );
        return Ok(());
    }
    let wasm = format!(
        "target/wasm32-wasip2/release/{}.wasm",
        values.name.replace('-', "_")
    );
    println!(
        "created {what} `{}` for {} ({}/{}) in {}\n\nnext:\n  cd {}\n  cargo build --release      # {wasm}\n  cargo test                 # unit tests under wasmtime\n  wasmop test {wasm} cases\n  {cluster}",
        values.name,
        values.kind,
        values.group,
        values.version,
        dir.display(),
        dir.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values() -> Values {
        Values {
            name: "my-op".into(),
            kind: "Greeting".into(),
            group: "example.com".into(),
            version: "v1alpha1".into(),
            plural: "greetings".into(),
            sdk: "{ path = \"/sdk\" }".into(),
            sdk_path: "/sdk-py".into(),
            wasmop: "/bin/wasmop".into(),
        }
    }

    #[test]
    fn every_placeholder_is_filled() {
        for (path, template) in [FILES, PYTHON_FILES, TYPESCRIPT_FILES, GO_FILES].concat() {
            let out = render(template, &values());
            assert!(
                !out.contains("{{name}}") && !out.contains("{{Kind}}"),
                "{path}"
            );
            for key in [
                "crate", "group", "version", "plural", "sdk", "sdk_path", "wasmop",
            ] {
                assert!(!out.contains(&format!("{{{{{key}}}}}")), "{path}: {key}");
            }
        }
        let go_mod = render(GO_FILES[0].1, &values());
        assert!(go_mod.contains("module my-op\n") && go_mod.contains("wasmop/sdk => /sdk-py\n"));
        assert_eq!(render(GO_FILES[2].0, &values()), "my_op/plugin.go");
        let go = render(GO_FILES[2].1, &values());
        assert!(go.contains("package my_op\n") && go.contains("type GreetingPlugin struct{}"));
        let lib = render(FILES[4].1, &values());
        assert!(lib.contains("pub struct GreetingSpec") && lib.contains("\"greetings\""));
    }

    #[test]
    fn the_effects_variant_renders_in_every_language() {
        for lang in [Lang::Rust, Lang::Python, Lang::Typescript, Lang::Go] {
            let default = files(lang, false);
            let effects = files(lang, true);
            // The same paths (build files shared); every swap found its file.
            let paths = |f: &[(&'static str, &'static str)]| -> Vec<&'static str> {
                f.iter().map(|(p, _)| *p).collect()
            };
            assert_eq!(paths(&default), paths(&effects), "{lang:?}");
            for swaps in effects_swaps(lang) {
                for (path, template) in swaps {
                    assert!(effects.contains(&(*path, *template)), "{lang:?}: {path}");
                }
            }
            let swapped = default.iter().zip(&effects).filter(|(d, e)| d.1 != e.1);
            assert_eq!(
                swapped.count(),
                5 - usize::from(lang == Lang::Rust),
                "{lang:?}"
            );
            for (path, template) in &effects {
                let (path, out) = (render(path, &values()), render(template, &values()));
                assert!(
                    !path.contains("{{") && !out.contains("{{"),
                    "{lang:?}: {path}"
                );
            }
            let source = effects
                .iter()
                .map(|(_, t)| render(t, &values()))
                .collect::<String>();
            for needle in [
                "https://api.example.com",
                "http://127.0.0.1:*",
                "example.com/record",
                "update-",
                "-create",
                "-delete",
                "--outbound-grant my-op=",
            ] {
                assert!(source.contains(needle), "{lang:?}: {needle}");
            }
        }
        assert_eq!(
            render(files(Lang::Go, true)[2].0, &values()),
            "my_op/plugin.go"
        );
    }

    #[test]
    fn refuses_bad_names_and_a_non_empty_directory() {
        let dir = std::env::temp_dir().join(format!("wasmop-new-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("keep"), "").unwrap();
        let args = |name: &str, kind: &str| NewArgs {
            name: name.into(),
            kind: kind.into(),
            group: "example.com".into(),
            version: "v1alpha1".into(),
            plural: None,
            dir: Some(dir.clone()),
            lang: Lang::Rust,
            sdk: None,
            sdk_git: Some("https://example.invalid/wasmop".into()),
            effects: false,
        };
        let err = |a: NewArgs| plan(&a).unwrap_err().to_string();
        assert!(err(args("My_Op", "Greeting")).contains("not a valid plugin name"));
        assert!(err(args("my-op", "greeting")).contains("not a valid kind"));
        assert!(err(args("my-op", "Greeting")).contains("is not empty"));
        let go = |name: &str| NewArgs {
            lang: Lang::Go,
            sdk_git: None,
            ..args(name, "Greeting")
        };
        assert!(err(go("type")).contains("cannot name a Go plugin"));
        assert!(err(go("main")).contains("cannot name a Go plugin"));
        assert!(err(go("time")).contains("standard library"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
