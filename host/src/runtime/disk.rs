//! Files the host keeps for itself (compiled components, pulled artifacts): written whole,
//! and, under a [`Cap`], within a number of bytes: the least recently used files go first.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// A byte cap over every file under a directory (`--cache-dir` with `--cache-max-mib`):
/// before each write the least recently used files (by modification time, which a read
/// renews: [`Cap::used`]) are removed until the new file fits beside the rest, so the
/// directory never holds more than the cap, not even while a file is written. A file larger
/// than the whole cap is not kept. Files being written (`.*.tmp`) count and are never
/// removed; writes under caps take turns.
#[derive(Debug, Clone)]
pub(crate) struct Cap {
    /// The directory the cap covers.
    pub root: PathBuf,
    /// The most bytes its files may take together.
    pub max_bytes: u64,
}

/// Writes under a cap take turns: two at once would each make room for itself only.
static WRITING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn files_under(dir: &Path, out: &mut Vec<(PathBuf, u64, SystemTime)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let Ok(meta) = e.metadata() else { continue };
        if meta.is_dir() {
            files_under(&e.path(), out);
        } else if meta.is_file() {
            let at = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            out.push((e.path(), meta.len(), at));
        }
    }
}

fn being_written(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with('.') && n.ends_with(".tmp"))
}

impl Cap {
    /// Writes `bytes` to `path` whole ([`write_whole`]) once the least recently used files
    /// made room for them (a file it replaces does not count). Fails, writing nothing, when
    /// they are larger than the whole cap.
    pub(crate) fn write(&self, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        let _turn = WRITING.lock().unwrap_or_else(|e| e.into_inner());
        self.make_room(bytes.len() as u64, path)?;
        write_whole(path, bytes)
    }

    /// Removes the least recently used files until `incoming` more bytes fit, `replaced`
    /// (the file the write replaces) not counted. Returns the bytes the directory then holds.
    fn make_room(&self, incoming: u64, replaced: &Path) -> std::io::Result<u64> {
        if incoming > self.max_bytes {
            return Err(std::io::Error::other(format!(
                "{incoming} bytes, more than the whole cap of {} bytes: not kept",
                self.max_bytes
            )));
        }
        let mut files = Vec::new();
        files_under(&self.root, &mut files);
        files.retain(|f| f.0 != replaced);
        let mut total: u64 = files.iter().map(|f| f.1).sum();
        files.sort_by_key(|f| f.2);
        for (path, len, _) in files {
            if total + incoming <= self.max_bytes {
                break;
            }
            if being_written(&path) {
                continue;
            }
            if std::fs::remove_file(&path).is_ok() {
                tracing::info!(path = %path.display(), bytes = len, "cache at its cap: least recently used file removed");
                total -= len;
            }
        }
        Ok(total)
    }

    /// Renews `path` as used now (a read of a kept file), so it goes after files not used
    /// since.
    pub(crate) fn used(path: &Path) {
        if let Ok(f) = std::fs::File::options().append(true).open(path) {
            let _ = f.set_modified(SystemTime::now());
        }
    }
}

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
    fn a_cap_removes_the_least_recently_used_first_never_the_new_file() {
        let root = std::env::temp_dir().join(format!("wasmop-cap-{}", std::process::id()));
        let cap = Cap {
            root: root.clone(),
            max_bytes: 10 << 20,
        };
        let mut written = Vec::new();
        // 20 distinct 3 MiB files, one after another; the first is used again after each
        // write (a running version read from the disk).
        for i in 0..20u8 {
            let path = root
                .join(if i % 2 == 0 { "artifacts" } else { "compiled" })
                .join(format!("f{i}"));
            cap.write(&path, &vec![i; 3 << 20]).unwrap();
            // Distinct modification times even on a coarse clock.
            let at =
                SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000 + u64::from(i) * 10);
            std::fs::File::options()
                .append(true)
                .open(&path)
                .unwrap()
                .set_modified(at)
                .unwrap();
            if i > 0 {
                let first = &written[0];
                if std::fs::metadata(first).is_ok() {
                    std::fs::File::options()
                        .append(true)
                        .open(first)
                        .unwrap()
                        .set_modified(at + std::time::Duration::from_secs(1))
                        .unwrap();
                }
            }
            written.push(path.clone());
            let mut files = Vec::new();
            files_under(&root, &mut files);
            let total: u64 = files.iter().map(|f| f.1).sum();
            assert!(total <= 10 << 20, "after {i}: {total} bytes");
            assert!(path.exists(), "the file just written stays");
        }
        // The first file, used after every write, is still there; the oldest unused went.
        assert!(written[0].exists());
        assert!(!written[1].exists() && !written[2].exists());
        assert!(written[19].exists() && written[18].exists());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn room_is_made_before_the_write_and_what_exceeds_the_cap_is_not_kept() {
        let root = std::env::temp_dir().join(format!("wasmop-room-{}", std::process::id()));
        let cap = Cap {
            root: root.clone(),
            max_bytes: 10,
        };
        let at = |p: &Path, s: u64| {
            std::fs::File::options()
                .append(true)
                .open(p)
                .unwrap()
                .set_modified(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(s))
                .unwrap();
        };
        let (a, b) = (root.join("a"), root.join("b"));
        cap.write(&a, &[1; 4]).unwrap();
        at(&a, 1);
        cap.write(&b, &[2; 4]).unwrap();
        at(&b, 2);
        // Another writer's file on its way counts, and stays.
        let tmp = root.join(".c.1.tmp");
        std::fs::write(&tmp, [3; 2]).unwrap();
        at(&tmp, 0);
        // 4 more bytes: 4 + 4 + 2 + 4 is over 10, so `a` (the oldest) goes *before* the
        // write: at no moment do the files hold more than the cap.
        let d = root.join("d");
        cap.write(&d, &[4; 4]).unwrap();
        assert!(!a.exists() && b.exists() && d.exists() && tmp.exists());
        // Replacing `b` with 4 bytes: the old `b` does not count, nothing else goes.
        cap.write(&b, &[5; 4]).unwrap();
        assert!(d.exists() && tmp.exists());
        // Larger than the whole cap: refused, nothing removed.
        let e = cap.write(&root.join("e"), &[6; 11]).unwrap_err();
        assert!(e.to_string().contains("not kept"), "{e}");
        assert!(b.exists() && d.exists() && !root.join("e").exists());
        std::fs::remove_dir_all(&root).unwrap();
    }

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
