//! The host's modules are layers: each imports only from the ones below it, so the sandbox
//! knows nothing of Kubernetes, the registry nothing of the controllers it starts, and the
//! commands sit on top of everything. This test reads every `crate::` path in the code
//! under `src/` (comments aside) and fails on one that points up or sideways.
//!
//! The map is `LAYERS`, bottom first; `src/lib.rs` and `docs/architecture.md` show it. A new
//! top-level module goes into `LAYERS` (and the table of `lib.rs`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The host's top-level modules, from the bottom: a module may use the ones before it.
const LAYERS: &[&str] = &[
    "runtime",
    "telemetry",
    "observe",
    "cases",
    "k8s",
    "oci",
    "effects",
    "plan",
    "principals",
    "rollout",
    "cache",
    "expect",
    "registry",
    "shards",
    "reconcile",
    "controller",
    "admission",
    "app",
    "cmd",
];

/// Imports allowed against the map, each with its reason. Keep it to a few lines.
const EXCEPTIONS: &[(&str, &str, &str)] = &[];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to (`None` for `lib.rs` and `main.rs`).
fn top_module(file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src()).unwrap();
    let first = rel.components().next()?.as_os_str().to_str()?.to_string();
    match first.strip_suffix(".rs") {
        Some("lib" | "main") => None,
        Some(stem) => Some(stem.to_string()),
        None => Some(first),
    }
}

/// The code of a line: no `//` comment, no string literal (a path in a message is not an
/// import).
fn code_of(line: &str) -> String {
    let mut out = String::new();
    let mut in_string = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if in_string => {
                chars.next();
            }
            '"' => in_string = !in_string,
            '/' if !in_string && chars.peek() == Some(&'/') => break,
            _ if !in_string => out.push(c),
            _ => {}
        }
    }
    out
}

/// The top-level modules named by `crate::NAME` paths in `code` (a `super::` path stays in
/// its own module: the code uses `crate::` paths across modules).
fn named_modules(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let rest = &code[at + "crate::".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            // `crate::{a, b}`: each name of the group.
            if let Some(group) = rest.strip_prefix('{') {
                let group = group.split('}').next().unwrap_or_default();
                for part in group.split(',') {
                    let part = part.trim();
                    let name: String = part
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() {
                        found.push(name);
                    }
                }
            }
        } else {
            found.push(name);
        }
    }
    found
}

/// Every import that breaks the map, as `file:line: from -> to`.
fn violations() -> Vec<String> {
    let rank = |m: &str| LAYERS.iter().position(|l| *l == m);
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.sort();
    let mut found = Vec::new();
    for file in files {
        let Some(from) = top_module(&file) else {
            continue;
        };
        let from_rank = rank(&from)
            .unwrap_or_else(|| panic!("{}: module `{from}` is not in LAYERS", file.display()));
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = code_of(line);
            let at = format!("{}:{}", file.display(), n + 1);
            if code.contains("super::super::") {
                found.push(format!("{at}: `super::super::` (use a `crate::` path)"));
            }
            for to in named_modules(&code) {
                if to == from {
                    continue;
                }
                let Some(to_rank) = rank(&to) else {
                    continue; // `crate::Item` of lib.rs, or a macro path
                };
                let allowed = EXCEPTIONS.iter().any(|(f, t, _)| *f == from && *t == to);
                if to_rank > from_rank && !allowed {
                    found.push(format!("{at}: {from} -> {to}"));
                }
            }
        }
    }
    found
}

#[test]
fn every_import_points_down_the_layers() {
    let found = violations();
    assert!(
        found.is_empty(),
        "{} imports against the layers (src/lib.rs and docs/architecture.md have the map):\n{}",
        found.len(),
        found.join("\n")
    );
}

#[test]
fn lib_declares_the_layers() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let declared: Vec<String> = lib
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let rest = l
                .strip_prefix("pub mod ")
                .or_else(|| l.strip_prefix("pub(crate) mod "))
                .or_else(|| l.strip_prefix("mod "))?;
            Some(rest.trim_end_matches(';').to_string())
        })
        .collect();
    let names: BTreeSet<&str> = LAYERS.iter().copied().collect();
    let declared: BTreeSet<&str> = declared.iter().map(String::as_str).collect();
    assert_eq!(declared, names, "src/lib.rs declares exactly the layers");
    for layer in LAYERS {
        assert!(
            lib.contains(&format!("[`{layer}`]")),
            "the table of src/lib.rs names `{layer}`"
        );
    }
    for (from, to, why) in EXCEPTIONS {
        assert!(names.contains(from) && names.contains(to) && !why.is_empty());
    }
}

#[test]
fn the_check_sees_an_upward_import() {
    // The reader itself: a registry file naming the controller is caught, in every form.
    for line in [
        "use crate::controller::ControllerDeps;",
        "    let d = crate::controller::run(x);",
        "use crate::{controller::Deps, runtime::Sandbox};",
    ] {
        assert!(
            named_modules(&code_of(line)).contains(&"controller".to_string()),
            "{line}"
        );
    }
    for line in [
        "// see crate::controller::run",
        r#"let s = "crate::controller";"#,
        "use wasmop_crate::controller;",
    ] {
        assert!(
            !named_modules(&code_of(line)).contains(&"controller".to_string()),
            "{line}"
        );
    }
}
