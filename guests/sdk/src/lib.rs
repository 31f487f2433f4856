//! The wasmop guest SDK: write a Kubernetes operator's decisions as plain Rust functions,
//! run them sandboxed in the wasmop host.
//!
//! A plugin is an ordinary Rust type implementing [`Plugin`]: [`Plugin::info`] says what it
//! reconciles (the primary kind and its CRD), what the host must watch for it (relations)
//! and what its plans may do (permissions); [`Plugin::reconcile`] turns an [`Observed`] state
//! into a [`Plan`]. Both are plain functions over plain types: unit-test them natively with
//! `cargo test`, or compiled to `wasm32-wasip2` under wasmtime (`wasmop wasi-run` as cargo's
//! runner). [`export_plugin!`] turns the type into the component's exports.
//!
//! Start a new plugin with `wasmop new NAME --kind Kind --group example.com`: a crate that
//! builds, tests and runs as is. The shape of one:
//!
//! ```
//! use serde::Deserialize;
//! use serde_json::json;
//! use wasmop_sdk::k8s::{Identity, ObjectView, pod_kind};
//! use wasmop_sdk::{
//!     KindRef, Observed, Permission, Plan, Plugin, PluginInfo, ReconcileError, Relation,
//!     Selection, Verb,
//! };
//!
//! /// What this decision reads of a pod: its phase (the rest is skipped while parsing).
//! #[derive(Deserialize)]
//! struct Phase {
//!     phase: Option<String>,
//! }
//!
//! struct OnePod;
//!
//! impl Plugin for OnePod {
//!     fn info() -> PluginInfo {
//!         PluginInfo {
//!             name: "onepod".into(),
//!             version: "0.1.0".into(),
//!             primary: KindRef {
//!                 group: "example.com".into(),
//!                 version: "v1".into(),
//!                 kind: "OnePod".into(),
//!                 plural: "onepods".into(),
//!                 namespaced: true,
//!             },
//!             crd: None, // a real plugin returns its CRD (kube-derive's `crd()`)
//!             relations: vec![Relation {
//!                 name: "pods".into(),
//!                 kind: pod_kind(),
//!                 selection: Selection::Owned,
//!                 label_selector: None,
//!                 // What `reconcile` reads of a pod, besides its metadata.
//!                 fields: Some(vec!["status.phase".into()]),
//!             }],
//!             permissions: vec![Permission { kind: pod_kind(), verbs: vec![Verb::Create] }],
//!             finalizer: None,
//!             webhooks: Default::default(),
//!             outbound_hosts: vec![],
//!         }
//!     }
//!
//!     /// Keep one pod per OnePod; say in the status whether it runs.
//!     fn reconcile(observed: &Observed) -> Result<Plan, ReconcileError> {
//!         let me = Identity::of(&observed.primary)?;
//!         let pods: Vec<ObjectView<Phase>> = observed.related_as("pods")?;
//!         let running = pods.iter().any(|p| {
//!             p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
//!         });
//!         let mut plan = Plan::new().status(&json!({"running": running}));
//!         if pods.is_empty() {
//!             plan = plan.apply(&json!({
//!                 "apiVersion": "v1", "kind": "Pod",
//!                 "metadata": {"generateName": format!("{}-", me.name), "namespace": me.namespace,
//!                     "ownerReferences": [me.controller_reference()]},
//!                 "spec": {"containers": [{"name": "main", "image": "busybox"}]},
//!             }));
//!         }
//!         Ok(plan)
//!     }
//! }
//!
//! // The decision is a pure function: test it on an observed state made by hand.
//! let observed = Observed::new(json!({"apiVersion": "example.com/v1", "kind": "OnePod",
//!     "metadata": {"name": "a", "namespace": "default", "uid": "u1"}}));
//! let plan = OnePod::reconcile(&observed).unwrap();
//! assert_eq!(plan.applied().count(), 1);
//!
//! // In the plugin crate (a cdylib built for wasm32-wasip2), one line exports it:
//! // wasmop_sdk::export_plugin!(OnePod);
//! ```
//!
//! The parts: [`k8s`] (ownership, termination, time, [`k8s::ObjectView`] to read only what a
//! decision needs), [`conditions`] (status conditions that keep their transition time),
//! [`log`] (lines in the host's log, tagged with plugin and object), and the contract's
//! types ([`types`], re-exported at the root).

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
        path: "wit",
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

    /// Allow or refuse a create, update or delete of the primary kind. Called only when
    /// `info().webhooks.validate` is set; the default allows.
    fn validate(_request: &AdmissionRequest) -> Verdict {
        Verdict::allow()
    }

    /// Fill in the defaults of an object of the primary kind. Called only when
    /// `info().webhooks.default` is set; the default changes nothing.
    fn default(object: serde_json::Value) -> Result<serde_json::Value, String> {
        Ok(object)
    }

    /// Convert an object of the primary kind to `to_version` of its CRD. Called only when
    /// `info().webhooks.convert` is set; the default refuses.
    fn convert(_object: serde_json::Value, to_version: &str) -> Result<serde_json::Value, String> {
        Err(format!(
            "this plugin does not convert (asked for {to_version})"
        ))
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
                fn validate(
                    request: $crate::bindings::wasmop::plugin::types::AdmissionRequest,
                ) -> $crate::bindings::wasmop::plugin::types::Verdict {
                    $crate::glue::validate(request, <$plugin as $crate::Plugin>::validate)
                }
                fn default(
                    object: ::std::string::String,
                ) -> ::core::result::Result<::std::string::String, ::std::string::String> {
                    $crate::glue::transform(object, <$plugin as $crate::Plugin>::default)
                }
                fn convert(
                    object: ::std::string::String,
                    to_version: ::std::string::String,
                ) -> ::core::result::Result<::std::string::String, ::std::string::String> {
                    $crate::glue::transform(object, |o| {
                        <$plugin as $crate::Plugin>::convert(o, &to_version)
                    })
                }
            }
    $crate::bindings::export_raw!(Exported with_types_in $crate::bindings);
        };
    };
}
