//! `wasmop publish PLUGIN.wasm REGISTRY/REPO:TAG` pushes a plugin as an OCI artifact in the
//! wasm layout (and, with `--sign KEY`, its cosign signature); `wasmop sign REFERENCE --key
//! KEY` signs one already published. Both print the manifest digest, the name to pin a
//! WasmPlugin to (`wasmop push NAME oci://REGISTRY/REPO@DIGEST`).

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::PathBuf;

use anyhow::Context;

use crate::oci::artifact::{ComponentInfo, pack};
use crate::oci::credentials::Credentials;
use crate::oci::remote::parse;
use crate::oci::signature::{self, SigningKey};
use crate::oci::{Remote, RemoteOptions};
use crate::runtime::plugin::digest_of;
use crate::runtime::{Limits, Sandbox};

/// How to reach the registry.
#[derive(Debug, Clone, clap::Args)]
pub struct RegistryArgs {
    /// Talk plain HTTP to the registry (a local registry without TLS).
    #[arg(long)]
    pub insecure: bool,
    /// A CA certificate (PEM) to trust besides the system's (a private registry).
    #[arg(long, value_name = "FILE")]
    pub registry_ca: Option<PathBuf>,
    /// The user to log in as; the password comes from `$WASMOP_REGISTRY_PASSWORD` or, with
    /// `--password-stdin`, from standard input.
    #[arg(long, env = "WASMOP_REGISTRY_USER")]
    pub username: Option<String>,
    /// Read the password from standard input.
    #[arg(long, requires = "username")]
    pub password_stdin: bool,
    /// Seconds each registry call may take.
    #[arg(long, default_value_t = 120)]
    pub timeout_seconds: u64,
}

impl RegistryArgs {
    fn remote(&self, registry: &str) -> anyhow::Result<Remote> {
        let credentials = match &self.username {
            None => Credentials::Anonymous,
            Some(username) => {
                let password = if self.password_stdin {
                    let mut p = String::new();
                    std::io::stdin()
                        .read_to_string(&mut p)
                        .context("reading the password from standard input")?;
                    p.trim_end_matches(['\n', '\r']).to_string()
                } else {
                    std::env::var("WASMOP_REGISTRY_PASSWORD").context(
                        "--username needs a password: set WASMOP_REGISTRY_PASSWORD or pass --password-stdin",
                    )?
                };
                Credentials::Basic {
                    username: username.clone(),
                    password,
                }
            }
        };
        let extra_roots = match &self.registry_ca {
            Some(path) => vec![
                std::fs::read(path).with_context(|| format!("--registry-ca {}", path.display()))?,
            ],
            None => Vec::new(),
        };
        Ok(Remote::new(
            registry,
            credentials,
            RemoteOptions {
                insecure: self.insecure,
                extra_roots,
                timeout: std::time::Duration::from_secs(self.timeout_seconds.max(1)),
                max_bytes: u64::MAX,
                ..RemoteOptions::default()
            },
        )?)
    }
}

