//! The control plane's share of the work: CPU seconds of each of its processes (etcd,
//! kube-apiserver, kube-controller-manager, kube-scheduler, kwok), read from `/proc` through
//! the pid files in the cluster's state directory. Beside the host's own CPU it shows where
//! the machine's cores went in a phase, and what the floor's same work cost the API server.

use std::collections::BTreeMap;
use std::path::Path;

/// The control plane's processes, as their pid files name them.
pub const COMPONENTS: [&str; 5] = [
    "kube-apiserver",
    "etcd",
    "kwok",
    "kube-scheduler",
    "kube-controller-manager",
];

/// CPU seconds so far of each component of the control plane in `state` (0 for one whose
/// pid file is missing or whose process is gone).
pub fn look(state: &Path) -> BTreeMap<String, f64> {
    COMPONENTS
        .iter()
        .map(|name| {
            let pid = std::fs::read_to_string(state.join(format!("{name}.pid")))
                .ok()
                .and_then(|p| p.trim().parse::<u32>().ok());
            (name.to_string(), pid.map_or(0.0, crate::cost::cpu_seconds))
        })
        .collect()
}

/// What each component spent between two looks.
pub fn between(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
) -> BTreeMap<String, f64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .collect()
}

/// All components together.
pub fn total(spent: &BTreeMap<String, f64>) -> f64 {
    spent.values().sum()
}
