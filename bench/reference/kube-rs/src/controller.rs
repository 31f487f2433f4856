//! The controller: kube-runtime's `Controller` over PodReplicas, owning pods read from a
//! reflector store; `reconcile` and `error_policy`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::decide;
use crate::metrics::Metrics;
use crate::types::PodReplica;

/// Why a reconcile failed; the error policy requeues it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request to the API server failed.
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// `spec.size` is out of range (the CRD's schema normally prevents it).
    #[error("invalid spec: {0}")]
    InvalidSpec(String),
    /// The object lacks a field the API server always sets (namespace, uid).
    #[error("object without {0}")]
    Incomplete(&'static str),
    /// The pod watch ended before its first list (only at shutdown).
    #[error("the pod watch ended before its first list")]
    PodWatchGone,
}

/// What every reconcile shares.
pub struct Context {
    /// The client (User-Agent `podreplica-kube-rs`).
    pub client: Client,
    /// All pods of the cluster, kept by a reflector.
    pub pods: Store<Pod>,
    /// Becomes true once the pod store has had its first list.
    pub pods_synced: watch::Receiver<bool>,
    /// Counters and histograms.
    pub metrics: Arc<Metrics>,
}

/// Back-off after a failed reconcile.
pub const ERROR_REQUEUE: Duration = Duration::from_secs(5);

/// Reconciles one PodReplica: create the missing pods, delete the surplus and the finished
/// ones, and write the status when it changed. Waits for the next change.
pub async fn reconcile(pr: Arc<PodReplica>, ctx: Arc<Context>) -> Result<Action, Error> {
    let start = Instant::now();
    let result = apply(&pr, &ctx).await;
    ctx.metrics.reconciled(result.is_ok(), start.elapsed());
    result
}

async fn apply(pr: &PodReplica, ctx: &Context) -> Result<Action, Error> {
    if pr.metadata.deletion_timestamp.is_some() {
        // The garbage collector deletes the pods with their owner.
        return Ok(Action::await_change());
    }
    let size = decide::desired_size(pr).map_err(Error::InvalidSpec)?;
    let ns = pr.namespace().ok_or(Error::Incomplete("namespace"))?;
    let uid = pr.uid().ok_or(Error::Incomplete("uid"))?;
    // The controller waits for its PodReplica store only; the pod store is ours.
    ctx.pods_synced
        .clone()
        .wait_for(|synced| *synced)
        .await
        .map_err(|_| Error::PodWatchGone)?;
    let pods = ctx.pods.state_filter(|p| {
        p.metadata.namespace.as_deref() == Some(ns.as_str()) && decide::is_controlled_by(p, &uid)
    });
    let changes = decide::changes(decide::classify(pods, &uid), size);

    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    for pod in &changes.delete {
        let name = pod.name_any();
        ctx.metrics.wrote("delete");
        match pods_api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => info!(pod = %name, "deleted pod"),
            // Already gone: what we wanted.
            Err(kube::Error::Api(s)) if s.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
    }
    let mut names: Vec<String> = changes.keep.iter().map(|p| p.name_any()).collect();
    let ready = changes.keep.iter().filter(|p| decide::is_ready(p)).count();
    if changes.create > 0 {
        let pod = decide::new_pod(pr).ok_or(Error::Incomplete("uid"))?;
        for _ in 0..changes.create {
            ctx.metrics.wrote("create");
            let created = pods_api.create(&PostParams::default(), &pod).await?;
            info!(pod = %created.name_any(), "created pod");
            names.push(created.name_any());
        }
    }

    let status = decide::desired_status(pr, names, ready, Time(Timestamp::now()));
    if pr.status.as_ref() != Some(&status) {
        let api: Api<PodReplica> = Api::namespaced(ctx.client.clone(), &ns);
        ctx.metrics.wrote("patch");
        api.patch_status(
            &pr.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await?;
        debug!(
            replicas = status.replicas,
            ready = status.ready_replicas,
            "status written"
        );
    }
    Ok(Action::await_change())
}

/// Requeues a failed reconcile after [`ERROR_REQUEUE`] (the controller's stream logs the
/// error).
pub fn error_policy(_pr: Arc<PodReplica>, _error: &Error, _ctx: Arc<Context>) -> Action {
    Action::requeue(ERROR_REQUEUE)
}

/// Sets `synced` once the watch stream has delivered its first complete list of `what`
/// (`InitDone`: the reflector upstream has then filled its store).
fn mark_synced<K>(
    what: &'static str,
    synced: watch::Sender<bool>,
) -> impl FnMut(&watcher::Event<K>) + Send + 'static {
    move |event| {
        if matches!(event, watcher::Event::InitDone) && !synced.send_replace(true) {
            info!("{what} listed: store synced");
        }
    }
}

