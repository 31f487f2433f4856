//! Plugin versions and where they come from: the `WasmPlugin` resource ([`wasmplugin`]),
//! bytes in ConfigMaps ([`bytes`]), OCI artifacts ([`artifacts`]) and files ([`files`]) as
//! [`sources`], each an
//! [`origin::Origin`]; the [`manager`] that swaps versions once `approval` has checked them
//! against the API server, refusing with a [`refusal::Reason`]; the [`slot::PluginSlot`]
//! each plugin's versions live in; promotion and abort of a candidate ([`promotion`]) and
//! its counts in the status ([`report`]). The registry runs nothing itself: it starts and
//! stops controllers through [`runner::Runner`], which the controller layer implements.

pub(crate) mod approval;
pub(crate) mod artifacts;
pub mod bytes;
pub mod files;
pub mod manager;
pub mod origin;
pub mod promotion;
pub mod refusal;
pub mod report;
pub mod runner;
pub mod slot;
pub mod sources;
pub mod wasmplugin;

pub use manager::Manager;
pub use refusal::Rejection;
pub use wasmplugin::{WasmPlugin, WasmPluginStatus};
