//! What a plugin's plan becomes before anything is written: its steps ([`guard::Step`], on
//! a primary [`guard::PrimaryRef`]), made by a [`Checker`]: the [`guard`], which checks each
//! against what the plugin declared, the host's own objects and the delete budget, or, in
//! tests only, [`unchecked`].

pub mod guard;
pub mod unchecked;

use std::collections::HashSet;

use futures::future::BoxFuture;

use crate::runtime::{Plan, PluginInfo};
use guard::{PrimaryRef, Step, Violation};

/// What turns a plugin's plan into the steps the host writes, or refuses it.
pub trait Checker: Send + Sync {
    /// The steps of `plan` of plugin `info` for `primary`, in plan order, or the rule it
    /// breaks. `owned_uids` are the UIDs of the objects the primary controls.
    fn steps<'a>(
        &'a self,
        info: &'a PluginInfo,
        primary: &'a PrimaryRef,
        plan: &'a Plan,
        owned_uids: &'a HashSet<String>,
    ) -> BoxFuture<'a, Result<Vec<Step>, Violation>>;

    /// Whether an apply is checked against the API server for an object another owner
    /// controls (which the plan may not adopt).
    fn checks_adoption(&self) -> bool;
}

impl Checker for guard::Guard {
    fn steps<'a>(
        &'a self,
        info: &'a PluginInfo,
        primary: &'a PrimaryRef,
        plan: &'a Plan,
        owned_uids: &'a HashSet<String>,
    ) -> BoxFuture<'a, Result<Vec<Step>, Violation>> {
        Box::pin(std::future::ready(
            self.check(info, primary, plan, owned_uids),
        ))
    }

    fn checks_adoption(&self) -> bool {
        true
    }
}
