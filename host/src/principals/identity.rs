//! Who a plugin is towards the API server: its own ServiceAccount, which the host
//! impersonates for every request the plugin's plans cause.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::Client;

use crate::k8s::fence::Fence;
use crate::telemetry::metrics::Metrics;

/// How plugin ServiceAccounts are named: `{name}` in the template is the plugin's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Naming {
    /// Namespace of the plugins' ServiceAccounts (the host's, by default).
    pub namespace: String,
    /// Name template, `wasmop-plugin-{name}` by default.
    pub template: String,
}

/// The default ServiceAccount name template.
pub const DEFAULT_TEMPLATE: &str = "wasmop-plugin-{name}";

impl Naming {
    /// The ServiceAccount of plugin `plugin`.
    pub fn service_account(&self, plugin: &str) -> String {
        self.template.replace("{name}", plugin)
    }

    /// The user name the API server knows that ServiceAccount by.
    pub fn user(&self, plugin: &str) -> String {
        format!(
            "system:serviceaccount:{}:{}",
            self.namespace,
            self.service_account(plugin)
        )
    }

    /// The groups of that ServiceAccount (what a SubjectAccessReview must name so that
    /// bindings to groups count as they would for the real token).
    pub fn groups(&self) -> Vec<String> {
        vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{}", self.namespace),
            "system:authenticated".into(),
        ]
    }
}

/// Builds a client from a configuration (the host's fenced, counted stack).
pub type ClientMaker = dyn Fn(kube::Config) -> anyhow::Result<Client> + Send + Sync;

/// The clients plugins act through, one per plugin, made on first use.
pub struct Principals {
    naming: Naming,
    base: kube::Config,
    make: Box<ClientMaker>,
    clients: Mutex<HashMap<String, Client>>,
}

impl std::fmt::Debug for Principals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Principals")
            .field("naming", &self.naming)
            .finish_non_exhaustive()
    }
}

impl Principals {
    /// Plugin clients made from `base` (the host's configuration) by `make`, each
    /// impersonating its plugin's ServiceAccount.
    pub fn new(naming: Naming, base: kube::Config, make: Box<ClientMaker>) -> Arc<Self> {
        Arc::new(Principals {
            naming,
            base,
            make,
            clients: Mutex::default(),
        })
    }

    /// Plugin clients that pass `fence` and are counted in `metrics`, like the host's own.
    pub fn fenced(
        naming: Naming,
        base: kube::Config,
        fence: Arc<Fence>,
        metrics: Arc<Metrics>,
    ) -> Arc<Self> {
        Self::new(
            naming,
            base,
            Box::new(move |cfg| {
                crate::k8s::client::fenced_client_from(cfg, fence.clone(), metrics.clone())
            }),
        )
    }

    /// The naming of plugin ServiceAccounts.
    pub fn naming(&self) -> &Naming {
        &self.naming
    }

    /// The client plugin `plugin` acts through.
    pub fn client_for(&self, plugin: &str) -> anyhow::Result<Client> {
        let mut clients = self.clients.lock().expect("principals lock");
        if let Some(c) = clients.get(plugin) {
            return Ok(c.clone());
        }
        let mut cfg = self.base.clone();
        cfg.auth_info.impersonate = Some(self.naming.user(plugin));
        cfg.auth_info.impersonate_groups = None;
        let client = (self.make)(cfg)?;
        clients.insert(plugin.to_string(), client.clone());
        Ok(client)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_the_template() {
        let n = Naming {
            namespace: "wasmop-system".into(),
            template: DEFAULT_TEMPLATE.into(),
        };
        assert_eq!(n.service_account("podreplica"), "wasmop-plugin-podreplica");
        assert_eq!(
            n.user("podreplica"),
            "system:serviceaccount:wasmop-system:wasmop-plugin-podreplica"
        );
        assert!(
            n.groups()
                .contains(&"system:serviceaccounts:wasmop-system".to_string())
        );
    }
}
