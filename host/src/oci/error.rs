//! Why an artifact could not be pulled, published or trusted: one variant per thing a user
//! fixes differently (credentials, the reference, the registry's TLS, the artifact, its
//! signature), each with a message naming the reference and digest.

use oci_client::errors::{OciDistributionError, OciErrorCode};

/// Why a pull (or a publish) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PullError {
    /// The reference does not parse.
    #[error("invalid reference `{reference}`: {why}")]
    InvalidReference {
        /// As given.
        reference: String,
        /// What is wrong.
        why: String,
    },
    /// 401: no credentials, or wrong ones.
    #[error("{reference}: the registry refused the credentials (401 Unauthorized){detail}")]
    Unauthorized {
        /// The reference.
        reference: String,
        /// The registry's words, if any.
        detail: String,
    },
    /// 403: the credentials may not read (or write) this repository.
    #[error("{reference}: access denied (403 Forbidden){detail}")]
    Forbidden {
        /// The reference.
        reference: String,
        /// The registry's words, if any.
        detail: String,
    },
    /// 404: no such repository, tag or digest.
    #[error("{reference}: not found in the registry (404){detail}")]
    NotFound {
        /// The reference.
        reference: String,
        /// The registry's words, if any.
        detail: String,
    },
    /// The bytes are not what their digest says.
    #[error("{reference}: digest mismatch: expected {expected}, got {actual}")]
    DigestMismatch {
        /// The reference.
        reference: String,
        /// The digest asked for.
        expected: String,
        /// The digest of what came.
        actual: String,
    },
    /// Not the wasm artifact layout.
    #[error("{reference} ({digest}): not a wasm component artifact: {why}")]
    MediaType {
        /// The reference.
        reference: String,
        /// The manifest's digest.
        digest: String,
        /// What is not as the layout says.
        why: String,
    },
    /// An image index (manifest list): a plugin is one component, not one per platform.
    #[error(
        "{reference} ({digest}) is an image index (manifest list); point at the wasm artifact's own manifest"
    )]
    ManifestList {
        /// The reference.
        reference: String,
        /// The index's digest.
        digest: String,
    },
    /// Over the size cap.
    #[error(
        "{reference}: the component is {size} bytes, over the host's cap of {cap} bytes (--oci-max-bytes)"
    )]
    TooLarge {
        /// The reference.
        reference: String,
        /// Its size, as the manifest says or as far as it was read.
        size: u64,
        /// The cap.
        cap: u64,
    },
    /// The TLS handshake failed (an unknown CA, a name mismatch, plain HTTP on the other end).
    #[error("{reference}: TLS failure talking to the registry: {why}")]
    Tls {
        /// The reference.
        reference: String,
        /// The TLS error.
        why: String,
    },
    /// The pull took longer than the timeout.
    #[error("{reference}: no answer from the registry within {seconds} s (--oci-timeout)")]
    Timeout {
        /// The reference.
        reference: String,
        /// The timeout.
        seconds: u64,
    },
    /// Anything else on the way (connection refused, a 5xx, a malformed answer).
    #[error("{reference}: {why}")]
    Transport {
        /// The reference.
        reference: String,
        /// What happened.
        why: String,
    },
}

