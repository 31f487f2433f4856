//! A registry, as the host and `wasmop publish` talk to it: resolve a tag to a manifest
//! digest, pull an artifact by digest (checking its layout, its size against the cap and
//! every digest on the way), publish one, and read or write the cosign signatures stored
//! beside it. Every call is bounded by the timeout, and every read in size too
//! ([`crate::oci::reader`]); the TLS stack is rustls on ring, as for the API server.

use std::time::Duration;

use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::{Client, Reference};

use crate::oci::artifact::{self, ACCEPTED_MANIFESTS, MANIFEST_MEDIA_TYPE, Packed};
use crate::oci::credentials::Credentials;
use crate::oci::error::PullError;
use crate::oci::reader::{Reader, ReaderOptions, Redirects};
use crate::runtime::plugin::digest_of;

/// How the host talks to registries.
#[derive(Debug, Clone)]
pub(crate) struct RemoteOptions {
    /// Plain HTTP to this registry (a test or an in-cluster registry without TLS).
    pub insecure: bool,
    /// Extra CA certificates (PEM) trusted besides the system's.
    pub extra_roots: Vec<Vec<u8>>,
    /// Bound of each call (resolve, pull, push).
    pub timeout: Duration,
    /// The largest component accepted, in bytes.
    pub max_bytes: u64,
    /// Where a registry may redirect a read.
    pub redirects: Redirects,
}

impl Default for RemoteOptions {
    fn default() -> Self {
        RemoteOptions {
            insecure: false,
            extra_roots: Vec::new(),
            timeout: Duration::from_secs(60),
            max_bytes: DEFAULT_MAX_BYTES,
            redirects: Redirects::SameRegistry,
        }
    }
}

/// The default cap on a component pulled from a registry: 64 MiB (a Python or JavaScript
/// component carries its interpreter: 10–40 MiB).
pub(crate) const DEFAULT_MAX_BYTES: u64 = 64 << 20;

/// A pulled artifact.
#[derive(Debug, Clone)]
pub(crate) struct Pulled {
    /// The raw manifest.
    pub manifest: Vec<u8>,
    /// The component's bytes (the one layer).
    pub component: Vec<u8>,
}

/// One registry, with credentials: reads through a bounded [`Reader`], pushes with
/// `oci-client`.
pub(crate) struct Remote {
    client: Client,
    reader: Reader,
    credentials: Credentials,
    options: RemoteOptions,
}

/// Parses `REGISTRY/REPO[:TAG][@sha256:DIGEST]` (an `oci://` prefix is allowed).
pub(crate) fn parse(reference: &str) -> Result<Reference, PullError> {
    let bare = reference.strip_prefix("oci://").unwrap_or(reference);
    let invalid = |why: String| PullError::InvalidReference {
        reference: reference.to_string(),
        why,
    };
    // A reference without a registry would silently mean Docker Hub: ask for it in full.
    let first = bare.split('/').next().unwrap_or_default();
    if !bare.contains('/') || !(first.contains('.') || first.contains(':') || first == "localhost")
    {
        return Err(invalid(
            "name the registry in full, e.g. ghcr.io/org/plugin:1.0 or 127.0.0.1:5000/plugin:1.0"
                .into(),
        ));
    }
    bare.parse::<Reference>()
        .map_err(|e| invalid(e.to_string()))
}

impl Remote {
    /// A client for the registry of the references it is given, with `credentials`.
    pub(crate) fn new(
        registry: &str,
        credentials: Credentials,
        options: RemoteOptions,
    ) -> Result<Self, PullError> {
        let reader = Reader::new(
            registry,
            credentials.clone(),
            &ReaderOptions {
                insecure: options.insecure,
                extra_roots: options.extra_roots.clone(),
                redirects: options.redirects,
            },
        )?;
        let config = ClientConfig {
            protocol: if options.insecure {
                ClientProtocol::HttpsExcept(vec![registry.to_string()])
            } else {
                ClientProtocol::Https
            },
            extra_root_certificates: options
                .extra_roots
                .iter()
                .map(|pem| Certificate {
                    encoding: CertificateEncoding::Pem,
                    data: pem.clone(),
                })
                .collect(),
            // An image index is refused with a reason, never resolved to some platform.
            platform_resolver: None,
            connect_timeout: Some(options.timeout.min(Duration::from_secs(15))),
            read_timeout: Some(options.timeout),
            ..ClientConfig::default()
        };
        Ok(Remote {
            client: Client::new(config),
            reader,
            credentials,
            options,
        })
    }

    async fn bounded<T>(
        &self,
        reference: &Reference,
        work: impl Future<Output = Result<T, oci_client::errors::OciDistributionError>>,
    ) -> Result<T, PullError> {
        match tokio::time::timeout(self.options.timeout, work).await {
            Ok(r) => r.map_err(|e| PullError::from_client(&reference.whole(), e)),
            Err(_) => Err(PullError::Timeout {
                reference: reference.whole(),
                seconds: self.options.timeout.as_secs(),
            }),
        }
    }

    async fn login(&self, reference: &Reference) {
        self.client
            .store_auth_if_needed(reference.resolve_registry(), &self.credentials.auth())
            .await;
    }

