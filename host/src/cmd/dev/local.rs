//! `wasmop dev --local`: the local control plane of a wasmop checkout (`tests/cluster/up`),
//! started for the session in a state directory of its own and stopped at its end.

use std::path::{Path, PathBuf};

use anyhow::Context;
use tokio::process::Command;

/// A local control plane started by `wasmop dev`.
pub struct LocalCluster {
    root: PathBuf,
    state: PathBuf,
    /// Its admin kubeconfig.
    pub kubeconfig: PathBuf,
}

/// The wasmop checkout around the current directory, else the one wasmop was built from.
fn checkout() -> Option<PathBuf> {
    crate::cmd::checkout::find(&std::env::current_dir().ok()?, "tests/cluster/up")
}

impl LocalCluster {
    /// Starts the control plane with its state in `state` (built once per machine and
    /// cached, like `make cluster`).
    pub async fn start(state: &Path) -> anyhow::Result<LocalCluster> {
        let root = checkout().ok_or_else(|| {
            anyhow::anyhow!(
                "--local needs a wasmop checkout (its tests/cluster): run `wasmop dev` inside one, or use --kubeconfig"
            )
        })?;
        println!("dev: starting the local control plane ...");
        let status = Command::new(root.join("tests/cluster/up"))
            .arg("--state")
            .arg(state)
            .status()
            .await
            .context("running tests/cluster/up")?;
        if !status.success() {
            anyhow::bail!("the local control plane did not start ({status})");
        }
        Ok(LocalCluster {
            root,
            state: state.to_path_buf(),
            kubeconfig: state.join("kubeconfig"),
        })
    }

    /// Stops it and removes its state.
    pub async fn stop(self) {
        let _ = Command::new(self.root.join("tests/cluster/down"))
            .arg("--state")
            .arg(&self.state)
            .status()
            .await;
    }
}
