//! Cosign key-pair signatures, in the format `cosign sign --key` writes and `cosign verify
//! --key` reads, so either tool checks the other's: a simple-signing payload naming the
//! manifest digest, signed with ECDSA P-256 over SHA-256 (ASN.1 DER, base64 in the layer's
//! `dev.cosignproject.cosign/signature` annotation), stored as a layer of the manifest
//! tagged `sha256-<hex>.sig` in the artifact's repository (the tag scheme works on every
//! registry, with or without the referrers API). Keys: a PEM public key (SubjectPublicKeyInfo,
//! what `cosign generate-key-pair` writes as `cosign.pub`) and a PKCS#8 PEM private key
//! (what `openssl genpkey` writes and `cosign import-key-pair` reads).

use std::collections::BTreeMap;

use base64::Engine as _;
use oci_client::Reference;
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use ring::rand::SystemRandom;
use ring::signature::{
    ECDSA_P256_SHA256_ASN1, ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, UnparsedPublicKey,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{PrivatePkcs8KeyDer, SubjectPublicKeyInfoDer};
use serde_json::json;

use crate::oci::artifact::MANIFEST_MEDIA_TYPE;
use crate::oci::error::PullError;
use crate::oci::remote::Remote;
use crate::runtime::plugin::digest_of;

/// The payload layer's media type.
pub(crate) const PAYLOAD_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The annotation holding the base64 signature.
pub(crate) const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The payload's `critical.type`.
const PAYLOAD_TYPE: &str = "cosign container image signature";
/// The DER prefix of a P-256 SubjectPublicKeyInfo, before the 65-byte uncompressed point:
/// SEQUENCE { SEQUENCE { id-ecPublicKey, prime256v1 }, BIT STRING (0 unused bits) }.
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// The most signatures one `.sig` manifest may hold: each is a blob read, so a manifest of
/// thousands is refused before any is read.
pub(crate) const MAX_SIGNATURES: usize = 64;
/// The largest simple-signing payload read (cosign's are a few hundred bytes).
pub(crate) const MAX_PAYLOAD_BYTES: u64 = 64 << 10;

/// The tag cosign stores the signatures of `digest` under: `sha256-<hex>.sig`.
pub(crate) fn signature_tag(digest: &str) -> String {
    format!("{}.sig", digest.replacen(':', "-", 1))
}

/// A trusted public key.
#[derive(Clone)]
pub(crate) struct PublicKey {
    point: Vec<u8>,
    /// Where it came from (`ConfigMap ns/name key k`), for messages.
    pub name: String,
    /// `sha256:<hex>` of its DER, for messages.
    pub fingerprint: String,
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name, self.fingerprint)
    }
}

impl PublicKey {
    /// Reads a PEM `PUBLIC KEY` (ECDSA P-256, cosign's default), named `name` in messages.
    pub(crate) fn from_pem(pem: &[u8], name: &str) -> Result<Self, String> {
        let der = SubjectPublicKeyInfoDer::from_pem_slice(pem)
            .map_err(|e| format!("{name}: not a PEM public key: {e}"))?;
        let der = der.as_ref();
        let point = der
            .strip_prefix(&P256_SPKI_PREFIX[..])
            .filter(|p| p.len() == 65 && p[0] == 0x04)
            .ok_or_else(|| {
                format!("{name}: not an ECDSA P-256 public key (cosign's default key type)")
            })?;
        Ok(PublicKey {
            point: point.to_vec(),
            name: name.to_string(),
            fingerprint: digest_of(der),
        })
    }

    fn verifies(&self, payload: &[u8], signature: &[u8]) -> bool {
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, &self.point)
            .verify(payload, signature)
            .is_ok()
    }
}

/// A private key that signs.
pub(crate) struct SigningKey {
    pair: EcdsaKeyPair,
}

