//! Where a running plugin came from: a file of the plugins directory or an upload (a
//! WasmPlugin). The identity rules of the [`super::manager`] decide between them.

use std::fmt;
use std::path::{Path, PathBuf};

/// The source of a plugin version.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Origin {
    /// A `*.wasm` file of the plugins directory.
    File(PathBuf),
    /// A WasmPlugin, by namespace and name.
    Upload {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
}

impl Origin {
    /// The file at `path`.
    pub fn file(path: &Path) -> Self {
        Origin::File(path.to_path_buf())
    }

    /// The WasmPlugin `namespace/name`.
    pub fn upload(namespace: &str, name: &str) -> Self {
        Origin::Upload {
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }

    /// Whether it is an upload (which wins over a file of the same plugin).
    pub fn is_upload(&self) -> bool {
        matches!(self, Origin::Upload { .. })
    }

    /// The name a plugin from here goes by until it says its own (a version whose `info()`
    /// fails never does): the WasmPlugin's name (which must be the plugin's), or the file's
    /// stem.
    pub fn expected_name(&self) -> String {
        match self {
            Origin::Upload { name, .. } => name.clone(),
            Origin::File(path) => path.file_stem().map_or_else(
                || path.display().to_string(),
                |s| s.to_string_lossy().into_owned(),
            ),
        }
    }

    /// The WasmPlugin's namespace and name, for an upload.
    pub fn wasmplugin(&self) -> Option<(&str, &str)> {
        match self {
            Origin::Upload { namespace, name } => Some((namespace, name)),
            Origin::File(_) => None,
        }
    }
}

/// `dir:PATH` or `cluster:NAMESPACE/NAME`, as the log and the status say it.
impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File(path) => write!(f, "dir:{}", path.display()),
            Origin::Upload { namespace, name } => write!(f, "cluster:{namespace}/{name}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plugin_goes_by_its_wasmplugins_name_or_its_files_stem() {
        assert_eq!(
            Origin::upload("ns", "podreplica").expected_name(),
            "podreplica"
        );
        assert_eq!(
            Origin::file(Path::new("/plugins/chaospod.wasm")).expected_name(),
            "chaospod"
        );
    }

    #[test]
    fn origins_read_as_before() {
        let up = Origin::upload("d", "p");
        assert_eq!(up.to_string(), "cluster:d/p");
        assert_eq!(up.wasmplugin(), Some(("d", "p")));
        assert!(up.is_upload());
        let file = Origin::file(Path::new("/plugins/p.wasm"));
        assert_eq!(file.to_string(), "dir:/plugins/p.wasm");
        assert_eq!(file.wasmplugin(), None);
        assert!(!file.is_upload());
    }
}
