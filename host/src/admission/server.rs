//! The webhook server: HTTPS (rustls on ring, the certificate [`Presented`]) with one route
//! per plugin and webhook, `POST /validate/{plugin}` and `POST /default/{plugin}` answering
//! an AdmissionReview, `POST /convert/{plugin}` a ConversionReview, each with the plugin's
//! active version at the moment of the request: a hot swap changes the answers from the
//! next request on.
//!
//! The host fails closed: a version whose `validate` or `default` traps, runs out of time or
//! answers something malformed refuses the operation, as a reconcile that fails changes
//! nothing. A version that does not declare the webhook (its configuration lags a swap)
//! allows without a change.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::routing::post;
use futures::future::BoxFuture;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::admission::certs::Presented;
use crate::admission::review;
use crate::registry::slot::PluginSlot;
use crate::runtime::types::Verdict;
use crate::runtime::{LoadedPlugin, Sandbox};
use crate::telemetry::connections::{Bounded, Connection};
use crate::telemetry::metrics::{Metrics, WebhookLabels};

/// How long a client has to finish its TLS handshake.
const HANDSHAKE: Duration = Duration::from_secs(5);

/// Where the server finds a plugin's active version, by name.
pub trait Plugins: Send + Sync {
    /// The slot of the plugin named `name`, if it runs.
    fn slot<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Option<Arc<PluginSlot>>>;
}

#[derive(Clone)]
struct Served {
    plugins: Arc<dyn Plugins>,
    sandbox: Sandbox,
    metrics: Arc<Metrics>,
}

/// A TLS listener for axum: each accepted connection's handshake, bounded in time.
struct Tls {
    tcp: Bounded,
    acceptor: TlsAcceptor,
}

impl axum::serve::Listener for Tls {
    type Io = TlsStream<Connection>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, SocketAddr) {
        loop {
            let (tcp, addr) = self.tcp.accept().await;
            match tokio::time::timeout(HANDSHAKE, self.acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => return (tls, addr),
                Ok(Err(e)) => tracing::debug!(%addr, error = %e, "webhook TLS handshake failed"),
                Err(_) => tracing::debug!(%addr, "webhook TLS handshake timed out"),
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.tcp.local_addr()
    }
}

/// Serves the webhooks on `listener` with the certificate `presented` holds, until
/// `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    presented: Arc<Presented>,
    plugins: Arc<dyn Plugins>,
    (sandbox, metrics): (Sandbox, Arc<Metrics>),
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "webhook server listening (/validate/PLUGIN, /default/PLUGIN, /convert/PLUGIN)");
    }
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(std::io::Error::other)?
    .with_no_client_auth()
    .with_cert_resolver(presented);
    let tls = Tls {
        tcp: Bounded::new(
            listener,
            crate::telemetry::connections::MAX_CONNECTIONS,
            crate::telemetry::connections::CONNECTION_LIFETIME,
        ),
        acceptor: TlsAcceptor::from(Arc::new(config)),
    };
    let router = Router::new()
        .route("/validate/{plugin}", post(validate))
        .route("/default/{plugin}", post(default))
        .route("/convert/{plugin}", post(convert))
        .with_state(Served {
            plugins,
            sandbox,
            metrics,
        });
    axum::serve(tls, router)
        .with_graceful_shutdown(shutdown)
        .await
}

/// What came of one request, for the metrics.
#[derive(Clone, Copy)]
enum Came {
    Allowed,
    Denied,
    Failed,
}

impl Came {
    fn label(self) -> &'static str {
        match self {
            Came::Allowed => "allowed",
            Came::Denied => "denied",
            Came::Failed => "failed",
        }
    }
}

/// The active version of plugin `name`, or why there is none.
async fn active(s: &Served, name: &str) -> Result<Arc<LoadedPlugin>, String> {
    s.plugins
        .slot(name)
        .await
        .map(|slot| slot.current())
        .ok_or_else(|| format!("no plugin `{name}` runs here"))
}

/// Counts and times one request of `webhook` for `plugin`.
fn counted(s: &Served, plugin: &str, webhook: &str, started: Instant, result: Came) {
    let labels = |result: &str| WebhookLabels {
        plugin: plugin.to_string(),
        webhook: webhook.to_string(),
        result: result.to_string(),
    };
    s.metrics
        .webhook_requests
        .get_or_create(&labels(result.label()))
        .inc();
    s.metrics
        .webhook_duration_seconds
        .get_or_create(&labels(""))
        .observe(started.elapsed().as_secs_f64());
}

async fn validate(
    State(s): State<Served>,
    Path(name): Path<String>,
    Json(body): Json<Value>,
) -> Json<Value> {
    let started = Instant::now();
    let (answer, result) = validated(&s, &name, &body).await;
    counted(&s, &name, "validate", started, result);
    Json(answer)
}

