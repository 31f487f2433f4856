//! What `wasmop dev` watches in a plugin's directory: every file, by path, length and mtime,
//! but for build outputs, dependencies and caches ([`crate::cmd::project::NOT_SOURCES`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// A look at the crate's sources: path → (modified, length).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sources(BTreeMap<PathBuf, (SystemTime, u64)>);

impl Sources {
    /// The sources of the plugin in `dir` now.
    pub fn look(dir: &Path) -> Sources {
        let mut out = BTreeMap::new();
        walk(dir, &mut out);
        Sources(out)
    }
}

fn add(path: &Path, out: &mut BTreeMap<PathBuf, (SystemTime, u64)>) {
    if let Ok(m) = std::fs::metadata(path)
        && m.is_file()
    {
        out.insert(
            path.to_path_buf(),
            (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len()),
        );
    }
}

fn walk(dir: &Path, out: &mut BTreeMap<PathBuf, (SystemTime, u64)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.is_dir() {
            let skipped = e
                .file_name()
                .to_str()
                .is_some_and(|n| crate::cmd::project::NOT_SOURCES.contains(&n));
            if !skipped {
                walk(&path, out);
            }
        } else {
            add(&path, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sees_an_edit_a_new_file_and_a_removal_but_not_the_target_directory() {
        let dir = std::env::temp_dir().join(format!("wasmop-watch-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("src/deep")).unwrap();
        std::fs::create_dir_all(dir.join("target")).unwrap();
        std::fs::write(dir.join("Cargo.toml"), "[package]").unwrap();
        std::fs::write(dir.join("src/lib.rs"), "// a").unwrap();
        let first = Sources::look(&dir);
        assert_eq!(first.0.len(), 2);
        std::fs::write(dir.join("target/out.wasm"), "x").unwrap();
        assert_eq!(Sources::look(&dir), first);
        std::fs::write(dir.join("src/lib.rs"), "// ab").unwrap();
        let edited = Sources::look(&dir);
        assert_ne!(edited, first);
        std::fs::write(dir.join("src/deep/m.rs"), "").unwrap();
        let added = Sources::look(&dir);
        assert_eq!(added.0.len(), 3);
        std::fs::remove_file(dir.join("src/deep/m.rs")).unwrap();
        assert_eq!(Sources::look(&dir), edited);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
