//! Plugins as principals: every request a plugin's plans cause goes out as the plugin's own
//! ServiceAccount (impersonated by the host), so Kubernetes RBAC, not only the guard, bounds
//! what a plugin can do. [`rules`] derives the RBAC a plugin needs from its declarations,
//! [`manifest`] prints it (`wasmop rbac`), [`review`] asks the API server whether it is
//! granted before a version becomes active (and `host_reads` whether the host itself may
//! watch what the version watches), [`identity`] names the accounts and makes the
//! clients.

pub mod apply;
pub(crate) mod host_reads;
pub mod identity;
pub mod manifest;
pub mod review;
pub mod rules;