async fn validated(s: &Served, name: &str, body: &Value) -> (Value, Came) {
    let asked = match review::asked(body) {
        Ok(a) => a,
        Err(e) => return (review::refused("", &e), Came::Failed),
    };
    let plugin = match active(s, name).await {
        Ok(p) => p,
        Err(why) => return (review::refused(&asked.uid, &why), Came::Failed),
    };
    if !plugin.info.webhooks.validate {
        let allowed = review::answer(&asked.uid, &Verdict::allow(), ("", "", ""));
        return (allowed, Came::Allowed);
    }
    let primary = plugin.info.primary.clone();
    let version = plugin.info.version.clone();
    match s
        .sandbox
        .validate(plugin, asked.request.clone(), asked.object.clone())
        .await
    {
        Ok(verdict) => {
            let result = if verdict.allowed {
                Came::Allowed
            } else {
                Came::Denied
            };
            let kind = (
                primary.kind.as_str(),
                primary.group.as_str(),
                asked.name.as_str(),
            );
            (review::answer(&asked.uid, &verdict, kind), result)
        }
        Err(e) => {
            tracing::warn!(plugin = %name, %version, object = %asked.object, error = %e,
                "validate failed: the operation is refused");
            let why = format!("plugin {name} {version} could not validate: {e}");
            (review::refused(&asked.uid, &why), Came::Failed)
        }
    }
}

async fn default(
    State(s): State<Served>,
    Path(name): Path<String>,
    Json(body): Json<Value>,
) -> Json<Value> {
    let started = Instant::now();
    let (answer, result) = defaulted(&s, &name, &body).await;
    counted(&s, &name, "default", started, result);
    Json(answer)
}

async fn defaulted(s: &Served, name: &str, body: &Value) -> (Value, Came) {
    let asked = match review::asked(body) {
        Ok(a) => a,
        Err(e) => return (review::refused("", &e), Came::Failed),
    };
    let plugin = match active(s, name).await {
        Ok(p) => p,
        Err(why) => return (review::refused(&asked.uid, &why), Came::Failed),
    };
    let Some(before) = asked.request.object.clone() else {
        let unchanged = review::patched(&asked.uid, &Value::Null, &Value::Null);
        return (unchanged, Came::Allowed);
    };
    if !plugin.info.webhooks.default {
        return (review::patched(&asked.uid, &before, &before), Came::Allowed);
    }
    let version = plugin.info.version.clone();
    match s
        .sandbox
        .transform(plugin, None, before.clone(), asked.object.clone())
        .await
    {
        Ok(Ok(after)) => (review::patched(&asked.uid, &before, &after), Came::Allowed),
        Ok(Err(why)) => (review::refused(&asked.uid, &why), Came::Denied),
        Err(e) => {
            tracing::warn!(plugin = %name, %version, object = %asked.object, error = %e,
                "default failed: the operation is refused");
            let why = format!("plugin {name} {version} could not default: {e}");
            (review::refused(&asked.uid, &why), Came::Failed)
        }
    }
}

async fn convert(
    State(s): State<Served>,
    Path(name): Path<String>,
    Json(body): Json<Value>,
) -> Json<Value> {
    let started = Instant::now();
    let (answer, result) = converted(&s, &name, &body).await;
    counted(&s, &name, "convert", started, result);
    Json(answer)
}

async fn converted(s: &Served, name: &str, body: &Value) -> (Value, Came) {
    let (uid, desired, objects) = match review::conversion(body) {
        Ok(asked) => asked,
        Err(e) => return (review::converted("", Err(e)), Came::Failed),
    };
    let plugin = match active(s, name).await {
        Ok(p) => p,
        Err(why) => return (review::converted(&uid, Err(why)), Came::Failed),
    };
    let version = desired.rsplit('/').next().unwrap_or_default().to_string();
    let mut out = Vec::with_capacity(objects.len());
    for object in objects {
        let what = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let answer = s
            .sandbox
            .transform(plugin.clone(), Some(version.clone()), object, what.clone())
            .await;
        let failed = |why: String, result| (review::converted(&uid, Err(why)), result);
        match answer {
            Ok(Ok(o)) if o.get("apiVersion").and_then(Value::as_str) == Some(desired.as_str()) => {
                out.push(o)
            }
            Ok(Ok(o)) => {
                let got = o.get("apiVersion").cloned().unwrap_or(Value::Null);
                let why =
                    format!("plugin {name} converted {what} to apiVersion {got}, not {desired}");
                return failed(why, Came::Failed);
            }
            Ok(Err(why)) => return failed(why, Came::Denied),
            Err(e) => {
                let why = format!("plugin {name} could not convert {what}: {e}");
                return failed(why, Came::Failed);
            }
        }
    }
    (review::converted(&uid, Ok(out)), Came::Allowed)
}
