//! Where a running plugin's versions live: the active one, the candidate beside it and the
//! recording switch. The registry swaps what a slot holds; every reconcile asks it which
//! version decides.

use std::sync::{Arc, RwLock};

use kube::api::DynamicObject;
use kube::runtime::reflector::Store;

use crate::rollout::{Candidate, Role};
use crate::runtime::LoadedPlugin;

/// The active version of a plugin, the candidate beside it if any, and whether its
/// decisions are recorded. Swapping replaces the `Arc`: reconciles already running keep
/// the version they started with, the next ones get the new one.
#[derive(Debug)]
pub struct PluginSlot {
    current: RwLock<Arc<LoadedPlugin>>,
    candidate: RwLock<Option<Arc<Candidate>>>,
    record: RwLock<Option<bool>>,
    primaries: std::sync::OnceLock<Store<DynamicObject>>,
}

impl PluginSlot {
    /// A slot holding `plugin`.
    pub fn new(plugin: LoadedPlugin) -> Self {
        PluginSlot {
            current: RwLock::new(Arc::new(plugin)),
            candidate: RwLock::default(),
            record: RwLock::default(),
            primaries: std::sync::OnceLock::new(),
        }
    }

    /// The cache of the plugin's primary objects, once its controller runs.
    pub fn primaries(&self) -> Option<Store<DynamicObject>> {
        self.primaries.get().cloned()
    }

    /// Hands the slot its controller's cache of primary objects (once).
    pub fn set_primaries(&self, store: Store<DynamicObject>) {
        let _ = self.primaries.set(store);
    }

    /// The candidate version, if one decides beside the active one.
    pub fn candidate(&self) -> Option<Arc<Candidate>> {
        self.candidate.read().expect("slot lock").clone()
    }

    /// Sets or clears the candidate; returns the previous one.
    pub fn set_candidate(&self, c: Option<Arc<Candidate>>) -> Option<Arc<Candidate>> {
        std::mem::replace(&mut *self.candidate.write().expect("slot lock"), c)
    }

    /// The version that decides the object with `uid`, and the candidate's part in it.
    pub fn choose(&self, uid: &str) -> (Arc<LoadedPlugin>, Role) {
        let active = self.current();
        let role = Role::of(self.candidate().as_ref(), uid);
        match &role {
            Role::Canary(c) => (c.plugin.clone(), role),
            _ => (active, role),
        }
    }

    /// The plugin's own recording switch (its WasmPlugin's `record`), if it has one.
    pub fn record_switch(&self) -> Option<bool> {
        *self.record.read().expect("slot lock")
    }

    /// Sets the plugin's recording switch.
    pub fn set_record_switch(&self, on: Option<bool>) {
        *self.record.write().expect("slot lock") = on;
    }

    /// The version to use for the next call.
    pub fn current(&self) -> Arc<LoadedPlugin> {
        self.current.read().expect("slot lock").clone()
    }

    /// Makes `plugin` the active version; returns the previous one.
    pub fn swap(&self, plugin: LoadedPlugin) -> Arc<LoadedPlugin> {
        std::mem::replace(
            &mut *self.current.write().expect("slot lock"),
            Arc::new(plugin),
        )
    }
}