/// Arguments of `wasmop publish`.
#[derive(Debug, clap::Args)]
pub struct PublishArgs {
    /// The plugin component (`.wasm`); checked to be a plugin before anything is pushed.
    pub plugin: PathBuf,
    /// Where: `REGISTRY/REPOSITORY:TAG` (an `oci://` prefix is allowed).
    pub reference: String,
    /// Sign the pushed artifact with this key (PKCS#8 PEM, ECDSA P-256), cosign's format.
    #[arg(long, value_name = "KEY")]
    pub sign: Option<PathBuf>,
    /// The registry.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// Arguments of `wasmop sign`.
#[derive(Debug, clap::Args)]
pub struct SignArgs {
    /// The artifact: `REGISTRY/REPOSITORY:TAG` or `...@sha256:DIGEST`.
    pub reference: String,
    /// The private key (PKCS#8 PEM, ECDSA P-256).
    #[arg(long)]
    pub key: PathBuf,
    /// The registry.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

fn signing_key(path: &PathBuf) -> anyhow::Result<SigningKey> {
    let pem = std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
    SigningKey::from_pem(&pem).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// Runs `wasmop publish`.
pub async fn publish(args: &PublishArgs) -> anyhow::Result<()> {
    let reference = parse(&args.reference)?;
    if reference.digest().is_some() {
        anyhow::bail!(
            "{}: publish under a tag (REGISTRY/REPOSITORY:TAG); the digest is what it prints",
            args.reference
        );
    }
    let key = args.sign.as_ref().map(signing_key).transpose()?;
    let component = std::fs::read(&args.plugin)
        .with_context(|| format!("{}: cannot read", args.plugin.display()))?;
    let sandbox = Sandbox::new(1)?;
    let loaded = sandbox
        .load(&component, Limits::default())
        .map_err(|e| anyhow::anyhow!("{}: not a wasmop plugin: {e}", args.plugin.display()))?;
    let (imports, exports) = sandbox.world_of(&component)?;
    let info = &loaded.info;
    let annotations = BTreeMap::from([
        (
            "org.opencontainers.image.title".to_string(),
            info.name.clone(),
        ),
        (
            "org.opencontainers.image.version".to_string(),
            info.version.clone(),
        ),
        (
            "dev.wasmop.primary".to_string(),
            format!(
                "{}.{}/{}",
                info.primary.kind, info.primary.group, info.primary.version
            ),
        ),
    ]);
    let packed = pack(
        &component,
        ComponentInfo {
            exports,
            imports,
            target: None,
        },
        annotations,
    );
    let remote = args.registry.remote(reference.resolve_registry())?;
    let digest = remote.publish(&reference, &packed).await?;
    println!(
        "published {} ({} {}, {} bytes, component {}) as {}@{digest}",
        args.plugin.display(),
        info.name,
        info.version,
        component.len(),
        digest_of(&component),
        reference.whole(),
    );
    if let Some(key) = key {
        let tag = signature::sign(&remote, &reference, &digest, &key).await?;
        println!("signed {digest} ({tag})");
    }
    println!("{digest}");
    Ok(())
}

/// Runs `wasmop sign`.
pub async fn sign(args: &SignArgs) -> anyhow::Result<()> {
    let reference = parse(&args.reference)?;
    let key = signing_key(&args.key)?;
    let remote = args.registry.remote(reference.resolve_registry())?;
    let digest = remote.resolve(&reference).await?;
    let tag = signature::sign(&remote, &reference, &digest, &key).await?;
    println!("signed {}@{digest} ({tag})", reference.whole());
    Ok(())
}

/// Arguments of `wasmop verify`.
#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// The artifact: `REGISTRY/REPOSITORY:TAG` or `...@sha256:DIGEST`.
    pub reference: String,
    /// A trusted public key (PEM, ECDSA P-256: `cosign.pub`); repeatable.
    #[arg(long = "key", required = true)]
    pub keys: Vec<PathBuf>,
    /// The registry.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// Runs `wasmop verify`: checks the artifact's cosign signatures as the host does; returns
/// whether one of the keys signed it.
pub async fn verify(args: &VerifyArgs) -> anyhow::Result<bool> {
    let reference = parse(&args.reference)?;
    let mut keys = Vec::new();
    for path in &args.keys {
        let pem =
            std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
        keys.push(
            signature::PublicKey::from_pem(&pem, &path.display().to_string())
                .map_err(anyhow::Error::msg)?,
        );
    }
    let remote = args.registry.remote(reference.resolve_registry())?;
    let digest = remote.resolve(&reference).await?;
    match signature::verify(&remote, &reference, &digest, &keys).await {
        Ok(v) => {
            println!(
                "verified {}@{digest}: signed by {} ({})",
                reference.whole(),
                v.key.name,
                v.key.fingerprint
            );
            Ok(true)
        }
        Err(e) => {
            println!("not verified: {}: {e}", e.reason());
            Ok(false)
        }
    }
}
