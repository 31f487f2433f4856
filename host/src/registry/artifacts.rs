//! Plugin versions from OCI registries: the WasmPlugin's `oci` source turned into the
//! component's bytes. A tag is resolved to a manifest digest once (again only when the
//! WasmPlugin follows the tag, or its spec changes); the artifact is pulled by digest with
//! the host's own identity or the WasmPlugin's pull secret (read from its own namespace
//! only), kept on disk by digest, and, when keys are trusted, its cosign signature checked
//! before a byte of it is loaded. With the registry away, what the disk holds for the digest
//! the status names still loads: a restart does not need the registry.

use std::path::Path;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;
use kube::api::Api;
use oci_client::Reference;

use crate::oci::credentials::{Credentials, from_docker_config};
use crate::oci::remote::parse;
use crate::oci::signature::{self, PublicKey, Untrusted};
use crate::oci::store::Store;
use crate::oci::{PullError, Remote, RemoteOptions};
use crate::registry::refusal::{Reason, Rejection};
use crate::registry::wasmplugin::{ArtifactStatus, KeysSource, OciSource};

/// How the host pulls: the options every pull uses, the disk store, the keys the host
/// itself trusts and whether it requires a signature of every OCI source.
#[derive(Debug, Clone, Default)]
pub(crate) struct Artifacts {
    /// Timeout, size cap, extra CAs.
    pub options: RemoteOptions,
    /// Pulled components and manifests on disk (none: every restart pulls again).
    pub store: Option<Store>,
    /// Keys trusted for every WasmPlugin (`--trusted-key`).
    pub host_keys: Vec<PublicKey>,
    /// Refuse an OCI source without a valid signature by a trusted key.
    pub require_signature: bool,
}

/// A component fetched from a registry (or the disk store), with what the status says of it.
#[derive(Debug)]
pub(crate) struct Fetched {
    /// The component.
    pub bytes: Vec<u8>,
    /// Reference, manifest digest, signer.
    pub status: ArtifactStatus,
}

fn refusal(e: PullError) -> Rejection {
    Rejection::new(Reason::Pull(e.reason()), e.to_string())
}

impl Artifacts {
    /// The artifact store under `dir`.
    pub(crate) fn with_store(mut self, dir: &Path) -> Self {
        self.store = Some(Store::new(dir));
        self
    }

