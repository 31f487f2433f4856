//! DnsRecord: a wasmop plugin managing records in an outside DNS API, the pattern of every
//! operator that manages something outside Kubernetes (a database, a bucket, a SaaS
//! account). The plugin has no network: its plans carry requests, the host sends them to
//! the hosts the plugin declares and an admin grants, and the next decision observes the
//! answers ([`decide`]). A finalizer deletes the record before the object goes.

pub mod decide;
pub mod types;

use kube_core::CustomResourceExt;
use wasmop_sdk::{KindRef, Permission, Plugin, PluginInfo, Verb};

pub use types::{DnsRecord, DnsRecordSpec, DnsRecordStatus};

/// The plugin.
pub struct DnsRecordPlugin;

/// The primary kind.
pub fn primary_kind() -> KindRef {
    KindRef {
        group: "dns.example.com".into(),
        version: "v1alpha1".into(),
        kind: "DnsRecord".into(),
        plural: "dnsrecords".into(),
        namespaced: true,
    }
}

/// The hosts the plugin's requests may go to: the public DNS API, and any port of the
/// loopback address (a DNS API beside the host, in tests). An admin still grants each.
pub const OUTBOUND_HOSTS: &[&str] = &[
    types::DEFAULT_ENDPOINT,
    "https://*.dns.example.com",
    "http://127.0.0.1:*",
];

impl Plugin for DnsRecordPlugin {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "dnsrecord".into(),
            version: if cfg!(feature = "v2") {
                concat!(env!("CARGO_PKG_VERSION"), "-v2")
            } else {
                env!("CARGO_PKG_VERSION")
            }
            .into(),
            primary: primary_kind(),
            crd: Some(serde_json::to_value(DnsRecord::crd()).expect("CRD serialises")),
            relations: Vec::new(),
            // The token's Secret, read by the host for the request's header: its
            // ServiceAccount must be allowed to `get` it.
            permissions: vec![Permission {
                kind: KindRef {
                    group: String::new(),
                    version: "v1".into(),
                    kind: "Secret".into(),
                    plural: "secrets".into(),
                    namespaced: true,
                },
                verbs: vec![Verb::Get],
            }],
            finalizer: Some("dns.example.com/record".into()),
            webhooks: Default::default(),
            outbound_hosts: OUTBOUND_HOSTS.iter().map(|h| h.to_string()).collect(),
        }
    }

    fn reconcile(
        observed: &wasmop_sdk::Observed,
    ) -> Result<wasmop_sdk::Plan, wasmop_sdk::ReconcileError> {
        decide::reconcile(observed)
    }

    fn cleanup(
        observed: &wasmop_sdk::Observed,
    ) -> Result<wasmop_sdk::Plan, wasmop_sdk::ReconcileError> {
        decide::cleanup(observed)
    }
}

wasmop_sdk::export_plugin!(DnsRecordPlugin);
