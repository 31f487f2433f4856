//! Why an offered version was refused: a [`Reason`] (what a WasmPlugin's condition and the
//! Events say, in CamelCase) with a message naming what is wrong.

use crate::runtime::LoadError;

/// The reason a version was refused. Its name is the `reason` of the WasmPlugin's
/// condition (`Ready` or `Candidate`) and of the host's log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// Not a WebAssembly component.
    NotAComponent,
    /// The component did not compile.
    CompileFailed,
    /// It does not implement the plugin world.
    WorldMismatch,
    /// Its `info()` failed.
    InfoFailed,
    /// Its `info()` answered something invalid.
    InvalidInfo,
    /// Its source runs another plugin (a renamed plugin is a new upload or file).
    NameChanged,
    /// Another plugin reconciles its primary kind.
    PrimaryKindClaimed,
    /// A file whose plugin runs from an upload.
    Superseded,
    /// Another source of the same kind (upload or file) runs a plugin of that name.
    NameTaken,
    /// The plugin reconciles another primary kind.
    PrimaryKindChanged,
    /// A candidate without an active version to go beside.
    NoActiveVersion,
    /// The candidate is another plugin.
    CandidateNameDiffers,
    /// The candidate declares other relations, primary kind or finalizer.
    CandidateWatchesDifferently,
    /// A declared kind is not what the API server serves under that name.
    KindMismatch,
    /// A relation's kind is not served (a missing CRD).
    KindNotServed,
    /// The API server did not answer the questions about the kinds or the host's reads.
    KindsUnchecked,
    /// The host may not list and watch what the version watches.
    HostCannotWatch,
    /// The caches of what a version that watches differently watches were not listed in
    /// time; the running version keeps deciding.
    CachesNotListed,
    /// The API server did not answer what the plugin's ServiceAccount may do.
    PermissionsUnchecked,
    /// The plugin's ServiceAccount lacks a rule the version declares.
    PermissionsMissing,
    /// The ConfigMap holding the bytes could not be read.
    ConfigMapUnreadable,
    /// The ConfigMap (or its key) is not there.
    ConfigMapMissing,
    /// The bytes are not what the spec's digest says.
    DigestMismatch,
    /// The bytes do not unpack.
    BadBytes,
    /// The rollout part of the spec is invalid.
    InvalidRollout,
    /// The spec names no source, or two.
    InvalidSource,
    /// The OCI source's pull secret is missing or unreadable.
    PullSecretInvalid,
    /// The keys to verify the signature with are missing or unreadable.
    TrustedKeysInvalid,
    /// The OCI artifact could not be pulled or trusted; the reason says why
    /// (`RegistryUnauthorized`, `ArtifactNotFound`, `Unsigned`, ...).
    Pull(&'static str),
}

impl Reason {
    /// The CamelCase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::NotAComponent => "NotAComponent",
            Reason::CompileFailed => "CompileFailed",
            Reason::WorldMismatch => "WorldMismatch",
            Reason::InfoFailed => "InfoFailed",
            Reason::InvalidInfo => "InvalidInfo",
            Reason::NameChanged => "NameChanged",
            Reason::PrimaryKindClaimed => "PrimaryKindClaimed",
            Reason::Superseded => "Superseded",
            Reason::NameTaken => "NameTaken",
            Reason::PrimaryKindChanged => "PrimaryKindChanged",
            Reason::NoActiveVersion => "NoActiveVersion",
            Reason::CandidateNameDiffers => "CandidateNameDiffers",
            Reason::CandidateWatchesDifferently => "CandidateWatchesDifferently",
            Reason::KindMismatch => "KindMismatch",
            Reason::KindNotServed => "KindNotServed",
            Reason::KindsUnchecked => "KindsUnchecked",
            Reason::HostCannotWatch => "HostCannotWatch",
            Reason::CachesNotListed => "CachesNotListed",
            Reason::PermissionsUnchecked => "PermissionsUnchecked",
            Reason::PermissionsMissing => "PermissionsMissing",
            Reason::ConfigMapUnreadable => "ConfigMapUnreadable",
            Reason::ConfigMapMissing => "ConfigMapMissing",
            Reason::DigestMismatch => "DigestMismatch",
            Reason::BadBytes => "BadBytes",
            Reason::InvalidRollout => "InvalidRollout",
            Reason::InvalidSource => "InvalidSource",
            Reason::PullSecretInvalid => "PullSecretInvalid",
            Reason::TrustedKeysInvalid => "TrustedKeysInvalid",
            Reason::Pull(why) => why,
        }
    }

    /// Whether the refusal ends once an admin grants the plugin's or the host's RBAC or
    /// installs the CRD a relation needs: its source offers the version again until then.
    pub fn waits_for_permissions(self) -> bool {
        matches!(
            self,
            Reason::PermissionsMissing
                | Reason::PermissionsUnchecked
                | Reason::HostCannotWatch
                | Reason::KindNotServed
                | Reason::KindsUnchecked
        )
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an offered version was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {message}")]
pub struct Rejection {
    /// Why, for status conditions and Events.
    pub reason: Reason,
    /// What is wrong.
    pub message: String,
    /// The plugin the refused version declared, when it got that far.
    pub plugin: Option<String>,
}

impl Rejection {
    /// A rejection for `reason`.
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        Rejection {
            reason,
            plugin: None,
            message: message.into(),
        }
    }

    /// Whether the refusal ends with RBAC or a CRD ([`Reason::waits_for_permissions`]).
    pub fn waits_for_permissions(&self) -> bool {
        self.reason.waits_for_permissions()
    }

    /// Whether its source offers the version again by itself: it waits for permissions, for
    /// a registry that did not answer (away, slow, 5xx), for credentials or keys an admin
    /// fixes in a Secret or ConfigMap (which change no WasmPlugin), for an artifact not
    /// published or signed yet, or for caches that were slow to list. A bad artifact
    /// (digest, layout, size) waits for a new spec.
    pub fn retries(&self) -> bool {
        self.waits_for_permissions()
            || matches!(
                self.reason,
                Reason::CachesNotListed
                    | Reason::PullSecretInvalid
                    | Reason::TrustedKeysInvalid
                    | Reason::Pull(
                        "PullFailed"
                            | "PullTimeout"
                            | "RegistryUnauthorized"
                            | "RegistryForbidden"
                            | "RegistryTls"
                            | "ArtifactNotFound"
                            | "Unsigned"
                            | "SignatureInvalid"
                            | "SignatureUntrusted"
                            | "SignatureRepositoryMismatch"
                    )
            )
    }

    pub(crate) fn from_load(e: &LoadError) -> Self {
        let reason = match e {
            LoadError::NotWasm | LoadError::CoreModule => Reason::NotAComponent,
            LoadError::Compile(_) => Reason::CompileFailed,
            LoadError::World(_) => Reason::WorldMismatch,
            LoadError::Info(_) => Reason::InfoFailed,
            LoadError::InvalidInfo(_) => Reason::InvalidInfo,
        };
        Rejection::new(reason, e.to_string())
    }
}
