//! The webhooks' serving certificate, managed by the host itself: a CA and a certificate it
//! signs for the names the API server calls the host by, kept in a Secret of the host's
//! namespace (`kubernetes.io/tls` with `ca.crt`), made when absent, made again when it
//! names other hosts or has less than [`RENEW_BEFORE`] left. Replicas share it: the first to
//! create the Secret wins, the others read it.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, PostParams};
use rustls::crypto::ring::sign::any_supported_type;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// How long a certificate the host makes is valid.
pub const VALIDITY: Duration = Duration::from_secs(365 * 24 * 3600);
/// A certificate with less than this left is made again.
pub const RENEW_BEFORE: Duration = Duration::from_secs(30 * 24 * 3600);

const NOT_AFTER: &str = "wasmop.dev/not-after";
const HOSTS: &str = "wasmop.dev/hosts";

/// A CA and the serving certificate it signed, PEM.
#[derive(Clone, PartialEq, Eq)]
pub struct Serving {
    /// The CA's certificate (the webhook configurations' `caBundle`).
    pub ca: String,
    /// The serving certificate.
    pub cert: String,
    /// Its private key.
    pub key: String,
    /// When it expires, seconds since the Unix epoch.
    pub not_after: i64,
}

impl std::fmt::Debug for Serving {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Serving")
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

/// Makes a CA and a certificate for `hosts` (DNS names or IP addresses), valid from now.
pub fn make(hosts: &[String]) -> Result<Serving, String> {
    let e = |e: rcgen::Error| e.to_string();
    let now = time::OffsetDateTime::now_utc();
    let not_after = now + VALIDITY;
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(e)?;
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "wasmop webhook CA");
    ca_params.not_before = now - Duration::from_secs(60);
    ca_params.not_after = not_after;
    ca_params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = rcgen::KeyPair::generate().map_err(e)?;
    let ca = ca_params.self_signed(&ca_key).map_err(e)?;
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let mut params = rcgen::CertificateParams::new(hosts.to_vec()).map_err(e)?;
    params.distinguished_name.push(
        rcgen::DnType::CommonName,
        hosts.first().cloned().unwrap_or_default(),
    );
    params.not_before = now - Duration::from_secs(60);
    params.not_after = not_after;
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let key = rcgen::KeyPair::generate().map_err(e)?;
    let cert = params.signed_by(&key, &issuer).map_err(e)?;
    Ok(Serving {
        ca: ca.pem(),
        cert: cert.pem(),
        key: key.serialize_pem(),
        not_after: not_after.unix_timestamp(),
    })
}

fn text(s: &Secret, key: &str) -> Option<String> {
    let bytes = s.data.as_ref()?.get(key)?;
    String::from_utf8(bytes.0.clone()).ok()
}

/// The certificate `secret` holds, if it is still good for `hosts` at `now` (seconds).
fn still_good(secret: &Secret, hosts: &[String], now: i64) -> Option<Serving> {
    let ann = secret.metadata.annotations.as_ref()?;
    if ann.get(HOSTS)? != &hosts.join(",") {
        return None;
    }
    let not_after: i64 = ann.get(NOT_AFTER)?.parse().ok()?;
    if not_after - now < RENEW_BEFORE.as_secs() as i64 {
        return None;
    }
    Some(Serving {
        ca: text(secret, "ca.crt")?,
        cert: text(secret, "tls.crt")?,
        key: text(secret, "tls.key")?,
        not_after,
    })
}

fn secret_of(name: &str, hosts: &[String], s: &Serving) -> Secret {
    let data = [("ca.crt", &s.ca), ("tls.crt", &s.cert), ("tls.key", &s.key)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), ByteString(v.clone().into_bytes())))
        .collect();
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            annotations: Some(
                [
                    (NOT_AFTER.to_string(), s.not_after.to_string()),
                    (HOSTS.to_string(), hosts.join(",")),
                ]
                .into(),
            ),
            labels: Some(
                [(
                    "app.kubernetes.io/managed-by".to_string(),
                    "wasmop".to_string(),
                )]
                .into(),
            ),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(data),
        ..Default::default()
    }
}

