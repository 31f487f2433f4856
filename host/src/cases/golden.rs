//! Golden cases (what `wasmop test` runs), each a YAML file with the observed world in and the
//! expected outcome out, run through the real component in the production sandbox.
//!
//! A case file:
//! ```yaml
//! description: first reconcile creates all pods
//! now: 2026-01-01T00:00:00Z   # optional, default 2026-01-01T00:00:00Z
//! seed: 7                     # optional, default 0
//! object: {apiVersion: ..., kind: ..., metadata: ..., spec: ...}
//! objects: [...]              # the other objects of the namespace
//! expect:
//!   plan: {actions: [...], status: ..., events: [...]}   # or error: / fault:
//! ```

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use similar::TextDiff;

use crate::cases::decision::{Given, Outcome, decide, parse_time};
use crate::cases::input::{check_object, from_yaml, to_yaml};
use crate::runtime::{LoadedPlugin, Sandbox};

const DEFAULT_NOW: &str = "2026-01-01T00:00:00Z";

/// One golden case as stored on disk.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// What the case shows.
    pub description: String,
    /// The time handed to the plugin (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub now: Option<String>,
    /// The seed handed to the plugin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// The primary object.
    pub object: Value,
    /// Other objects of the namespace.
    #[serde(default)]
    pub objects: Vec<Value>,
    /// The objects a plan asked for and the answers to its requests.
    #[serde(flatten)]
    pub given: Given,
    /// The expected outcome.
    pub expect: Outcome,
}

/// The verdict on one case.
#[derive(Debug)]
pub struct CaseResult {
    /// The case file.
    pub path: PathBuf,
    /// `None` when the case passed, else a readable explanation (a diff).
    pub failure: Option<String>,
}

/// The case files of a directory, sorted by name.
pub fn case_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("{}: cannot read the cases directory", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    if files.is_empty() {
        anyhow::bail!("{}: no case files (*.yaml)", dir.display());
    }
    Ok(files)
}

/// Reads and checks one case file.
pub fn read_case(path: &Path) -> anyhow::Result<Case> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read", path.display()))?;
    let case: Case =
        from_yaml(&text).with_context(|| format!("{}: not a valid case", path.display()))?;
    check_object(&case.object).map_err(|e| anyhow::anyhow!("{}: object: {e}", path.display()))?;
    Ok(case)
}

/// What `plugin` decides on the case's observed world.
pub fn outcome_of(
    sandbox: &Sandbox,
    plugin: &LoadedPlugin,
    case: &Case,
) -> anyhow::Result<Outcome> {
    let now = parse_time(case.now.as_deref().unwrap_or(DEFAULT_NOW)).map_err(anyhow::Error::msg)?;
    decide(
        sandbox,
        plugin,
        &case.object,
        &case.objects,
        now,
        case.seed.unwrap_or(0),
        &case.given,
    )
}

/// Runs one case; with `update`, rewrites its expectation instead of comparing.
pub fn run_case(sandbox: &Sandbox, plugin: &LoadedPlugin, path: &Path, update: bool) -> CaseResult {
    let result = (|| -> anyhow::Result<Option<String>> {
        let mut case = read_case(path)?;
        let actual = outcome_of(sandbox, plugin, &case)?;
        if update {
            case.expect = actual;
            std::fs::write(path, to_yaml(&case)?)?;
            return Ok(None);
        }
        let want = to_yaml(&case.expect)?;
        let got = to_yaml(&actual)?;
        if serde_json::to_value(&case.expect)? == serde_json::to_value(&actual)? {
            return Ok(None);
        }
        let diff = TextDiff::from_lines(&want, &got)
            .unified_diff()
            .header("expected", "actual")
            .to_string();
        Ok(Some(format!("{}\n{diff}", case.description)))
    })();
    CaseResult {
        path: path.to_path_buf(),
        failure: result.unwrap_or_else(|e| Some(format!("{e:#}"))),
    }
}