impl SigningKey {
    /// Reads a PKCS#8 PEM `PRIVATE KEY` (ECDSA P-256).
    pub(crate) fn from_pem(pem: &[u8]) -> Result<Self, String> {
        let text = String::from_utf8_lossy(pem);
        if text.contains("ENCRYPTED SIGSTORE PRIVATE KEY")
            || text.contains("ENCRYPTED COSIGN PRIVATE KEY")
        {
            return Err(
                "this is cosign's encrypted key format; wasmop reads a PKCS#8 PEM key \
                (`openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256`), which \
                `cosign import-key-pair` turns into a cosign key pair with the same public key"
                    .into(),
            );
        }
        let der = PrivatePkcs8KeyDer::from_pem_slice(pem).map_err(|e| {
            format!("not a PKCS#8 PEM private key (`-----BEGIN PRIVATE KEY-----`): {e}")
        })?;
        let pair = EcdsaKeyPair::from_pkcs8(
            &ECDSA_P256_SHA256_ASN1_SIGNING,
            der.secret_pkcs8_der(),
            &SystemRandom::new(),
        )
        .map_err(|e| format!("not an ECDSA P-256 private key: {e}"))?;
        Ok(SigningKey { pair })
    }

    /// The public half, as `cosign.pub` holds it (PEM).
    #[cfg(test)]
    pub(crate) fn public_pem(&self) -> String {
        use ring::signature::KeyPair as _;
        let mut der = P256_SPKI_PREFIX.to_vec();
        der.extend_from_slice(self.pair.public_key().as_ref());
        let b64 = base64::engine::general_purpose::STANDARD.encode(der);
        let mut pem = String::from("-----BEGIN PUBLIC KEY-----\n");
        for line in b64.as_bytes().chunks(64) {
            pem.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
            pem.push('\n');
        }
        pem.push_str("-----END PUBLIC KEY-----\n");
        pem
    }

    fn sign(&self, payload: &[u8]) -> Vec<u8> {
        self.pair
            .sign(&SystemRandom::new(), payload)
            .expect("ECDSA signing")
            .as_ref()
            .to_vec()
    }
}

/// The repository a signature of `reference` names (`critical.identity.docker-reference`):
/// `REGISTRY/REPOSITORY`, as cosign writes it.
pub(crate) fn repository_of(reference: &Reference) -> String {
    format!(
        "{}/{}",
        reference.resolve_registry(),
        reference.repository()
    )
}

/// The simple-signing payload for manifest `digest` of `reference`'s repository.
pub(crate) fn payload(reference: &Reference, digest: &str) -> Vec<u8> {
    let repo = repository_of(reference);
    serde_json::to_vec(&json!({
        "critical": {
            "identity": {"docker-reference": repo},
            "image": {"docker-manifest-digest": digest},
            "type": PAYLOAD_TYPE,
        },
        "optional": null,
    }))
    .expect("the payload serialises")
}

/// What a simple-signing payload claims.
#[derive(Debug, PartialEq, Eq)]
enum Claim {
    /// It names `digest` in the repository it was pulled from.
    Holds,
    /// It names `digest`, for another repository (`docker-reference`): a signature copied
    /// beside a copy of the artifact, which cosign's `--check-claims` refuses too.
    OtherRepository(String),
    /// Not a payload for `digest`.
    Other,
}

/// What `payload` claims of manifest `digest` pulled from `repository`.
fn claim(payload: &[u8], digest: &str, repository: &str) -> Claim {
    let Ok(doc) = serde_json::from_slice::<serde_json::Value>(payload) else {
        return Claim::Other;
    };
    let critical = &doc["critical"];
    if critical["type"] != PAYLOAD_TYPE || critical["image"]["docker-manifest-digest"] != digest {
        return Claim::Other;
    }
    match critical["identity"]["docker-reference"].as_str() {
        Some(r) if r == repository => Claim::Holds,
        Some(r) => Claim::OtherRepository(r.to_string()),
        None => Claim::OtherRepository("no repository".into()),
    }
}

/// Whether `payload` is a simple-signing payload for `digest` of `repository`.
#[cfg(test)]
fn names(payload: &[u8], digest: &str, repository: &str) -> bool {
    claim(payload, digest, repository) == Claim::Holds
}

