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
use std::time::Duration;

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
use crate::runtime::Sandbox;
use crate::telemetry::connections::{Bounded, Connection};

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
    sandbox: Sandbox,
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
        .with_state(Served { plugins, sandbox });
    axum::serve(tls, router)
        .with_graceful_shutdown(shutdown)
        .await
}

async fn validate(
    State(s): State<Served>,
    Path(name): Path<String>,
    Json(body): Json<Value>,
) -> Json<Value> {
    let asked = match review::asked(&body) {
        Ok(a) => a,
        Err(e) => return Json(review::refused("", &e)),
    };
    let Some(slot) = s.plugins.slot(&name).await else {
        return Json(review::refused(
            &asked.uid,
            &format!("no plugin `{name}` runs here"),
        ));
    };
    let plugin = slot.current();
    if !plugin.info.webhooks.validate {
        return Json(review::answer(
            &asked.uid,
            &crate::runtime::types::Verdict::allow(),
            ("", "", ""),
        ));
    }
    let primary = plugin.info.primary.clone();
    let version = plugin.info.version.clone();
    match s
        .sandbox
        .validate(plugin, asked.request.clone(), asked.object.clone())
        .await
    {
        Ok(verdict) => Json(review::answer(
            &asked.uid,
            &verdict,
            (&primary.kind, &primary.group, &asked.name),
        )),
        Err(e) => {
            tracing::warn!(plugin = %name, %version, object = %asked.object, error = %e,
                "validate failed: the operation is refused");
            Json(review::refused(
                &asked.uid,
                &format!("plugin {name} {version} could not validate: {e}"),
            ))
        }
    }
}

async fn default(
    State(s): State<Served>,
    Path(name): Path<String>,
    Json(body): Json<Value>,
) -> Json<Value> {
    let asked = match review::asked(&body) {
        Ok(a) => a,
        Err(e) => return Json(review::refused("", &e)),
    };
    let Some(slot) = s.plugins.slot(&name).await else {
        return Json(review::refused(
            &asked.uid,
            &format!("no plugin `{name}` runs here"),
        ));
    };
    let plugin = slot.current();
    let Some(before) = asked.request.object.clone() else {
        return Json(review::patched(&asked.uid, &Value::Null, &Value::Null));
    };
    if !plugin.info.webhooks.default {
        return Json(review::patched(&asked.uid, &before, &before));
    }
    let version = plugin.info.version.clone();
    match s
        .sandbox
        .transform(plugin, None, before.clone(), asked.object.clone())
        .await
    {
        Ok(Ok(after)) => Json(review::patched(&asked.uid, &before, &after)),
        Ok(Err(why)) => Json(review::refused(&asked.uid, &why)),
        Err(e) => {
            tracing::warn!(plugin = %name, %version, object = %asked.object, error = %e,
                "default failed: the operation is refused");
            Json(review::refused(
                &asked.uid,
                &format!("plugin {name} {version} could not default: {e}"),
            ))
        }
    }
}

async fn convert(
    State(s): State<Served>,
    Path(name): Path<String>,
    Json(body): Json<Value>,
) -> Json<Value> {
    let (uid, desired, objects) = match review::conversion(&body) {
        Ok(asked) => asked,
        Err(e) => return Json(review::converted("", Err(e))),
    };
    let Some(slot) = s.plugins.slot(&name).await else {
        return Json(review::converted(
            &uid,
            Err(format!("no plugin `{name}` runs here")),
        ));
    };
    let plugin = slot.current();
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
        match answer {
            Ok(Ok(o)) if o.get("apiVersion").and_then(Value::as_str) == Some(desired.as_str()) => {
                out.push(o)
            }
            Ok(Ok(o)) => {
                return Json(review::converted(
                    &uid,
                    Err(format!(
                        "plugin {name} converted {what} to apiVersion {}, not {desired}",
                        o.get("apiVersion").unwrap_or(&Value::Null)
                    )),
                ));
            }
            Ok(Err(why)) => return Json(review::converted(&uid, Err(why))),
            Err(e) => {
                return Json(review::converted(
                    &uid,
                    Err(format!("plugin {name} could not convert {what}: {e}")),
                ));
            }
        }
    }
    Json(review::converted(&uid, Ok(out)))
}
