//! wasmop: a Kubernetes operator host whose reconcile logic runs in sandboxed WebAssembly
//! components.
//!
//! The host does all Kubernetes I/O; each plugin is a pure decision function from the
//! observed state to a plan (see `wit/plugin.wit`). Modules: [`runtime`] (the sandbox),
//! [`observe`] (what a decision sees), [`offline`] (commands without a cluster),
//! [`rollout`] (candidate versions: shadow, canary, recorded decisions),
//! [`scaffold`] (`wasmop new`), [`dev`] (`wasmop dev`), [`cli`].

pub mod checkout;
pub mod cli;
pub mod dev;
pub mod observe;
pub mod offline;
pub mod operator;
pub mod ops;
pub mod principals;
pub mod registry;
pub mod rollout;
pub mod runtime;
pub mod scaffold;
pub mod shards;