/// The cosign signature manifest's config: cosign writes an (empty) image config naming the
/// payload layers; registries want a config blob.
fn config_for(layers: &[OciDescriptor]) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "architecture": "",
        "os": "",
        "config": {},
        "rootfs": {"type": "layers",
                   "diff_ids": layers.iter().map(|l| l.digest.clone()).collect::<Vec<_>>()},
    }))
    .expect("the config serialises")
}

/// The signature manifest of `digest`, if there is one.
async fn signature_manifest(
    remote: &Remote,
    reference: &Reference,
    digest: &str,
) -> Result<Option<(Reference, OciImageManifest)>, PullError> {
    let tagged = Reference::with_tag(
        reference.registry().to_string(),
        reference.repository().to_string(),
        signature_tag(digest),
    );
    match remote.manifest(&tagged).await {
        Ok((raw, _)) => {
            let manifest = serde_json::from_slice(&raw).map_err(|e| PullError::MediaType {
                reference: tagged.whole(),
                digest: digest.to_string(),
                why: format!("the signature manifest does not parse: {e}"),
            })?;
            Ok(Some((tagged, manifest)))
        }
        Err(PullError::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Signs manifest `digest` of `reference` with `key` and stores the signature beside it (a
/// layer added to its `.sig` manifest, as cosign does: earlier signatures stay).
pub(crate) async fn sign(
    remote: &Remote,
    reference: &Reference,
    digest: &str,
    key: &SigningKey,
) -> Result<String, PullError> {
    let payload = payload(reference, digest);
    let signature = base64::engine::general_purpose::STANDARD.encode(key.sign(&payload));
    let payload_digest = remote.push_blob(reference, payload.clone()).await?;
    let layer = OciDescriptor {
        media_type: PAYLOAD_MEDIA_TYPE.into(),
        digest: payload_digest,
        size: payload.len() as i64,
        annotations: Some(BTreeMap::from([(
            SIGNATURE_ANNOTATION.to_string(),
            signature,
        )])),
        ..OciDescriptor::default()
    };
    let (tagged, mut manifest) = match signature_manifest(remote, reference, digest).await? {
        Some(found) => found,
        None => (
            Reference::with_tag(
                reference.registry().to_string(),
                reference.repository().to_string(),
                signature_tag(digest),
            ),
            OciImageManifest {
                media_type: Some(MANIFEST_MEDIA_TYPE.into()),
                ..OciImageManifest::default()
            },
        ),
    };
    manifest.layers.push(layer);
    let config = config_for(&manifest.layers);
    manifest.config = OciDescriptor {
        media_type: "application/vnd.oci.image.config.v1+json".into(),
        size: config.len() as i64,
        digest: remote.push_blob(reference, config).await?,
        ..OciDescriptor::default()
    };
    remote.push_manifest(&tagged, &manifest).await?;
    Ok(tagged.whole())
}

/// Why an artifact is not trusted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Untrusted {
    /// No signature stored for the digest.
    #[error("{digest} is not signed (no {tag} in the repository); trusted keys: {keys}")]
    Unsigned {
        /// The manifest digest.
        digest: String,
        /// The tag looked at.
        tag: String,
        /// The trusted keys.
        keys: String,
    },
    /// Signatures, none by a trusted key over a payload naming the digest.
    #[error("{digest}: none of its {count} signature(s) verifies with a trusted key ({keys})")]
    BadSignature {
        /// The manifest digest.
        digest: String,
        /// How many signatures were looked at.
        count: usize,
        /// The trusted keys.
        keys: String,
    },
    /// A trusted key signed the digest for another repository: a signature replayed
    /// beside a copy of the artifact.
    #[error(
        "{digest}: its signature by {key} is for {signed_for}, not {pulled_from}: a signature copied from another repository"
    )]
    OtherRepository {
        /// The manifest digest.
        digest: String,
        /// The key that signed it.
        key: String,
        /// The repository the payload names.
        signed_for: String,
        /// The repository it was pulled from.
        pulled_from: String,
    },
    /// The signatures could not be read.
    #[error("{0}")]
    Pull(PullError),
}

impl Untrusted {
    /// The CamelCase reason of the WasmPlugin's condition.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            Untrusted::Unsigned { .. } => "Unsigned",
            Untrusted::BadSignature { .. } => "SignatureInvalid",
            Untrusted::OtherRepository { .. } => "SignatureRepositoryMismatch",
            Untrusted::Pull(e) => e.reason(),
        }
    }
}

