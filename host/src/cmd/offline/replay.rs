//! `wasmop replay NEW.wasm DIR`: a plugin version against recorded decisions (`wasmop run
//! --record DIR`, or any golden cases). Each case is `same` (the version decides what was
//! recorded), `different` (printed as a diff from the recorded outcome to the new one) or
//! `failed` (the case cannot be read or run, or the version faulted where the recording
//! did not). Exit status: 0 when all are the same (or only differ, with `--allow-diff`).

use std::path::{Path, PathBuf};

use crate::cases::golden::{case_files, outcome_of, read_case};
use crate::cases::load::load_file;
use crate::rollout::compare::diff;
use crate::runtime::{Limits, LoadedPlugin, Sandbox};

/// Arguments of `wasmop replay`.
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// The plugin version to replay (`.wasm`).
    pub plugin: PathBuf,
    /// Recorded cases: the directory given to `wasmop run --record` (the plugin's own
    /// subdirectory is used) or a directory of case files.
    pub dir: PathBuf,
    /// Exit 0 when cases only differ (failures still fail).
    #[arg(long)]
    pub allow_diff: bool,
    /// Print the diff of at most this many different cases (the others by name).
    #[arg(long, default_value_t = 20)]
    pub max_diffs: usize,
}

/// How one recorded case replays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replayed {
    /// The same outcome as recorded.
    Same,
    /// Another outcome: the diff from the recorded one.
    Different(String),
    /// The case could not be replayed, or the version faulted where the recording did not.
    Failed(String),
}

/// Replays one case file.
pub fn replay_case(sandbox: &Sandbox, plugin: &LoadedPlugin, path: &Path) -> Replayed {
    let case = match read_case(path) {
        Ok(c) => c,
        Err(e) => return Replayed::Failed(format!("{e:#}")),
    };
    let actual = match outcome_of(sandbox, plugin, &case) {
        Ok(a) => a,
        Err(e) => return Replayed::Failed(format!("{e:#}")),
    };
    if actual == case.expect {
        return Replayed::Same;
    }
    if let crate::runtime::Outcome::Fault(why) = &actual
        && !case.expect.is_fault()
    {
        return Replayed::Failed(format!("fault: {why}"));
    }
    Replayed::Different(diff(&case.expect, &actual).replace(
        "--- active\n+++ candidate\n",
        "--- recorded\n+++ replayed\n",
    ))
}

/// The cases to replay for `plugin` in `dir`: `dir/PLUGIN/*.yaml` when that directory
/// exists, else `dir/*.yaml`.
pub fn cases_for(dir: &Path, plugin: &str) -> anyhow::Result<Vec<PathBuf>> {
    let own = dir.join(plugin);
    case_files(if own.is_dir() { &own } else { dir })
}

/// Runs `wasmop replay`; returns whether the exit status is success.
pub fn run(args: &ReplayArgs) -> anyhow::Result<bool> {
    let sandbox = Sandbox::new(1)?;
    let plugin = load_file(&sandbox, &args.plugin, Limits::default())?;
    let files = cases_for(&args.dir, &plugin.info.name)?;
    let (mut same, mut different, mut failed) = (0, 0, 0);
    for path in &files {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        match replay_case(&sandbox, &plugin, path) {
            Replayed::Same => same += 1,
            Replayed::Different(d) => {
                different += 1;
                println!("different - {name}");
                if different <= args.max_diffs {
                    for line in d.lines() {
                        println!("    {line}");
                    }
                }
            }
            Replayed::Failed(why) => {
                failed += 1;
                println!("failed - {name}: {why}");
            }
        }
    }
    println!(
        "replay of {} {} on {} recorded decisions: {same} same, {different} different, {failed} failed",
        plugin.info.name,
        plugin.info.version,
        files.len()
    );
    Ok(failed == 0 && (different == 0 || args.allow_diff))
}
