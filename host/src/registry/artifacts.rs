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
    /// Let a WasmPlugin's `publicKeys` add keys to the host's (`--allow-plugin-keys`);
    /// without it they only narrow the host's keys ([`trust`]).
    pub allow_plugin_keys: bool,
    /// Let a WasmPlugin pull over plain HTTP (`--allow-insecure-registries`).
    pub allow_insecure: bool,
}

/// The keys a signature of one WasmPlugin's artifact is checked with.
#[derive(Debug, Default)]
pub(crate) struct Trust {
    /// Keys whose signature counts.
    pub keys: Vec<PublicKey>,
    /// Keys the WasmPlugin names that the admin did not choose: a signature by one of them
    /// is refused as `SignatureUntrusted`, saying so.
    pub foreign: Vec<PublicKey>,
}

/// Who decides which keys count: the admin. `host` are the host's `--trusted-key`s,
/// `named` those of the WasmPlugin's `publicKeys` (`None`: it names none).
///
/// - A WasmPlugin names none: the host's keys.
/// - The host has keys: the WasmPlugin's narrow them (only those of its keys that are also
///   the host's, by fingerprint, count); its other keys are foreign.
/// - The host has none: the WasmPlugin's keys are a check it asks for itself, which counts
///   only where the host requires nothing (`require`); with `--require-signature` they are
///   foreign (an uploader cannot satisfy the admin's requirement with its own key).
/// - `allow` (`--allow-plugin-keys`): the WasmPlugin's keys are added to the host's.
pub(crate) fn trust(
    host: &[PublicKey],
    named: Option<Vec<PublicKey>>,
    require: bool,
    allow: bool,
) -> Trust {
    let Some(named) = named else {
        return Trust {
            keys: host.to_vec(),
            foreign: Vec::new(),
        };
    };
    if allow {
        let mut keys = host.to_vec();
        keys.extend(named);
        return Trust {
            keys,
            foreign: Vec::new(),
        };
    }
    if host.is_empty() {
        return if require {
            Trust {
                keys: Vec::new(),
                foreign: named,
            }
        } else {
            Trust {
                keys: named,
                foreign: Vec::new(),
            }
        };
    }
    let mut trust = Trust::default();
    for key in named {
        match host.iter().find(|h| h.fingerprint == key.fingerprint) {
            // Named as the admin named it.
            Some(h) if !trust.keys.iter().any(|k| k.fingerprint == h.fingerprint) => {
                trust.keys.push(h.clone());
            }
            Some(_) => {}
            None => trust.foreign.push(key),
        }
    }
    trust
}

/// A component fetched from a registry (or the disk store), with what the status says of it.
#[derive(Debug)]
pub(crate) struct Fetched {
    /// The component.
    pub bytes: Vec<u8>,
    /// Reference, manifest digest, signer.
    pub status: ArtifactStatus,
}

/// The component of manifest `digest` against the WasmPlugin's `sha256` pin, if any.
fn check_pin(
    src: &OciSource,
    digest: &str,
    component: &[u8],
    pin: Option<&str>,
) -> Result<(), Rejection> {
    let actual = crate::runtime::plugin::digest_of(component);
    match pin {
        Some(pin) if pin != actual => Err(Rejection::new(
            Reason::DigestMismatch,
            format!(
                "{} ({digest}) holds component {actual}, the spec pins {pin}",
                src.reference
            ),
        )),
        _ => Ok(()),
    }
}

fn refusal(e: PullError) -> Rejection {
    Rejection::new(Reason::Pull(e.reason()), e.to_string())
}

impl Artifacts {
    /// How long one whole pull may take (resolve, manifest, component, signatures), each
    /// call bounded by the timeout besides: four calls' worth.
    pub(crate) fn whole_pull_deadline(&self) -> std::time::Duration {
        self.options.timeout * 4
    }