/// Runs the controller until SIGTERM or Ctrl-C, reconciling at most `concurrency`
/// PodReplicas at once (0: no limit). `ready` becomes true once both stores have had their
/// first list.
pub async fn run(client: Client, metrics: Arc<Metrics>, ready: Readiness, concurrency: u16) {
    let podreplicas = Api::<PodReplica>::all(client.clone());
    let pods = Api::<Pod>::all(client.clone());

    // PodReplicas: the controller's own reflector, built here (rather than by
    // `Controller::new`) only to see when its first list is in (see `Readiness`).
    let (pr_store, pr_writer) = reflector::store();
    let pr_events = watcher(podreplicas, watcher::Config::default())
        .default_backoff()
        .reflect(pr_writer)
        .inspect_ok(mark_synced("PodReplicas", ready.podreplicas))
        .applied_objects();

    // Pods: one watch, kept in a reflector store that `reconcile` reads, and whose events
    // trigger the owner named by a pod's controller ownerReference (what `.owns()` does,
    // which keeps no store of its own).
    let (pod_store, pod_writer) = reflector::store();
    let pod_events = watcher(pods, watcher::Config::default())
        .default_backoff()
        .reflect(pod_writer)
        .inspect_ok(mark_synced("pods", ready.pods))
        .touched_objects();

    let ctx = Arc::new(Context {
        client,
        pods: pod_store,
        pods_synced: ready.pods_rx,
        metrics,
    });
    Controller::for_stream(pr_events, pr_store)
        .with_config(controller::Config::default().concurrency(concurrency))
        .owns_stream(pod_events)
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|res| async move {
            match res {
                Ok((obj, _)) => debug!(podreplica = %obj, "reconciled"),
                // A pod event for an owner that is gone (it was deleted with its pods).
                Err(e @ controller::Error::ObjectNotFound(_)) => debug!(error = %e, "skipped"),
                Err(e) => warn!(error = %e, "reconcile failed"),
            }
        })
        .await;
}

/// Whether the stores have had their first list: what `/readyz` reports.
///
/// `Store::wait_until_ready` is not used for this: in kube-runtime 5.0 it waits on a
/// one-shot channel that wakes only the task that polled it last, so two tasks waiting on
/// the same store (the controller's runner and a readiness task, or two reconciles at
/// start-up) leave all but one waiting for ever. Watch channels wake every waiter.
pub struct Readiness {
    podreplicas: watch::Sender<bool>,
    pods: watch::Sender<bool>,
    pods_rx: watch::Receiver<bool>,
    /// Both flags, for `/readyz`.
    pub probe: ReadyProbe,
}

/// The read side of [`Readiness`], for `/readyz`.
#[derive(Clone)]
pub struct ReadyProbe {
    podreplicas: watch::Receiver<bool>,
    pods: watch::Receiver<bool>,
}

impl ReadyProbe {
    /// Whether both stores have had their first list.
    pub fn is_ready(&self) -> bool {
        *self.podreplicas.borrow() && *self.pods.borrow()
    }
}

impl Default for Readiness {
    fn default() -> Self {
        let (podreplicas, pr_rx) = watch::channel(false);
        let (pods, pods_rx) = watch::channel(false);
        Self {
            podreplicas,
            pods,
            probe: ReadyProbe {
                podreplicas: pr_rx,
                pods: pods_rx.clone(),
            },
            pods_rx,
        }
    }
}
