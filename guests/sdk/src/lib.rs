//! The wasmop guest SDK.
//!
//! A plugin is an ordinary Rust type implementing [`Plugin`]: `info()` says what it
//! reconciles, `reconcile()` turns an [`Observed`] state into a [`Plan`]. Both are plain
//! functions over plain types, so a plugin's logic is unit-tested natively with `cargo test`,
//! and the same tests run under wasmtime with `cargo test --target wasm32-wasip2`.
//! [`export_plugin!`] turns the type into the component's exports.
//!
//! ```ignore
//! struct MyPlugin;
//! impl wasmop_sdk::Plugin for MyPlugin { /* info, reconcile */ }
//! wasmop_sdk::export_plugin!(MyPlugin);
//! ```

pub mod conditions;
pub mod k8s;
pub mod log;
pub use wasmop_contract as types;

#[doc(hidden)]
pub mod glue;

/// The generated bindings of the `wasmop:plugin` world (used by [`export_plugin!`]).
#[doc(hidden)]
#[allow(missing_docs, unsafe_code, clippy::all)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "plugin",
        path: "../../wit",
        pub_export_macro: true,
        export_macro_name: "export_raw",
        default_bindings_module: "wasmop_sdk::bindings",
    });
}

pub use types::*;

/// A plugin: the decisions of one operator.
pub trait Plugin {
    /// What the plugin reconciles, what it watches, what its plans need.
    fn info() -> PluginInfo;

    /// Decide what to do about one primary object. Must be a pure function of `observed`.
    fn reconcile(observed: &Observed) -> Result<Plan, ReconcileError>;

    /// Decide how to clean up a primary object that is being deleted. Called only when
    /// `info().finalizer` is set; the default does nothing.
    fn cleanup(_observed: &Observed) -> Result<Plan, ReconcileError> {
        Ok(Plan::new())
    }
}

/// Exports a [`Plugin`] type as the component's `info`, `reconcile` and `cleanup`.
/// Expands to nothing outside WebAssembly, so native tests link no exports.
#[macro_export]
macro_rules! export_plugin {
    ($plugin:ty) => {
        #[cfg(target_family = "wasm")]
        const _: () = {
            struct Exported;
            impl $crate::bindings::Guest for Exported {
                fn info() -> $crate::bindings::wasmop::plugin::types::PluginInfo {
                    $crate::glue::info::<$plugin>()
                }
                fn reconcile(
                    observed: $crate::bindings::wasmop::plugin::types::Observed,
                ) -> ::core::result::Result<
                    $crate::bindings::wasmop::plugin::types::Plan,
                    $crate::bindings::wasmop::plugin::types::ReconcileError,
                > {
                    $crate::glue::decide(observed, <$plugin as $crate::Plugin>::reconcile)
                }
                fn cleanup(
                    observed: $crate::bindings::wasmop::plugin::types::Observed,
                ) -> ::core::result::Result<
                    $crate::bindings::wasmop::plugin::types::Plan,
                    $crate::bindings::wasmop::plugin::types::ReconcileError,
                > {
                    $crate::glue::decide(observed, <$plugin as $crate::Plugin>::cleanup)
                }
            }
    $crate::bindings::export_raw!(Exported with_types_in $crate::bindings);
        };
    };
}