/// A signature that verified: the key, and the payload and signature it verified (kept on
/// disk so that a restart without the registry can check them again).
pub(crate) struct Verified {
    /// The trusted key that verified it.
    pub key: PublicKey,
    /// The simple-signing payload.
    pub payload: Vec<u8>,
    /// The DER signature.
    pub signature: Vec<u8>,
}

/// Why a signature did not count ([`verify_kept`]).
#[derive(Debug)]
pub(crate) enum NotKept {
    /// Not a payload for the digest, or no key verifies it.
    NoKey,
    /// A key verifies it, but it names another repository (`.0`), by key `.1`.
    OtherRepository(String, PublicKey),
}

/// The key of `keys` that verifies `signature` over `payload`, a payload naming `digest` of
/// `repository` (the `docker-reference` claim checked, as `cosign verify` does).
pub(crate) fn verify_kept(
    payload: &[u8],
    signature: &[u8],
    digest: &str,
    repository: &str,
    keys: &[PublicKey],
) -> Result<PublicKey, NotKept> {
    let claim = claim(payload, digest, repository);
    if claim == Claim::Other {
        return Err(NotKept::NoKey);
    }
    let key = keys
        .iter()
        .find(|k| k.verifies(payload, signature))
        .cloned()
        .ok_or(NotKept::NoKey)?;
    match claim {
        Claim::OtherRepository(r) => Err(NotKept::OtherRepository(r, key)),
        _ => Ok(key),
    }
}

