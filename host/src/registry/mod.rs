//! Plugin versions and where they come from: the `WasmPlugin` resource ([`wasmplugin`]),
//! bytes in ConfigMaps ([`bytes`]), `wasmop push` ([`push`]), promotion and abort
//! of a candidate ([`rollout`]) and its counts in the status ([`report`]), the plugins directory and the
//! cluster as sources ([`sources`]), and the [`manager`] that swaps versions once `approval`
//! has checked them against the API server.

mod approval;
pub mod bytes;
pub mod manager;
pub mod push;
pub mod report;
pub mod rollout;
pub mod sources;
pub mod target;
pub mod wasmplugin;

pub use manager::{Accepted, Change, Manager, Rejection};
pub use wasmplugin::{WasmPlugin, WasmPluginSpec, WasmPluginStatus};
