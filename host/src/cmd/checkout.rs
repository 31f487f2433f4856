//! Finding a wasmop checkout: the one around a directory, else the one this binary was
//! built from (if it is still there). `wasmop new` takes the SDK from it, `wasmop dev
//! --local` its control plane.

use std::path::{Path, PathBuf};

/// The root of the first checkout holding `marker` (a path inside it): among `from` and its
/// ancestors, then the checkout this binary was built from.
pub fn find(from: &Path, marker: &str) -> Option<PathBuf> {
    let built_from = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    from.ancestors()
        .chain(std::iter::once(built_from.as_path()))
        .find(|d| d.join(marker).is_file())
        .map(Path::to_path_buf)
}
