//! Pulled components on disk, by digest (`DIR/sha256/<hex>`), so a restart or a registry
//! that went away does not need the registry again. A component is read back only if its
//! bytes still hash to its name; writes go to a temporary file renamed into place, so a
//! crash never leaves half a component under a digest.

use std::path::{Path, PathBuf};

use crate::runtime::disk::Cap;
use crate::runtime::plugin::digest_of;

/// The directory of pulled components.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    dir: PathBuf,
    /// The byte cap of the cache directory the store is part of.
    cap: Option<Cap>,
}

impl Store {
    /// The store under `dir` (created on the first write).
    pub(crate) fn new(dir: &Path) -> Self {
        Store {
            dir: dir.to_path_buf(),
            cap: None,
        }
    }

    /// Keeps every file under `root` (this store's directory and the compiled components
    /// beside it) within `max_bytes`, the least recently used going first.
    pub(crate) fn with_cap(mut self, root: &Path, max_bytes: u64) -> Self {
        self.cap = Some(Cap {
            root: root.to_path_buf(),
            max_bytes,
        });
        self
    }

    /// Reads `path`, renewing it as used.
    fn read(path: &Path) -> Option<Vec<u8>> {
        let bytes = std::fs::read(path).ok()?;
        Cap::used(path);
        Some(bytes)
    }

    fn path_of(&self, digest: &str) -> Option<PathBuf> {
        let hex = digest.strip_prefix("sha256:")?;
        (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| self.dir.join("sha256").join(hex))
    }

    /// The component of `digest`, if the store holds it intact.
    pub(crate) fn get(&self, digest: &str) -> Option<Vec<u8>> {
        let path = self.path_of(digest)?;
        let bytes = Self::read(&path)?;
        if digest_of(&bytes) == digest {
            Some(bytes)
        } else {
            tracing::warn!(path = %path.display(), "a stored component does not match its digest; pulling it again");
            let _ = std::fs::remove_file(&path);
            None
        }
    }

    /// Keeps `bytes` under their digest; a failure (a full or read-only disk) only costs a
    /// pull later, so it is logged, not returned.
    pub(crate) fn put(&self, bytes: &[u8]) {
        let digest = digest_of(bytes);
        self.write(&format!("sha256/{}", hex_of(&digest)), bytes);
    }
}

impl Store {
    /// Keeps the raw manifest of `digest` (which names the component's digest).
    pub(crate) fn put_manifest(&self, raw: &[u8], digest: &str) {
        if digest_of(raw) == digest {
            self.write(&format!("manifests/{}", hex_of(digest)), raw);
        }
    }

    /// The raw manifest of `digest`, if kept intact.
    pub(crate) fn get_manifest(&self, digest: &str) -> Option<Vec<u8>> {
        let raw = Self::read(&self.dir.join("manifests").join(hex_of(digest)))?;
        (digest_of(&raw) == digest).then_some(raw)
    }

    /// Keeps the signature that verified manifest `digest`, to check it again offline.
    pub(crate) fn put_signature(&self, digest: &str, payload: &[u8], signature: &[u8]) {
        let doc = serde_json::json!({"payload": hex::encode(payload), "signature": hex::encode(signature)});
        self.write(
            &format!("signatures/{}", hex_of(digest)),
            doc.to_string().as_bytes(),
        );
    }

    /// The payload and signature kept for `digest`.
    pub(crate) fn get_signature(&self, digest: &str) -> Option<(Vec<u8>, Vec<u8>)> {
        let raw = Self::read(&self.dir.join("signatures").join(hex_of(digest)))?;
        let doc: serde_json::Value = serde_json::from_slice(&raw).ok()?;
        Some((
            hex::decode(doc["payload"].as_str()?).ok()?,
            hex::decode(doc["signature"].as_str()?).ok()?,
        ))
    }

    fn write(&self, rel: &str, bytes: &[u8]) {
        let path = self.dir.join(rel);
        let written = match &self.cap {
            Some(cap) => cap.write(&path, bytes),
            None => crate::runtime::disk::write_whole(&path, bytes),
        };
        if let Err(e) = written {
            tracing::warn!(dir = %self.dir.display(), error = %e, "could not keep a pulled artifact on disk");
        }
    }
}

/// The hex part of a `sha256:` digest, or a name that is no path (so never outside the store).
fn hex_of(digest: &str) -> String {
    match digest.strip_prefix("sha256:") {
        Some(h) if h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()) => h.to_string(),
        _ => "invalid".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_components_by_digest_and_drops_damaged_ones() {
        let dir = std::env::temp_dir().join(format!("wasmop-store-{}", std::process::id()));
        let store = Store::new(&dir);
        let bytes = b"\0asm component bytes".to_vec();
        let digest = digest_of(&bytes);
        assert_eq!(store.get(&digest), None);
        store.put(&bytes);
        assert_eq!(store.get(&digest), Some(bytes.clone()));
        // Damaged on disk: not served, removed.
        let path = store.path_of(&digest).unwrap();
        std::fs::write(&path, b"other").unwrap();
        assert_eq!(store.get(&digest), None);
        assert!(!path.exists());
        // Not a digest: never a path outside the store.
        assert_eq!(store.path_of("sha256:../../etc/passwd"), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
