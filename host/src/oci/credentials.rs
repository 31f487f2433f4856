//! Registry credentials: anonymous (the host's own identity, the common case for a public or
//! network-restricted registry), or a user and password from a pull secret of type
//! `kubernetes.io/dockerconfigjson`, as Pods' `imagePullSecrets` are.

use base64::Engine as _;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;

/// Credentials for one registry.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum Credentials {
    /// No credentials.
    Anonymous,
    /// HTTP basic credentials (exchanged for a token when the registry asks for one).
    Basic {
        /// The user.
        username: String,
        /// The password or token.
        password: String,
    },
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credentials::Anonymous => f.write_str("Anonymous"),
            Credentials::Basic { username, .. } => write!(f, "Basic({username}, ***)"),
        }
    }
}

impl Credentials {
    pub(crate) fn auth(&self) -> RegistryAuth {
        match self {
            Credentials::Anonymous => RegistryAuth::Anonymous,
            Credentials::Basic { username, password } => {
                RegistryAuth::Basic(username.clone(), password.clone())
            }
        }
    }
}

#[derive(Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: std::collections::BTreeMap<String, DockerAuth>,
}

#[derive(Deserialize)]
struct DockerAuth {
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    auth: Option<String>,
}

/// The host part of a `.dockerconfigjson` key (`https://reg.example:5000/v1/` → `reg.example:5000`).
fn host_of(key: &str) -> &str {
    let k = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    k.split('/').next().unwrap_or(k)
}

/// The credentials for `registry` in a `.dockerconfigjson` document, as kubelet reads them:
/// the entry whose host is the registry's (`username`/`password`, or `auth` =
/// base64 of `user:password`).
pub(crate) fn from_docker_config(json: &[u8], registry: &str) -> Result<Credentials, String> {
    let config: DockerConfig =
        serde_json::from_slice(json).map_err(|e| format!("not a .dockerconfigjson: {e}"))?;
    let entry = config
        .auths
        .iter()
        .find(|(k, _)| host_of(k) == registry)
        .map(|(_, v)| v)
        .ok_or_else(|| {
            format!(
                "no entry for registry {registry} (it has: {})",
                config
                    .auths
                    .keys()
                    .map(|k| host_of(k))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
    if let (Some(u), Some(p)) = (&entry.username, &entry.password) {
        return Ok(Credentials::Basic {
            username: u.clone(),
            password: p.clone(),
        });
    }
    let auth = entry.auth.as_deref().ok_or_else(|| {
        format!("the entry for {registry} has neither username/password nor auth")
    })?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(auth.trim())
        .map_err(|e| format!("the auth of {registry} is not base64: {e}"))?;
    let decoded =
        String::from_utf8(decoded).map_err(|_| format!("the auth of {registry} is not UTF-8"))?;
    let (username, password) = decoded
        .split_once(':')
        .ok_or_else(|| format!("the auth of {registry} is not `user:password`"))?;
    Ok(Credentials::Basic {
        username: username.to_string(),
        password: password.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_entry_of_the_registry_in_either_form() {
        let doc = br#"{"auths": {"https://other.io/v1/": {"auth": "eDp5"},
            "127.0.0.1:5000": {"username": "u", "password": "p"},
            "reg.example": {"auth": "YWxpY2U6czNjcjN0Og=="}}}"#;
        assert_eq!(
            from_docker_config(doc, "127.0.0.1:5000").unwrap(),
            Credentials::Basic {
                username: "u".into(),
                password: "p".into()
            }
        );
        // `alice:s3cr3t:` — the password keeps everything after the first colon.
        assert_eq!(
            from_docker_config(doc, "reg.example").unwrap(),
            Credentials::Basic {
                username: "alice".into(),
                password: "s3cr3t:".into()
            }
        );
        assert_eq!(
            from_docker_config(doc, "other.io").unwrap(),
            Credentials::Basic {
                username: "x".into(),
                password: "y".into()
            }
        );
        let missing = from_docker_config(doc, "ghcr.io").unwrap_err();
        assert!(
            missing.contains("no entry for registry ghcr.io"),
            "{missing}"
        );
        assert!(
            from_docker_config(b"nope", "x")
                .unwrap_err()
                .contains("not a .dockerconfigjson")
        );
        // The password never shows in a log line.
        let c = from_docker_config(doc, "127.0.0.1:5000").unwrap();
        assert_eq!(format!("{c:?}"), "Basic(u, ***)");
    }
}
