//! wasmop: a Kubernetes operator host whose reconcile logic runs in sandboxed WebAssembly
//! components.
//!
//! The host does all Kubernetes I/O; each plugin is a pure decision function from the
//! observed state to a plan (see `wit/plugin.wit`).
//!
//! The modules are layers; each imports only from the layers below it (`tests/layers.rs`
//! checks every `crate::` path; `docs/architecture.md` explains the map). From the bottom:
//!
//! | layer | modules |
//! |---|---|
//! | the sandbox, what the host tells about itself | [`runtime`], [`telemetry`] |
//! | what a decision sees, decisions as data | [`observe`], [`cases`] |
//! | the API server, OCI registries, hosts outside the cluster | [`k8s`], [`oci`], [`effects`] |
//! | plans, identities, candidate versions | [`plan`], [`principals`], [`rollout`] |
//! | caches and expectations | [`cache`], [`expect`] |
//! | plugin versions and where they come from | [`registry`] |
//! | sharding | [`shards`] |
//! | one decision end to end, one plugin's watch loop, webhooks | [`reconcile`], [`controller`], [`admission`] |
//! | `wasmop run`, the command line | [`app`], [`cmd`] |
//!
//! Public: the sandbox ([`runtime`]) and what a decision sees ([`observe`]), which the
//! benchmarks embed; [`k8s`], [`shards`] and [`rollout`], whose Lease, fence, ring and canary
//! rules the integration tests drive directly; and [`main`], the binary. Everything else is
//! the crate's own.

pub(crate) mod admission;
pub(crate) mod app;
pub(crate) mod cache;
pub(crate) mod cases;
pub(crate) mod cmd;
pub(crate) mod controller;
pub(crate) mod effects;
pub(crate) mod expect;
pub mod k8s;
pub mod observe;
pub(crate) mod oci;
pub(crate) mod plan;
pub(crate) mod principals;
pub(crate) mod reconcile;
pub(crate) mod registry;
pub mod rollout;
pub mod runtime;
pub mod shards;
pub(crate) mod telemetry;

pub use cmd::main;
