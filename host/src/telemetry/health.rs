//! Readiness: a registry of named flags, one per component that must be up before the
//! host counts as ready (`/readyz`).
//!
//! A component registers its flag once (`health.flag("plugins")`), keeps the returned
//! [`ReadyFlag`] and sets it whenever its state changes. The host is ready when every
//! registered flag is set. Liveness (`/healthz`) does not depend on these flags.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// The readiness registry. Share it as an `Arc<Health>`; all methods take `&self`.
///
/// Guarantees: a flag is not ready until set; a flag stays registered for the lifetime of
/// the registry, even when every handle on it is dropped (a component that went away
/// keeps the host not ready); with no flag registered the host is ready.
#[derive(Debug, Default)]
pub struct Health {
    flags: Mutex<BTreeMap<String, Arc<AtomicBool>>>,
}

/// A handle on one readiness flag. Clones share the flag.
#[derive(Debug, Clone)]
pub struct ReadyFlag {
    name: Arc<str>,
    value: Arc<AtomicBool>,
}

impl ReadyFlag {
    /// Marks the component ready (`true`) or not ready (`false`).
    pub fn set(&self, ready: bool) {
        self.value.store(ready, Ordering::Release);
    }

    /// Whether the component is currently marked ready.
    pub fn get(&self) -> bool {
        self.value.load(Ordering::Acquire)
    }

    /// The name the flag was registered under.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Health {
    /// An empty registry (ready, since nothing is awaited).
    pub fn new() -> Self {
        Health::default()
    }

    /// Registers the flag `name`, initially not ready, and returns a handle on it. Asking
    /// again for a name already registered returns a handle on the same flag, with its
    /// current value.
    pub fn flag(&self, name: &str) -> ReadyFlag {
        let mut flags = self.flags.lock().unwrap_or_else(PoisonError::into_inner);
        let value = flags
            .entry(name.to_owned())
            .or_insert_with(|| Arc::new(AtomicBool::new(false)))
            .clone();
        ReadyFlag {
            name: name.into(),
            value,
        }
    }

    /// True when every registered flag is set.
    pub fn ready(&self) -> bool {
        let flags = self.flags.lock().unwrap_or_else(PoisonError::into_inner);
        flags.values().all(|v| v.load(Ordering::Acquire))
    }

    /// Names of the flags not set, in name order; empty when ready.
    pub fn not_ready(&self) -> Vec<String> {
        let flags = self.flags.lock().unwrap_or_else(PoisonError::into_inner);
        flags
            .iter()
            .filter(|(_, v)| !v.load(Ordering::Acquire))
            .map(|(k, _)| k.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_registry_is_ready() {
        let h = Health::new();
        assert!(h.ready());
        assert!(h.not_ready().is_empty());
    }

    #[test]
    fn ready_only_when_every_flag_is_set() {
        let h = Health::new();
        let plugins = h.flag("plugins");
        let cache = h.flag("cache");
        assert!(!h.ready());
        assert_eq!(h.not_ready(), ["cache", "plugins"]);

        plugins.set(true);
        assert!(!h.ready());
        assert_eq!(h.not_ready(), ["cache"]);

        cache.set(true);
        assert!(h.ready());
        assert!(h.not_ready().is_empty());

        plugins.set(false);
        assert_eq!(h.not_ready(), ["plugins"]);
    }

    #[test]
    fn same_name_shares_the_flag_and_survives_drop() {
        let h = Health::new();
        let a = h.flag("plugins");
        a.set(true);
        let b = h.flag("plugins");
        assert!(b.get());
        assert_eq!(b.name(), "plugins");
        b.set(false);
        assert!(!a.get());
        drop(a);
        drop(b);
        assert_eq!(h.not_ready(), ["plugins"]);
    }
}
