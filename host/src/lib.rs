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
//! | the API server | [`k8s`] |
//! | plans, identities, candidate versions | [`plan`], [`principals`], [`rollout`] |
//! | caches and expectations | [`cache`], [`expect`] |
//! | plugin versions and where they come from | [`registry`] |
//! | sharding | [`shards`] |
//! | one decision end to end, one plugin's watch loop | [`reconcile`], [`controller`] |
//! | `wasmop run`, the command line | [`app`], [`cmd`] |

pub mod app;
pub mod cache;
pub mod cases;
pub mod cmd;
pub mod controller;
pub mod expect;
pub mod k8s;
pub mod observe;
pub mod plan;
pub mod principals;
pub mod reconcile;
pub mod registry;
pub mod rollout;
pub mod runtime;
pub mod shards;
pub mod telemetry;
