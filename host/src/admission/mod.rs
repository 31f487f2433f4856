//! Admission webhooks: the plugins' `validate` and `default` served to the API server for
//! their primary kinds ([`server`]), over a certificate the host makes and renews itself
//! ([`certs`]), registered and unregistered with the plugins' active versions
//! ([`registration`]); the reviews in and out ([`review`]).

pub mod certs;
pub mod registration;
pub mod review;
pub mod server;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use kube::Client;

use crate::admission::certs::Presented;
use crate::admission::registration::Endpoint;
use crate::runtime::Sandbox;
use crate::runtime::types::PluginInfo;

pub use server::Plugins;

/// How often the registered configurations are compared with the active versions.
const SYNC: Duration = Duration::from_secs(2);
/// How often the certificate is checked for renewal.
const RENEWAL_CHECK: Duration = Duration::from_secs(3600);

/// The active versions of the running plugins, for registration.
pub trait Active: Plugins {
    /// The declarations of the running plugins' active versions.
    fn active(&self) -> BoxFuture<'_, Vec<PluginInfo>>;
}

/// Where the webhook server listens and how the API server reaches it.
#[derive(Debug, Clone)]
pub struct Config {
    /// The address it listens on.
    pub bind: SocketAddr,
    /// How the API server calls it.
    pub endpoint: Endpoint,
    /// Where its certificate comes from.
    pub certificate: Certificate,
}

/// Where the webhook server's certificate comes from.
#[derive(Debug, Clone)]
pub enum Certificate {
    /// Made and renewed by the host, kept in this Secret: (namespace, name).
    Own(String, String),
    /// An admin's issuer (cert-manager) keeps it in this directory, a mounted Secret with
    /// `tls.crt`, `tls.key` and `ca.crt`; read again every minute.
    Mounted(std::path::PathBuf),
}

impl Certificate {
    /// The certificate for `hosts`, made if the host makes its own.
    async fn obtain(&self, client: &Client, hosts: &[String]) -> Result<certs::Serving, String> {
        match self {
            Certificate::Own(ns, secret) => certs::ensure(client, ns, secret, hosts).await,
            Certificate::Mounted(dir) => certs::read_dir(dir),
        }
    }

    /// How often it is looked at again.
    fn checked_every(&self) -> Duration {
        match self {
            Certificate::Own(..) => RENEWAL_CHECK,
            Certificate::Mounted(_) => Duration::from_secs(60),
        }
    }
}

impl Config {
    /// The names the certificate is for: the URL's host, or the Service's DNS names.
    pub fn hosts(&self) -> Vec<String> {
        match &self.endpoint {
            Endpoint::Url(url) => {
                let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
                let authority = rest.split('/').next().unwrap_or_default();
                let host = match authority.strip_prefix('[') {
                    Some(v6) => v6.split(']').next().unwrap_or_default(),
                    None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
                };
                vec![host.to_string()]
            }
            Endpoint::Service(ns, name, _) => vec![
                format!("{name}.{ns}.svc"),
                format!("{name}.{ns}.svc.cluster.local"),
            ],
        }
    }
}

/// Each plugin's (name, declares `validate`, `default`, `convert`), and the CA they name.
type Registered = (Vec<(String, bool, bool, bool)>, String);

/// Makes (or reads) the certificate, serves the webhooks and keeps the configurations in
/// step with the active versions until `shutdown` completes.
pub async fn run(
    client: Client,
    config: Config,
    plugins: Arc<dyn Active>,
    (sandbox, metrics): (Sandbox, Arc<crate::telemetry::metrics::Metrics>),
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(config.bind).await?;
    let presented = Arc::new(Presented::default());
    let hosts = config.hosts();
    let serving = loop {
        match config.certificate.obtain(&client, &hosts).await {
            Ok(s) => break s,
            Err(e) => {
                tracing::warn!(error = %e, "no webhook certificate yet; trying again in 5 s");
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        }
    };
    presented.set(&serving).map_err(std::io::Error::other)?;
    let served: Arc<dyn Plugins> = plugins.clone();
    let server = tokio::spawn(server::serve(
        listener,
        presented.clone(),
        served,
        (sandbox, metrics),
        shutdown,
    ));
    let (mut ca, mut cert) = (serving.ca, serving.cert);
    // What was last registered: each plugin's (name, validate, default), and the CA.
    let mut registered: Option<Registered> = None;
    let every = config.certificate.checked_every();
    let mut renewal = tokio::time::Instant::now() + every;
    let mut tick = tokio::time::interval(SYNC);
    while !server.is_finished() {
        tick.tick().await;
        if tokio::time::Instant::now() >= renewal {
            renewal += every;
            match config.certificate.obtain(&client, &hosts).await {
                Ok(s) if s.cert != cert => {
                    presented.set(&s).map_err(std::io::Error::other)?;
                    (ca, cert) = (s.ca, s.cert);
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "cannot renew the webhook certificate"),
            }
        }
        let infos = plugins.active().await;
        let mut declared: Vec<_> = infos
            .iter()
            .map(|i| {
                let w = &i.webhooks;
                (i.name.clone(), w.validate, w.default, w.convert)
            })
            .collect();
        declared.sort();
        let now = (declared, ca.clone());
        if registered.as_ref() == Some(&now) {
            continue;
        }
        match registration::register(&client, &infos, &config.endpoint, &ca).await {
            Ok(()) => {
                tracing::info!(plugins = ?now.0, "webhook configurations registered");
                registered = Some(now);
            }
            Err(e) => tracing::debug!(error = %e, "cannot register the webhook configurations yet"),
        }
    }
    server.await.map_err(std::io::Error::other)?
}