    /// The artifact store under `dir`.
    pub(crate) fn with_store(mut self, dir: &Path, (root, max_bytes): (&Path, u64)) -> Self {
        self.store = Some(Store::new(dir).with_cap(root, max_bytes));
        self
    }

    /// The keys `src` names (every PEM public key in the ConfigMap's or Secret's data).
    async fn named_keys(
        client: &Client,
        ns: &str,
        src: &KeysSource,
    ) -> Result<Vec<PublicKey>, Rejection> {
        let mut keys = Vec::new();
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
        (refresh, pin): (bool, Option<&str>),
    ) -> Result<Fetched, Rejection> {
        let reference = parse(&src.reference).map_err(refusal)?;
        if src.insecure == Some(true) && !self.allow_insecure {
            return Err(Rejection::new(
                Reason::Pull("InsecureNotAllowed"),
                "the WasmPlugin asks for plain HTTP (insecure: true), which this host refuses: a pull secret's credentials would cross the network in clear. Start the host with --allow-insecure-registries to allow it",
            ));
        }
        let registry = reference.resolve_registry().to_string();
        let credentials = Self::credentials(client, ns, src, &registry).await?;
        let wants_signature = self.require_signature || src.public_keys.is_some();
        let named = match &src.public_keys {
            Some(keys) => Some(Self::named_keys(client, ns, keys).await?),
            None => None,
        };
        let trust = trust(
            &self.host_keys,
            named,
            self.require_signature,
            self.allow_plugin_keys,
        );
        if wants_signature && trust.keys.is_empty() && trust.foreign.is_empty() {
            return Err(Rejection::new(
                Reason::TrustedKeysInvalid,
                "the host requires a signature (--require-signature) and trusts no key: start the host with --trusted-key",
            ));
        }
        let options = RemoteOptions {
            insecure: src.insecure.unwrap_or(false),
            ..self.options.clone()
        };
        let remote = Remote::new(&registry, credentials, options).map_err(refusal)?;
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
        // The signature first (a few small reads): an artifact no trusted key signed is
        // refused before its component is downloaded.
        let signed_by = if wants_signature {
            Some(self.verified(&remote, &reference, &digest, &trust).await?)
        } else {
            None
        };
        let (bytes, pulled_manifest) = match self.stored(&digest) {
            Some(bytes) => (bytes, None),
            None => {
                let pulled = remote.pull(&reference, &digest).await.map_err(refusal)?;
                (pulled.component, Some(pulled.manifest))
            }
        };
        check_pin(src, &digest, &bytes, pin)?;
        let from_disk = pulled_manifest.is_none();
        // Only what passed every check (signature, pin) is kept.
        if let (Some(store), Some(manifest)) = (&self.store, &pulled_manifest) {
            store.put_manifest(manifest, &digest);
            store.put(&bytes);
        }
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
        trust: &Trust,
    ) -> Result<String, Rejection> {
        let name = |k: &PublicKey| format!("{} {}", k.name, k.fingerprint);
        let keys = &trust.keys;
        match signature::verify(remote, reference, digest, keys).await {
            Ok(found) => {
                if let Some(store) = &self.store {
                    store.put_signature(digest, &found.payload, &found.signature);
                }
                Ok(name(&found.key))
            }
            Err(Untrusted::Pull(e)) if e.is_transient() => {
                let kept = self.store.as_ref().and_then(|s| s.get_signature(digest));
                let repository = signature::repository_of(reference);
                match kept.and_then(|(p, s)| {
                    signature::verify_kept(&p, &s, digest, &repository, keys).ok()
                }) {
                    Some(k) => Ok(name(&k)),
                    None => Err(refusal(e)),
                }
            }
            Err(e @ (Untrusted::Unsigned { .. } | Untrusted::BadSignature { .. }))
                if !trust.foreign.is_empty() =>
            {
                // Signed by a key the WasmPlugin names and the admin did not choose?
                match signature::verify(remote, reference, digest, &trust.foreign).await {
                    Ok(found) => Err(Rejection::new(
                        Reason::Pull("SignatureUntrusted"),
                        format!(
                            "{digest} is signed by {}, a key the WasmPlugin names and the host does not trust: publicKeys may only narrow the host's --trusted-key set (trusted: {}); a host started with --allow-plugin-keys lets WasmPlugins add keys",
                            name(&found.key),
                            names(keys, &self.host_keys),
                        ),
                    )),
                    Err(_) => Err(Rejection::new(Reason::Pull(e.reason()), e.to_string())),
                }
            }
            Err(e) => Err(Rejection::new(Reason::Pull(e.reason()), e.to_string())),
        }
    }
}