/// The certificate Secret `name` in `namespace` holds for `hosts`, made (or made again)
/// when it has none good for them.
pub async fn ensure(
    client: &Client,
    namespace: &str,
    name: &str,
    hosts: &[String],
) -> Result<Serving, String> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let now = jiff::Timestamp::now().as_second();
    let held = api
        .get_opt(name)
        .await
        .map_err(|e| format!("cannot read Secret {namespace}/{name}: {e}"))?;
    if let Some(s) = held.as_ref().and_then(|s| still_good(s, hosts, now)) {
        return Ok(s);
    }
    let serving = make(hosts)?;
    let mut secret = secret_of(name, hosts, &serving);
    let written = match held {
        None => api.create(&PostParams::default(), &secret).await,
        Some(old) => {
            // Replaced only as it was read: a replica that renewed it first wins.
            secret.metadata.resource_version = old.metadata.resource_version;
            api.replace(name, &PostParams::default(), &secret).await
        }
    };
    match written {
        Ok(_) => {
            tracing::info!(secret = %format!("{namespace}/{name}"), hosts = %hosts.join(","),
                "webhook serving certificate made");
            Ok(serving)
        }
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let s = api
                .get(name)
                .await
                .map_err(|e| format!("cannot read Secret {namespace}/{name}: {e}"))?;
            still_good(&s, hosts, now)
                .ok_or_else(|| format!("Secret {namespace}/{name} changed under the host and holds no certificate for {}", hosts.join(",")))
        }
        Err(e) => Err(format!("cannot write Secret {namespace}/{name}: {e}")),
    }
}

/// The certificate an admin's issuer keeps in `dir` (a mounted `kubernetes.io/tls` Secret,
/// cert-manager's for one: `tls.crt`, `tls.key`, and `ca.crt`, the CA the webhook
/// configurations name). Its expiry is the issuer's business (`not_after` 0).
pub fn read_dir(dir: &std::path::Path) -> Result<Serving, String> {
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name))
            .map_err(|e| format!("{}: {e}", dir.join(name).display()))
    };
    Ok(Serving {
        ca: read("ca.crt")?,
        cert: read("tls.crt")?,
        key: read("tls.key")?,
        not_after: 0,
    })
}

/// The serving certificate the TLS server presents, replaced in place when renewed.
#[derive(Debug, Default)]
pub struct Presented(RwLock<Option<Arc<CertifiedKey>>>);

impl Presented {
    /// Presents `s` from the next handshake on.
    pub fn set(&self, s: &Serving) -> Result<(), String> {
        let chain = CertificateDer::pem_slice_iter(s.cert.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("serving certificate: {e}"))?;
        let key = PrivateKeyDer::from_pem_slice(s.key.as_bytes())
            .map_err(|e| format!("serving key: {e}"))?;
        let key = any_supported_type(&key).map_err(|e| format!("serving key: {e}"))?;
        *self.0.write().unwrap_or_else(|e| e.into_inner()) =
            Some(Arc::new(CertifiedKey::new(chain, key)));
        Ok(())
    }
}

impl ResolvesServerCert for Presented {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_is_kept_while_it_names_the_hosts_and_has_time_left() {
        let hosts = vec![
            "127.0.0.1".to_string(),
            "wasmop-webhook.sys.svc".to_string(),
        ];
        let s = make(&hosts).unwrap();
        let secret = secret_of("tls", &hosts, &s);
        let now = jiff::Timestamp::now().as_second();
        assert_eq!(still_good(&secret, &hosts, now), Some(s.clone()));
        assert_eq!(still_good(&secret, &hosts[..1], now), None, "other hosts");
        let late = s.not_after - RENEW_BEFORE.as_secs() as i64 + 1;
        assert_eq!(
            still_good(&secret, &hosts, late),
            None,
            "renewed before expiry"
        );
        Presented::default().set(&s).unwrap();
    }

    #[test]
    fn an_issuers_certificate_is_read_from_its_mounted_secret() {
        let dir = std::env::temp_dir().join(format!("wasmop-certs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let s = make(&["wasmop-webhook.sys.svc".to_string()]).unwrap();
        for (name, text) in [("ca.crt", &s.ca), ("tls.crt", &s.cert)] {
            std::fs::write(dir.join(name), text).unwrap();
        }
        assert!(
            read_dir(&dir).unwrap_err().contains("tls.key"),
            "a missing file is named"
        );
        std::fs::write(dir.join("tls.key"), &s.key).unwrap();
        let read = read_dir(&dir).unwrap();
        assert_eq!((&read.ca, &read.cert), (&s.ca, &s.cert));
        Presented::default().set(&read).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
