//! Plugin bytes in a ConfigMap: gzip compression (a ConfigMap holds at most 1 MiB), size
//! checks, and digest verification.

use std::io::{Read, Write};

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;

use crate::runtime::digest_of;
use crate::runtime::plugin::check_header;

/// Largest compressed component accepted: a ConfigMap holds at most 1 MiB in all, and
/// the object's metadata needs some room.
pub const MAX_COMPRESSED_BYTES: usize = 1_000_000;
/// Largest uncompressed component accepted (protects the host from gzip bombs).
pub const MAX_COMPONENT_BYTES: usize = 64 << 20;

/// Why bytes were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BytesError {
    /// Not a component (garbage or a core module); the message says which.
    #[error("{0}")]
    NotAComponent(String),
    /// Too large for a ConfigMap even compressed.
    #[error(
        "the component is {compressed} bytes gzip-compressed ({raw} raw); a ConfigMap holds at most {MAX_COMPRESSED_BYTES}: build it with the size profile (`--profile plugin`)"
    )]
    TooLarge {
        /// Raw size.
        raw: usize,
        /// Compressed size.
        compressed: usize,
    },
    /// The stored bytes are not valid gzip, or inflate past the limit.
    #[error("the stored bytes are not a gzip-compressed component: {0}")]
    BadCompression(String),
    /// The digest does not match the declared one.
    #[error("digest mismatch: the WasmPlugin declares {declared}, the bytes are {actual}")]
    DigestMismatch {
        /// From the spec.
        declared: String,
        /// Of the bytes.
        actual: String,
    },
}

/// Checks a component for upload and compresses it; returns (compressed, digest).
pub fn pack(component: &[u8]) -> Result<(Vec<u8>, String), BytesError> {
    check_header(component).map_err(|e| BytesError::NotAComponent(e.to_string()))?;
    // gzip's default level: PodReplica (820 KB) packs to 245 KB in half the time level 9
    // takes for 244 KB; the push waits for it.
    let mut enc = GzEncoder::new(Vec::new(), Compression::default());
    enc.write_all(component).expect("write to memory");
    let compressed = enc.finish().expect("finish in memory");
    if compressed.len() > MAX_COMPRESSED_BYTES {
        return Err(BytesError::TooLarge {
            raw: component.len(),
            compressed: compressed.len(),
        });
    }
    Ok((compressed, digest_of(component)))
}

/// Inflates stored bytes and checks them against the declared digest.
pub fn unpack(compressed: &[u8], declared: &str) -> Result<Vec<u8>, BytesError> {
    let mut out = Vec::new();
    GzDecoder::new(compressed)
        .take(MAX_COMPONENT_BYTES as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| BytesError::BadCompression(e.to_string()))?;
    if out.len() > MAX_COMPONENT_BYTES {
        return Err(BytesError::BadCompression(format!(
            "inflates past {MAX_COMPONENT_BYTES} bytes"
        )));
    }
    let actual = digest_of(&out);
    if actual != declared {
        return Err(BytesError::DigestMismatch {
            declared: declared.to_string(),
            actual,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMPONENT: &[u8] = b"\0asm\x0d\0\x01\0rest-of-a-component";

    #[test]
    fn pack_then_unpack_round_trips_and_checks_the_digest() {
        let (gz, digest) = pack(COMPONENT).unwrap();
        assert_eq!(unpack(&gz, &digest).unwrap(), COMPONENT);
        let other = digest_of(b"x");
        assert!(matches!(
            unpack(&gz, &other),
            Err(BytesError::DigestMismatch { .. })
        ));
        assert!(matches!(
            unpack(b"not gzip", &digest),
            Err(BytesError::BadCompression(_))
        ));
    }

    #[test]
    fn refuses_modules_garbage_and_oversize() {
        assert!(
            pack(b"\0asm\x01\0\0\0")
                .unwrap_err()
                .to_string()
                .contains("core WebAssembly module")
        );
        assert!(
            pack(b"hello")
                .unwrap_err()
                .to_string()
                .contains("not a WebAssembly")
        );
        // Incompressible bytes over the limit.
        let mut big = COMPONENT.to_vec();
        let mut x: u64 = 1;
        for _ in 0..1_200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            big.push(x as u8);
        }
        assert!(matches!(pack(&big), Err(BytesError::TooLarge { .. })));
    }
}
