//! The sandboxed plugin runtime: one engine, plugins compiled and validated once, and
//! every call in a fresh store with a deadline and a memory cap.
//!
//! Split by concern: [`engine`] (engine and epoch ticker), [`function_cache`] (compiled
//! functions kept for the next version), [`limits`] (per-call limits),
//! [`store`] (what a store holds), `wasi` (the WASI a plugin gets), [`plugin`] (a loaded version), [`call`] (one call and
//! failure classification), [`budget`] (limits on what a plugin returns), [`footprint`] (what an answer costs parsed), [`validate`] (checks of `info()`), [`outcome`] (a decision's result as data), [`types`] (plain types of
//! the contract), `bindings` (the generated code of contract 0.4.0, private) and `legacy` (0.3.0's,
//! adapted to 0.4.0).

mod bindings;
pub mod budget;
pub mod call;
pub(crate) mod disk;
pub mod engine;
pub mod error;
pub mod footprint;
pub mod function_cache;
mod legacy;
pub mod limits;
pub mod outcome;
pub mod plugin;
mod sandbox;
pub mod store;
pub use wasmop_contract as types;
pub mod validate;
pub(crate) mod wasi;

pub use call::Entry;
pub use engine::{EngineConfig, SandboxEngine};
pub use error::{CallError, LoadError};
pub use limits::{GuestMemory, Limits, Reservation};
pub use outcome::Outcome;
pub use plugin::{LoadedPlugin, digest_of};
pub use sandbox::{COMPILED_KEPT, Sandbox, candidate_share, memory_parts};
pub use store::CallContext;
pub use types::*;

/// A relation named `pods` to pods, selected by `selection` and `selector` (tests).
#[cfg(test)]
pub(crate) fn pod_relation(selection: Selection, selector: Option<&str>) -> Relation {
    Relation {
        name: "pods".into(),
        kind: KindRef::pod(),
        selection,
        label_selector: selector.map(str::to_string),
        fields: None,
    }
}