/// Which of `keys` signed manifest `digest` of `reference` (the first that verifies).
pub(crate) async fn verify(
    remote: &Remote,
    reference: &Reference,
    digest: &str,
    keys: &[PublicKey],
) -> Result<Verified, Untrusted> {
    let names_of = || {
        keys.iter()
            .map(|k| format!("{} {}", k.name, k.fingerprint))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let Some((_, manifest)) = signature_manifest(remote, reference, digest)
        .await
        .map_err(Untrusted::Pull)?
    else {
        return Err(Untrusted::Unsigned {
            digest: digest.to_string(),
            tag: signature_tag(digest),
            keys: names_of(),
        });
    };
    let payloads = manifest
        .layers
        .iter()
        .filter(|l| l.media_type == PAYLOAD_MEDIA_TYPE)
        .count();
    if payloads > MAX_SIGNATURES {
        return Err(Untrusted::Pull(PullError::Transport {
            reference: reference.whole(),
            why: format!(
                "the signature manifest {} holds {payloads} signatures, over {MAX_SIGNATURES}: refused without reading them",
                signature_tag(digest)
            ),
        }));
    }
    let repository = repository_of(reference);
    let mut replayed = None;
    let mut count = 0;
    for layer in manifest
        .layers
        .iter()
        .filter(|l| l.media_type == PAYLOAD_MEDIA_TYPE)
    {
        let Some(sig) = layer
            .annotations
            .as_ref()
            .and_then(|a| a.get(SIGNATURE_ANNOTATION))
            .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
        else {
            continue;
        };
        count += 1;
        // A payload is small; anything larger is not one.
        let payload = remote
            .blob(
                reference,
                &layer.digest,
                layer.size.max(0) as u64,
                MAX_PAYLOAD_BYTES,
            )
            .await
            .map_err(Untrusted::Pull)?;
        match verify_kept(&payload, &sig, digest, &repository, keys) {
            Ok(key) => {
                return Ok(Verified {
                    key,
                    payload,
                    signature: sig,
                });
            }
            Err(NotKept::OtherRepository(r, key)) => replayed = Some((r, key)),
            Err(NotKept::NoKey) => {}
        }
    }
    if let Some((signed_for, key)) = replayed {
        return Err(Untrusted::OtherRepository {
            digest: digest.to_string(),
            key: format!("{} {}", key.name, key.fingerprint),
            signed_for,
            pulled_from: repository,
        });
    }
    Err(Untrusted::BadSignature {
        digest: digest.to_string(),
        count,
        keys: names_of(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A P-256 key written by `openssl genpkey -algorithm EC -pkeyopt
    /// ec_paramgen_curve:P-256` and its public half by `openssl pkey -pubout`.
    const KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgi/1GKcnMIrk1bNHI
Y9SYA4/SlVSjAGY08ws7RMP+VrChRANCAATxN8cXEuppoWGNZrutasI1On0i+L7m
t0cMmGdu9d7ngtmcaSCmvc2VcKlX0KX/YFCv1uh0Kx5tuaPhG93A22Qr
-----END PRIVATE KEY-----
";
    const PUB: &str = "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE8TfHFxLqaaFhjWa7rWrCNTp9Ivi+
5rdHDJhnbvXe54LZnGkgpr3NlXCpV9Cl/2BQr9bodCsebbmj4RvdwNtkKw==
-----END PUBLIC KEY-----
";

    #[test]
    fn a_signature_verifies_with_the_public_half_only() {
        let key = SigningKey::from_pem(KEY.as_bytes()).unwrap();
        assert_eq!(key.public_pem(), PUB);
        let public = PublicKey::from_pem(PUB.as_bytes(), "test").unwrap();
        let r: Reference = "127.0.0.1:5000/p:v1".parse().unwrap();
        let digest = format!("sha256:{}", "a".repeat(64));
        let p = payload(&r, &digest);
        assert!(names(&p, &digest, "127.0.0.1:5000/p"));
        assert!(!names(
            &p,
            &format!("sha256:{}", "b".repeat(64)),
            "127.0.0.1:5000/p"
        ));
        let doc: serde_json::Value = serde_json::from_slice(&p).unwrap();
        assert_eq!(
            doc["critical"]["identity"]["docker-reference"],
            "127.0.0.1:5000/p"
        );
        let sig = key.sign(&p);
        assert!(public.verifies(&p, &sig));
        let mut other = p.clone();
        other[5] ^= 1;
        assert!(!public.verifies(&other, &sig));
        assert_eq!(
            signature_tag(&digest),
            format!("sha256-{}.sig", "a".repeat(64))
        );
    }

    #[test]
    fn a_signature_counts_only_in_the_repository_it_names() {
        let key = SigningKey::from_pem(KEY.as_bytes()).unwrap();
        let public = PublicKey::from_pem(PUB.as_bytes(), "org.pub").unwrap();
        let digest = format!("sha256:{}", "a".repeat(64));
        let signed: Reference = "127.0.0.1:5000/plugins/podreplica:v1".parse().unwrap();
        let p = payload(&signed, &digest);
        let sig = key.sign(&p);
        let keys = [public];
        let here = repository_of(&signed);
        assert!(verify_kept(&p, &sig, &digest, &here, &keys).is_ok());
        // The same artifact and signature copied into another repository.
        let copy: Reference = "127.0.0.1:5000/plugins/copy:v1".parse().unwrap();
        match verify_kept(&p, &sig, &digest, &repository_of(&copy), &keys) {
            Err(NotKept::OtherRepository(r, k)) => {
                assert_eq!(r, here);
                assert_eq!(k.name, "org.pub");
            }
            other => panic!("a replayed signature: {other:?}"),
        }
        // Another digest: not a payload for it at all.
        let other = format!("sha256:{}", "b".repeat(64));
        assert!(matches!(
            verify_kept(&p, &sig, &other, &here, &keys),
            Err(NotKept::NoKey)
        ));
    }

    #[test]
    fn keys_of_other_kinds_are_refused_with_a_reason() {
        assert!(
            SigningKey::from_pem(b"-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nAA==\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n")
                .err()
                .unwrap()
                .contains("cosign import-key-pair")
        );
        assert!(
            PublicKey::from_pem(b"nonsense", "k")
                .unwrap_err()
                .contains("not a PEM public key")
        );
    }
}
