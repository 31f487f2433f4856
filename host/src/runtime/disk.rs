//! Files the host keeps for itself (compiled components, pulled artifacts): written whole.

use std::path::Path;

/// Writes `bytes` to `path` whole: into a temporary file beside it (the directory is
/// created), then renamed into place, so that a crash never leaves half a file under the
/// name and a reader sees the old file or the new one.
pub(crate) fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("a file path without a directory"))?;
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_whole_file_and_replaces_an_old_one() {
        let dir = std::env::temp_dir().join(format!("wasmop-disk-{}", std::process::id()));
        let path = dir.join("a/b/file");
        write_whole(&path, b"one").unwrap();
        write_whole(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        // Nothing else is left beside it.
        assert_eq!(std::fs::read_dir(dir.join("a/b")).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
