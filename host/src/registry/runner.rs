//! The seam between the registry and what runs a plugin, as controller-runtime's manager
//! knows its controllers only as `Runnable`s: the registry decides which version of which
//! plugin runs, and when; the controller layer implements [`Runner`] and runs it. The
//! registry's identity rules are tested against a fake of it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures::channel::mpsc;
use futures::future::BoxFuture;
use tokio::task::JoinHandle;

use crate::registry::refusal::Rejection;
use crate::registry::slot::PluginSlot;
use crate::runtime::{PluginInfo, Sandbox};
use crate::telemetry::health::ReadyFlag;

/// What stops a controller once it resolves (the host's shutdown, or the registry's).
pub type Stop = Pin<Box<dyn Future<Output = ()> + Send + Sync + 'static>>;

/// What runs the registry's plugins.
pub trait Runner: Send + Sync {
    /// The sandbox versions are compiled in.
    fn sandbox(&self) -> &Sandbox;

    /// Approves a version (active or candidate) once it loaded and before anything changes,
    /// or says why not: its kinds are served, the host may watch what it watches, its
    /// ServiceAccount holds what it declares ([`super::approval`]).
    fn approve<'a>(&'a self, info: &'a PluginInfo) -> BoxFuture<'a, Result<(), Rejection>>;

    /// Takes what a controller of `info` needs (the shared caches of its relations). Taken
    /// before an older controller of the same plugin stops, a cache both use stays listed
    /// across the restart.
    fn prepare(&self, info: &PluginInfo) -> Box<dyn Prepared>;

    /// Releases finalizer `fin` from the objects of `info`'s plugin, which no longer
    /// declares it (nothing would ever remove it); logged, never fails.
    fn release_finalizer<'a>(&'a self, info: &'a PluginInfo, fin: &'a str) -> BoxFuture<'a, ()>;
}

/// A controller that holds what it needs and waits to start.
pub trait Prepared: Send {
    /// Resolves once every cache it took has its first full list (at once for caches an
    /// older controller of the plugin keeps listed): a version that watches differently
    /// replaces the running one only then.
    fn listed(&self) -> BoxFuture<'static, ()>;

    /// Runs the controller of the plugin in `slot` until `stop` resolves: `synced` turns
    /// true once its caches are listed, and each message on `reconcile_all` reconciles
    /// every object again.
    fn start(
        self: Box<Self>,
        slot: Arc<PluginSlot>,
        synced: ReadyFlag,
        reconcile_all: mpsc::UnboundedReceiver<()>,
        stop: Stop,
    ) -> JoinHandle<()>;
}