impl PullError {
    /// The CamelCase reason of the WasmPlugin's condition.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            PullError::InvalidReference { .. } => "InvalidReference",
            PullError::Unauthorized { .. } => "RegistryUnauthorized",
            PullError::Forbidden { .. } => "RegistryForbidden",
            PullError::NotFound { .. } => "ArtifactNotFound",
            PullError::DigestMismatch { .. } => "DigestMismatch",
            PullError::MediaType { .. } => "WrongMediaType",
            PullError::ManifestList { .. } => "ManifestList",
            PullError::TooLarge { .. } => "ArtifactTooLarge",
            PullError::Tls { .. } => "RegistryTls",
            PullError::Timeout { .. } => "PullTimeout",
            PullError::Transport { .. } => "PullFailed",
        }
    }

    /// Whether pulling again later may succeed without anyone changing the spec (the
    /// registry was away, slow or answered 5xx).
    pub(crate) fn is_transient(&self) -> bool {
        matches!(
            self,
            PullError::Timeout { .. } | PullError::Transport { .. }
        )
    }

    /// The error of `e`, met while working on `reference`.
    pub(crate) fn from_client(reference: &str, e: OciDistributionError) -> Self {
        let reference = reference.to_string();
        let detail = |s: &str| {
            if s.is_empty() {
                String::new()
            } else {
                format!(": {s}")
            }
        };
        match e {
            OciDistributionError::UnauthorizedError { .. } => PullError::Unauthorized {
                reference,
                detail: String::new(),
            },
            OciDistributionError::AuthenticationFailure(why) => PullError::Unauthorized {
                reference,
                detail: detail(&why),
            },
            OciDistributionError::ImageManifestNotFoundError(why) => PullError::NotFound {
                reference,
                detail: detail(&why),
            },
            OciDistributionError::RegistryError { envelope, .. } => {
                let codes: Vec<&OciErrorCode> = envelope.errors.iter().map(|e| &e.code).collect();
                let words = envelope
                    .errors
                    .iter()
                    .map(|e| e.message.clone())
                    .collect::<Vec<_>>()
                    .join("; ");
                if codes
                    .iter()
                    .any(|c| matches!(c, OciErrorCode::Unauthorized))
                {
                    PullError::Unauthorized {
                        reference,
                        detail: detail(&words),
                    }
                } else if codes.iter().any(|c| matches!(c, OciErrorCode::Denied)) {
                    PullError::Forbidden {
                        reference,
                        detail: detail(&words),
                    }
                } else if codes.iter().any(|c| {
                    matches!(
                        c,
                        OciErrorCode::ManifestUnknown
                            | OciErrorCode::NameUnknown
                            | OciErrorCode::BlobUnknown
                            | OciErrorCode::NotFound
                    )
                }) {
                    PullError::NotFound {
                        reference,
                        detail: detail(&words),
                    }
                } else {
                    PullError::Transport {
                        reference,
                        why: format!("the registry answered: {words}"),
                    }
                }
            }
            OciDistributionError::ServerError { code, message, .. } => match code {
                401 => PullError::Unauthorized {
                    reference,
                    detail: detail(&message),
                },
                403 => PullError::Forbidden {
                    reference,
                    detail: detail(&message),
                },
                404 => PullError::NotFound {
                    reference,
                    detail: detail(&message),
                },
                _ => PullError::Transport {
                    reference,
                    why: format!("the registry answered {code}: {message}"),
                },
            },
            OciDistributionError::RequestError(e) => {
                let chain = error_chain(&e);
                if chain.contains("certificate")
                    || chain.contains("tls")
                    || chain.contains("TLS")
                    || chain.contains("InvalidContentType")
                    || chain.contains("CorruptMessage")
                {
                    PullError::Tls {
                        reference,
                        why: chain,
                    }
                } else {
                    PullError::Transport {
                        reference,
                        why: chain,
                    }
                }
            }
            other => PullError::Transport {
                reference,
                why: other.to_string(),
            },
        }
    }
}

/// `e` and its sources, joined (reqwest says "error sending request" and keeps the why below).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        out.push_str(": ");
        out.push_str(&s.to_string());
        next = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use oci_client::errors::{OciEnvelope, OciError};

    fn envelope(code: OciErrorCode) -> OciDistributionError {
        OciDistributionError::RegistryError {
            envelope: OciEnvelope {
                errors: vec![OciError {
                    code,
                    message: "the registry's words".into(),
                    detail: serde_json::Value::Null,
                }],
            },
            url: "https://r/v2/p/manifests/v1".into(),
        }
    }

    fn server(code: u16) -> OciDistributionError {
        OciDistributionError::ServerError {
            code,
            url: "https://r/v2/p/manifests/v1".into(),
            message: "m".into(),
        }
    }

    /// What each answer of a registry becomes (401/403/404/5xx by status or by error code);
    /// the e2e test `oci` meets 401, 404 and TLS failures from a real registry, which has no
    /// 403 (distribution's htpasswd authenticates but does not authorize).
    #[test]
    fn registry_answers_map_to_reasons_a_user_acts_on() {
        let reason = |e| PullError::from_client("r/p:v1", e).reason();
        assert_eq!(reason(server(401)), "RegistryUnauthorized");
        assert_eq!(reason(server(403)), "RegistryForbidden");
        assert_eq!(reason(server(404)), "ArtifactNotFound");
        assert_eq!(reason(server(503)), "PullFailed");
        assert_eq!(reason(envelope(OciErrorCode::Denied)), "RegistryForbidden");
        assert_eq!(
            reason(envelope(OciErrorCode::Unauthorized)),
            "RegistryUnauthorized"
        );
        assert_eq!(
            reason(envelope(OciErrorCode::NameUnknown)),
            "ArtifactNotFound"
        );
        assert_eq!(
            reason(envelope(OciErrorCode::Toomanyrequests)),
            "PullFailed"
        );
        let e = PullError::from_client("r/p:v1", envelope(OciErrorCode::Denied));
        assert_eq!(
            e.to_string(),
            "r/p:v1: access denied (403 Forbidden): the registry's words"
        );
        assert!(PullError::from_client("r/p:v1", server(503)).is_transient());
        assert!(!PullError::from_client("r/p:v1", server(403)).is_transient());
    }
}