    /// The manifest digest `reference` names: its own digest if it has one (checked against
    /// the registry's), else what its tag points at now.
    pub(crate) async fn resolve(&self, reference: &Reference) -> Result<String, PullError> {
        self.within(
            reference,
            self.reader
                .resolve(reference, &ACCEPTED_MANIFESTS.join(", ")),
        )
        .await
    }

    /// `work`, bounded by the timeout.
    async fn within<T>(
        &self,
        reference: &Reference,
        work: impl Future<Output = Result<T, PullError>>,
    ) -> Result<T, PullError> {
        tokio::time::timeout(self.options.timeout, work)
            .await
            .unwrap_or_else(|_| {
                Err(PullError::Timeout {
                    reference: reference.whole(),
                    seconds: self.options.timeout.as_secs(),
                })
            })
    }

    /// The raw manifest at `reference` (at most [`crate::oci::reader::MAX_MANIFEST_BYTES`])
    /// and its digest (checked when the reference has one).
    pub(crate) async fn manifest(
        &self,
        reference: &Reference,
    ) -> Result<(Vec<u8>, String), PullError> {
        self.within(
            reference,
            self.reader
                .manifest(reference, &ACCEPTED_MANIFESTS.join(", ")),
        )
        .await
    }

    /// The blob `digest` of `reference`'s repository, at most `cap` bytes, checked against
    /// its digest.
    pub(crate) async fn blob(
        &self,
        reference: &Reference,
        digest: &str,
        size: u64,
        cap: u64,
    ) -> Result<Vec<u8>, PullError> {
        if size > cap {
            return Err(PullError::TooLarge {
                reference: reference.whole(),
                size,
                cap,
            });
        }
        let bytes = self
            .within(reference, self.reader.blob(reference, digest, cap))
            .await?;
        let actual = digest_of(&bytes);
        if actual != digest {
            return Err(PullError::DigestMismatch {
                reference: reference.whole(),
                expected: digest.to_string(),
                actual,
            });
        }
        Ok(bytes)
    }

    /// Pulls the wasm artifact of `reference` by the manifest digest `digest`: checks the
    /// layout and the size cap before the download, the digests after.
    pub(crate) async fn pull(
        &self,
        reference: &Reference,
        digest: &str,
    ) -> Result<Pulled, PullError> {
        let pinned = reference.clone_with_digest(digest.to_string());
        let (raw, manifest_digest) = self.manifest(&pinned).await?;
        let layer = artifact::component_layer(&reference.whole(), &manifest_digest, &raw)?;
        let component = self
            .blob(
                &pinned,
                &layer.digest,
                layer.size.max(0) as u64,
                self.options.max_bytes,
            )
            .await?;
        Ok(Pulled {
            manifest: raw,
            component,
        })
    }

    /// Pushes `packed` under `reference`'s tag; returns the manifest's digest.
    pub(crate) async fn publish(
        &self,
        reference: &Reference,
        packed: &Packed,
    ) -> Result<String, PullError> {
        self.login(reference).await;
        for layer in std::slice::from_ref(&packed.layer) {
            let digest = digest_of(&layer.data);
            self.bounded(
                reference,
                self.client
                    .push_blob(reference, layer.data.clone(), &digest),
            )
            .await?;
        }
        self.bounded(
            reference,
            self.client.push_blob(
                reference,
                packed.config.data.clone(),
                &packed.manifest.config.digest,
            ),
        )
        .await?;
        self.push_manifest(reference, &packed.manifest).await
    }

    /// Pushes blob `data` into `reference`'s repository.
    pub(crate) async fn push_blob(
        &self,
        reference: &Reference,
        data: Vec<u8>,
    ) -> Result<String, PullError> {
        self.login(reference).await;
        let digest = digest_of(&data);
        self.bounded(reference, self.client.push_blob(reference, data, &digest))
            .await?;
        Ok(digest)
    }

    /// Pushes `manifest` (an OCI image manifest) under `reference`; returns its digest.
    pub(crate) async fn push_manifest(
        &self,
        reference: &Reference,
        manifest: &oci_client::manifest::OciImageManifest,
    ) -> Result<String, PullError> {
        self.login(reference).await;
        let body = serde_json::to_vec(manifest).expect("a manifest serialises");
        let digest = digest_of(&body);
        self.bounded(
            reference,
            self.client.push_manifest_raw(
                reference,
                body,
                http::HeaderValue::from_static(MANIFEST_MEDIA_TYPE),
            ),
        )
        .await?;
        Ok(digest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_name_their_registry() {
        let r = parse("oci://127.0.0.1:5000/plugins/podreplica:v1").unwrap();
        assert_eq!(r.registry(), "127.0.0.1:5000");
        assert_eq!(r.repository(), "plugins/podreplica");
        assert_eq!(r.tag(), Some("v1"));
        let d = format!("sha256:{}", "a".repeat(64));
        let pinned = parse(&format!("ghcr.io/o/p:1.0@{d}")).unwrap();
        assert_eq!(pinned.digest(), Some(d.as_str()));
        for bad in [
            "podreplica:v1",
            "org/podreplica:v1",
            "ghcr.io/o/p@sha256:zz",
        ] {
            let e = parse(bad).unwrap_err();
            assert_eq!(e.reason(), "InvalidReference", "{bad}: {e}");
        }
    }
}