/// The names of `keys`, or of the host's when `keys` is empty (for messages).
fn names(keys: &[PublicKey], host: &[PublicKey]) -> String {
    let list = if keys.is_empty() { host } else { keys };
    if list.is_empty() {
        return "none".into();
    }
    list.iter()
        .map(|k| format!("{} {}", k.name, k.fingerprint))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE8TfHFxLqaaFhjWa7rWrCNTp9Ivi+
5rdHDJhnbvXe54LZnGkgpr3NlXCpV9Cl/2BQr9bodCsebbmj4RvdwNtkKw==
-----END PUBLIC KEY-----
";

    fn key(name: &str, last: u8) -> PublicKey {
        use base64::Engine as _;
        let der = base64::engine::general_purpose::STANDARD
            .decode(
                A.lines()
                    .filter(|l| !l.starts_with("-----"))
                    .collect::<String>(),
            )
            .unwrap();
        let mut der = der;
        *der.last_mut().unwrap() = last;
        let b64 = base64::engine::general_purpose::STANDARD.encode(der);
        let pem = format!("-----BEGIN PUBLIC KEY-----\n{b64}\n-----END PUBLIC KEY-----\n");
        PublicKey::from_pem(pem.as_bytes(), name).unwrap()
    }

    fn names_of(keys: &[PublicKey]) -> Vec<&str> {
        keys.iter().map(|k| k.name.as_str()).collect()
    }

    #[test]
    fn an_uploader_narrows_the_admins_keys_and_never_widens_them() {
        let org = key("org.pub", 1);
        let other_org = key("other-org.pub", 2);
        let host = vec![org.clone(), other_org];
        let mine = key("ConfigMap default/mine key k", 3);
        let org_again = key("ConfigMap default/trusted key a.pub", 1);
        // Nothing named: the host's keys.
        let t = trust(&host, None, true, false);
        assert_eq!(names_of(&t.keys), ["org.pub", "other-org.pub"]);
        // The uploader's own key: foreign, whatever the host requires.
        for require in [true, false] {
            let t = trust(&host, Some(vec![mine.clone()]), require, false);
            assert!(t.keys.is_empty(), "{require}");
            assert_eq!(names_of(&t.foreign), ["ConfigMap default/mine key k"]);
        }
        // One of the admin's keys: narrowed to it, named as the admin named it.
        let t = trust(
            &host,
            Some(vec![org_again.clone(), mine.clone()]),
            true,
            false,
        );
        assert_eq!(names_of(&t.keys), ["org.pub"]);
        assert_eq!(names_of(&t.foreign), ["ConfigMap default/mine key k"]);
        // A host that trusts no key and requires a signature: the uploader's key cannot
        // satisfy it; one that requires none: the WasmPlugin's own check.
        let t = trust(&[], Some(vec![mine.clone()]), true, false);
        assert!(t.keys.is_empty());
        assert_eq!(t.foreign.len(), 1);
        let t = trust(&[], Some(vec![mine.clone()]), false, false);
        assert_eq!(names_of(&t.keys), ["ConfigMap default/mine key k"]);
        // --allow-plugin-keys: added.
        let t = trust(&host, Some(vec![mine]), true, true);
        assert_eq!(t.keys.len(), 3);
        assert!(t.foreign.is_empty());
    }
}
