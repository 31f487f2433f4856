//! A loaded plugin version: compiled, type-checked against the world, pre-instantiated,
//! with its validated `info()`.

use sha2::{Digest, Sha256};

use crate::runtime::bindings::PluginBindingsPre;
use crate::runtime::error::LoadError;
use crate::runtime::limits::Limits;
use crate::runtime::store::StoreData;
use crate::runtime::types::PluginInfo;

/// One plugin version, ready to be called. Cheap to share behind an `Arc`; calls never
/// mutate it, so a swap replaces the whole value.
pub struct LoadedPlugin {
    /// What the plugin declared.
    pub info: PluginInfo,
    /// `sha256:<hex>` of the component bytes.
    pub digest: String,
    /// Size of the component in bytes.
    pub size: usize,
    /// Limits of every call into this version.
    pub limits: Limits,
    pub(crate) pre: PluginBindingsPre<StoreData>,
}

impl LoadedPlugin {
    /// The contract version the component was built against (`0.4.0` or `0.3.0`).
    pub fn contract(&self) -> &'static str {
        self.pre.contract()
    }
}

impl std::fmt::Debug for LoadedPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedPlugin")
            .field("name", &self.info.name)
            .field("version", &self.info.version)
            .field("digest", &self.digest)
            .finish()
    }
}

/// `sha256:<hex>` of some bytes: the identity of a plugin version.
pub fn digest_of(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// What the first eight bytes say a file is.
pub fn check_header(bytes: &[u8]) -> Result<(), LoadError> {
    if bytes.len() < 8 || &bytes[0..4] != b"\0asm" {
        return Err(LoadError::NotWasm);
    }
    // Core modules have version 1 and layer 0; components have layer 1.
    if bytes[6..8] == [0, 0] {
        return Err(LoadError::CoreModule);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_tells_modules_components_and_garbage_apart() {
        assert!(matches!(
            check_header(b"hello world"),
            Err(LoadError::NotWasm)
        ));
        assert!(matches!(
            check_header(b"\0asm\x01\0\0\0"),
            Err(LoadError::CoreModule)
        ));
        assert!(check_header(b"\0asm\x0d\0\x01\0").is_ok());
    }

    #[test]
    fn digest_is_sha256_hex() {
        assert_eq!(
            digest_of(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