    /// The keys `src` names (every PEM public key in the ConfigMap's or Secret's data),
    /// plus the host's.
    async fn keys(
        &self,
        client: &Client,
        ns: &str,
        src: Option<&KeysSource>,
    ) -> Result<Vec<PublicKey>, Rejection> {
        let mut keys = self.host_keys.clone();
        let Some(src) = src else { return Ok(keys) };
        let unreadable = |what: String| Rejection::new(Reason::TrustedKeysInvalid, what);
        let entries: Vec<(String, Vec<u8>)> = match (&src.config_map, &src.secret) {
            (Some(name), None) => {
                let cm = Api::<ConfigMap>::namespaced(client.clone(), ns)
                    .get_opt(name)
                    .await
                    .map_err(|e| unreadable(format!("ConfigMap {ns}/{name}: {e}")))?
                    .ok_or_else(|| unreadable(format!("ConfigMap {ns}/{name} not found")))?;
                cm.data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (format!("ConfigMap {ns}/{name} key {k}"), v.into_bytes()))
                    .collect()
            }
            (None, Some(name)) => {
                let s = Api::<Secret>::namespaced(client.clone(), ns)
                    .get_opt(name)
                    .await
                    .map_err(|e| unreadable(format!("Secret {ns}/{name}: {e}")))?
                    .ok_or_else(|| unreadable(format!("Secret {ns}/{name} not found")))?;
                s.data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (format!("Secret {ns}/{name} key {k}"), v.0))
                    .collect()
            }
            _ => {
                return Err(unreadable(
                    "publicKeys names exactly one of configMap or secret".into(),
                ));
            }
        };
        if entries.is_empty() {
            return Err(unreadable("publicKeys: the object holds no key".into()));
        }
        for (name, pem) in entries {
            keys.push(PublicKey::from_pem(&pem, &name).map_err(unreadable)?);
        }
        Ok(keys)
    }

    /// The credentials of `src` for `registry`: its pull secret's, or none.
    async fn credentials(
        client: &Client,
        ns: &str,
        src: &OciSource,
        registry: &str,
    ) -> Result<Credentials, Rejection> {
        let Some(name) = &src.pull_secret else {
            return Ok(Credentials::Anonymous);
        };
        let bad = |what: String| Rejection::new(Reason::PullSecretInvalid, what);
        let secret = Api::<Secret>::namespaced(client.clone(), ns)
            .get_opt(name)
            .await
            .map_err(|e| bad(format!("Secret {ns}/{name}: {e}")))?
            .ok_or_else(|| bad(format!("pull secret {ns}/{name} not found")))?;
        let json = secret
            .data
            .as_ref()
            .and_then(|d| d.get(".dockerconfigjson"))
            .ok_or_else(|| {
                bad(format!(
                    "pull secret {ns}/{name} has no .dockerconfigjson (type kubernetes.io/dockerconfigjson, as `kubectl create secret docker-registry` makes)"
                ))
            })?;
        from_docker_config(&json.0, registry)
            .map_err(|e| bad(format!("pull secret {ns}/{name}: {e}")))
    }

    /// The component `src` names, for a WasmPlugin of namespace `ns`. `known` is what the
    /// status says the host runs; its digest is used instead of resolving the tag again
    /// unless `refresh` (the WasmPlugin follows its tag, or its spec changed).
    pub(crate) async fn fetch(
        &self,
        client: &Client,
        ns: &str,
        src: &OciSource,
        known: Option<&ArtifactStatus>,
        refresh: bool,
    ) -> Result<Fetched, Rejection> {
        let reference = parse(&src.reference).map_err(refusal)?;
        let registry = reference.resolve_registry().to_string();
        let credentials = Self::credentials(client, ns, src, &registry).await?;
        let wants_signature = self.require_signature || src.public_keys.is_some();
        let keys = self.keys(client, ns, src.public_keys.as_ref()).await?;
        if wants_signature && keys.is_empty() {
            return Err(Rejection::new(
                Reason::TrustedKeysInvalid,
                "the host requires a signature (--require-signature) and no key is trusted: name publicKeys in the WasmPlugin or start the host with --trusted-key",
            ));
        }
        let options = RemoteOptions {
            insecure: src.insecure.unwrap_or(false),
            ..self.options.clone()
        };
        let remote = Remote::new(&registry, credentials, options);
        let known = known.filter(|k| k.reference == src.reference);
        let digest = match (reference.digest(), known) {
            (Some(d), _) => d.to_string(),
            (None, Some(k)) if !refresh => k.digest.clone(),
            (None, _) => match remote.resolve(&reference).await {
                Ok(d) => d,
                // The registry is away: the digest the host ran keeps running.
                Err(e) if e.is_transient() && known.is_some() => {
                    let k = known.expect("checked");
                    tracing::warn!(reference = %src.reference, digest = %k.digest, error = %e, "cannot resolve the tag; keeping the digest resolved before");
                    k.digest.clone()
                }
                Err(e) => return Err(refusal(e)),
            },
        };
        let (bytes, from_disk) = match self.stored(&digest) {
            Some(bytes) => (bytes, true),
            None => {
                let pulled = remote.pull(&reference, &digest).await.map_err(refusal)?;
                if let Some(store) = &self.store {
                    store.put_manifest(&pulled.manifest, &digest);
                    store.put(&pulled.component);
                }
                (pulled.component, false)
            }
        };
        let signed_by = if wants_signature {
            Some(self.verified(&remote, &reference, &digest, &keys).await?)
        } else {
            None
        };
        tracing::info!(reference = %src.reference, %digest, from_disk, bytes = bytes.len(), signed_by = signed_by.as_deref().unwrap_or("-"), "OCI artifact fetched");
        Ok(Fetched {
            bytes,
            status: ArtifactStatus {
                reference: src.reference.clone(),
                digest,
                signed_by,
            },
        })
    }

    /// The component of manifest `digest`, from the disk store.
    fn stored(&self, digest: &str) -> Option<Vec<u8>> {
        let store = self.store.as_ref()?;
        let manifest = store.get_manifest(digest)?;
        let layer = crate::oci::artifact::component_layer("", digest, &manifest).ok()?;
        store.get(&layer.digest)
    }

    /// Who signed `digest` (the key's name and fingerprint): checked against the registry's
    /// signatures, or, with the registry away, against the signature kept on disk when it
    /// was first verified (checked again, with today's keys).
    async fn verified(
        &self,
        remote: &Remote,
        reference: &Reference,
        digest: &str,
        keys: &[PublicKey],
    ) -> Result<String, Rejection> {
        let name = |k: &PublicKey| format!("{} {}", k.name, k.fingerprint);
        match signature::verify(remote, reference, digest, keys).await {
            Ok(found) => {
                if let Some(store) = &self.store {
                    store.put_signature(digest, &found.payload, &found.signature);
                }
                Ok(name(&found.key))
            }
            Err(Untrusted::Pull(e)) if e.is_transient() => {
                let kept = self.store.as_ref().and_then(|s| s.get_signature(digest));
                match kept.and_then(|(p, s)| signature::verify_kept(&p, &s, digest, keys)) {
                    Some(k) => Ok(name(&k)),
                    None => Err(refusal(e)),
                }
            }
            Err(e) => Err(Rejection::new(Reason::Pull(e.reason()), e.to_string())),
        }
    }
}
