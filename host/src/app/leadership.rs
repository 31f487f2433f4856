//! What a replica does as the leadership comes and goes. Every replica runs the plugins'
//! caches; the fence lets only the leader's writes out. On taking the lead a replica writes
//! the WasmPlugin statuses (its own were refused as a standby) and reconciles every object;
//! on losing it, it stands by again with its caches kept, and competes for the lease anew.

use std::sync::Arc;

use tokio::sync::watch;

use crate::registry::{Manager, sources};
use crate::telemetry::metrics::Metrics;

/// Where the WasmPlugin uploads are read from (`None`: uploads are off).
pub struct Uploads {
    /// The client (fenced) and how OCI sources are pulled.
    pub source: sources::Uploads,
    /// The namespace of the WasmPlugin objects.
    pub namespace: String,
}

/// Why following the leadership ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// Shutdown was asked for.
    Shutdown,
    /// The elector ended (its sender is gone) while this replica did not lead.
    ElectorGone,
}

/// Follows `leading` until shutdown (or until the elector is gone while standing by).
pub async fn follow(
    mut leading: watch::Receiver<bool>,
    mut shutdown: watch::Receiver<bool>,
    manager: Arc<Manager>,
    metrics: Arc<Metrics>,
    uploads: Option<Uploads>,
) -> Ended {
    loop {
        tokio::select! {
            biased;
            _ = shutdown.wait_for(|v| *v) => return Ended::Shutdown,
            led = leading.wait_for(|l| *l) => if led.is_err() { return Ended::ElectorGone },
        }
        metrics.leader.set(1);
        tracing::info!("leading: writing the WasmPlugin statuses and reconciling everything");
        if let Some(u) = &uploads
            && let Err(e) = sources::load_cluster(&u.source, &manager, &u.namespace).await
        {
            tracing::warn!(error = %e, namespace = %u.namespace, "cannot list WasmPlugins");
        }
        manager.reconcile_everything().await;
        // On SIGTERM the elector steps down right after shutdown is asked for: that is a
        // clean stop, not a lost leadership.
        tokio::select! {
            biased;
            _ = shutdown.wait_for(|v| *v) => return Ended::Shutdown,
            _ = leading.wait_for(|l| !*l) => {}
        }
        if *shutdown.borrow() {
            return Ended::Shutdown;
        }
        metrics.leader.set(0);
        tracing::error!(
            "lost the leadership: writes refused, running reconciles abandoned; standing by with warm caches"
        );
    }
}
