//! Plugins as OCI artifacts, the way Kubewarden policies and Spin apps ship: the CNCF wasm
//! artifact layout ([`artifact`]), a registry client that resolves a tag to a digest once and
//! pulls by digest with the host's own identity or a pull secret ([`remote`],
//! [`credentials`]), every read bounded in size and where it may be redirected ([`reader`]), cosign key-pair signatures ([`signature`]) and the on-disk store of
//! pulled components ([`store`]). No Kubernetes here: the registry layer reads pull secrets
//! and trusted keys and hands them down.

pub(crate) mod artifact;
pub(crate) mod credentials;
pub(crate) mod error;
pub(crate) mod reader;
pub(crate) mod remote;
pub(crate) mod signature;
pub(crate) mod store;

pub(crate) use error::PullError;
pub(crate) use remote::{Remote, RemoteOptions};
