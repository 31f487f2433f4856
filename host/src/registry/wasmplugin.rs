//! The `WasmPlugin` custom resource: a plugin version uploaded into the cluster. Its bytes
//! live gzip-compressed in a ConfigMap's `binaryData` (so Kubernetes RBAC decides who may
//! upload; the spec carries their sha256) or in an OCI registry (`oci`: a reference, pulled
//! by digest, optionally signed); the status says whether the host took it.
//! A `rollout` in the spec names a candidate version that decides beside the active one
//! (shadow or canary, see [`crate::rollout`]); the status counts how the two compare.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::runtime::Condition;

/// Key of the compressed component in the ConfigMap's `binaryData`.
pub const DEFAULT_KEY: &str = "plugin.wasm.gz";

/// A plugin version uploaded into the cluster.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "wasmop.dev",
    version = "v1alpha1",
    kind = "WasmPlugin",
    namespaced,
    status = "WasmPluginStatus",
    shortname = "wp",
    printcolumn = r#"{"name":"Primary","type":"string","jsonPath":".status.primaryKind"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".status.pluginVersion"}"#,
    printcolumn = r#"{"name":"Candidate","type":"string","jsonPath":".status.candidate.version"}"#,
    printcolumn = r#"{"name":"Mode","type":"string","jsonPath":".status.candidate.mode"}"#,
    printcolumn = r#"{"name":"Agreement","type":"string","jsonPath":".status.rollout.agreement"}"#,
    printcolumn = r#"{"name":"Artifact","type":"string","jsonPath":".status.artifact.digest"}"#,
    printcolumn = r#"{"name":"Digest","type":"string","jsonPath":".status.digest","priority":1}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct WasmPluginSpec {
    /// The component in a ConfigMap of this namespace (gzip, at most ~1 MB), with `sha256`.
    /// Name either this or `oci`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapSource>,
    /// `sha256:<hex>` of the uncompressed component; the host refuses other bytes. Required
    /// with `configMap`; with `oci`, pins the component besides the reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^sha256:[0-9a-f]{64}$"))]
    pub sha256: Option<String>,
    /// The component as an OCI artifact in a registry (the wasm artifact layout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oci: Option<OciSource>,
    /// A candidate version deciding beside the active one, until promoted or aborted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<Rollout>,
    /// Record this plugin's decisions as golden cases (default: as `wasmop run --record`
    /// says: on when it names a directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<bool>,
}

/// How a candidate takes part in the decisions.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum Strategy {
    /// Decides on every reconcile next to the active version, on the same observed value;
    /// only the active plan is carried out, and the two are compared.
    Shadow,
    /// Decides and acts for the objects whose UID hashes below `canaryPercent`.
    Canary,
}

/// A candidate version and the rules of its rollout.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Rollout {
    /// The candidate in a ConfigMap (with `sha256`); name either this or `oci`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapSource>,
    /// `sha256:<hex>` of the uncompressed candidate component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^sha256:[0-9a-f]{64}$"))]
    pub sha256: Option<String>,
    /// The candidate as an OCI artifact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oci: Option<OciSource>,
    /// `Shadow` or `Canary`.
    pub strategy: Strategy,
    /// Percentage of the objects the canary decides (0–100; `Canary` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub canary_percent: Option<u8>,
    /// Promote the candidate by itself after this many decisions in a row that agree with
    /// the active version (shadow) or end without a fault (canary).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub promote_after: Option<u64>,
    /// Abort by itself once this percentage of the candidate's decisions were faults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub abort_fault_percent: Option<u8>,
    /// Candidate decisions before the fault rate is judged (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort_min_decisions: Option<u64>,
}

impl Rollout {
    /// Decisions before the fault rate is judged, when none is given.
    pub const DEFAULT_MIN_DECISIONS: u64 = 10;

    /// The mode this rollout asks for.
    pub fn mode(&self) -> crate::rollout::Mode {
        match self.strategy {
            Strategy::Shadow => crate::rollout::Mode::Shadow,
            Strategy::Canary => {
                crate::rollout::Mode::Canary(self.canary_percent.unwrap_or(0).min(100))
            }
        }
    }

    /// When the host ends this rollout by itself.
    pub fn policy(&self) -> crate::rollout::Policy {
        crate::rollout::Policy {
            promote_after: self.promote_after,
            abort_fault_percent: self.abort_fault_percent,
            min_decisions: self
                .abort_min_decisions
                .unwrap_or(Self::DEFAULT_MIN_DECISIONS),
        }
    }
}

/// Where a version's bytes are, as a spec or a rollout names them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Source<'a> {
    /// A ConfigMap, checked against the digest.
    ConfigMap(&'a ConfigMapSource, &'a str),
    /// An OCI artifact, pinned to a component digest when one is given.
    Oci(&'a OciSource, Option<&'a str>),
}

impl<'a> Source<'a> {
    /// The source the three fields name, or why they name none.
    pub fn of(
        config_map: &'a Option<ConfigMapSource>,
        sha256: &'a Option<String>,
        oci: &'a Option<OciSource>,
    ) -> Result<Self, String> {
        match (config_map, sha256, oci) {
            (Some(_), _, Some(_)) => Err("name one source, configMap or oci, not both".into()),
            (Some(cm), Some(d), None) => Ok(Source::ConfigMap(cm, d)),
            (Some(_), None, None) => Err("configMap needs sha256, the component's digest".into()),
            (None, d, Some(o)) => Ok(Source::Oci(o, d.as_deref())),
            (None, _, None) => Err("name a source: configMap (with sha256) or oci".into()),
        }
    }

    /// `oci` or `configMap`, for metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Source::ConfigMap(..) => "configMap",
            Source::Oci(..) => "oci",
        }
    }
}

impl WasmPluginSpec {
    /// Where the active version's bytes are.
    pub fn source(&self) -> Result<Source<'_>, String> {
        Source::of(&self.config_map, &self.sha256, &self.oci)
    }
}

impl Rollout {
    /// Where the candidate's bytes are.
    pub fn source(&self) -> Result<Source<'_>, String> {
        Source::of(&self.config_map, &self.sha256, &self.oci)
    }
}

/// A component published as an OCI artifact (`wasmop publish`, or any tool writing the
/// CNCF wasm artifact layout: config `application/vnd.wasm.config.v0+json`, one layer
/// `application/wasm`).
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OciSource {
    /// `REGISTRY/REPOSITORY:TAG`, `REGISTRY/REPOSITORY@sha256:DIGEST` or both. A tag is
    /// resolved to a digest once (the status shows it) and pulled by digest.
    #[schemars(length(min = 1, max = 1024))]
    pub reference: String,
    /// A Secret of type `kubernetes.io/dockerconfigjson` in this namespace holding the
    /// registry's credentials (`kubectl create secret docker-registry`); without it the host
    /// pulls anonymously.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_secret: Option<String>,
    /// Talk plain HTTP to this registry (a registry without TLS inside the cluster).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insecure: Option<bool>,
    /// Follow the tag: resolve it again every this many seconds; a new digest is a swap
    /// with the same rules as an upload (a refused one leaves the running version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 5))]
    pub poll_seconds: Option<u64>,
    /// Keys one of which must have signed the artifact (cosign's key-pair format). They
    /// narrow the host's `--trusted-key`s (only those among them count), never add to
    /// them unless the host runs with `--allow-plugin-keys`. A host run with
    /// `--require-signature` requires a signature of every OCI source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_keys: Option<KeysSource>,
}

/// A ConfigMap or Secret of the WasmPlugin's namespace whose every data entry is a PEM
/// public key (ECDSA P-256, as `cosign generate-key-pair` writes `cosign.pub`).
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeysSource {
    /// The ConfigMap's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<String>,
    /// The Secret's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

/// The OCI artifact the host runs: the reference as the spec gives it and the manifest
/// digest it resolved to.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactStatus {
    /// The spec's reference.
    pub reference: String,
    /// The manifest digest the host pulled (`sha256:…`).
    pub digest: String,
    /// The trusted key whose signature verified, when one was required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed_by: Option<String>,
}

/// A key of a ConfigMap in the WasmPlugin's namespace.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapSource {
    /// ConfigMap name.
    pub name: String,
    /// Key in `binaryData` holding the gzip-compressed component (default `plugin.wasm.gz`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// What the host made of the upload.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WasmPluginStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Name the plugin declares.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin_name: Option<String>,
    /// Version the plugin declares.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin_version: Option<String>,
    /// Primary kind, `Kind.group/version`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_kind: Option<String>,
    /// Digest of the version the host runs (or refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// The OCI artifact of the version the host runs (an `oci` source).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<ArtifactStatus>,
    /// `Ready`: the version is loaded and running; `Candidate`: the rollout's candidate is
    /// loaded and decides beside it.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// The candidate of the rollout, once loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<CandidateStatus>,
    /// How the candidate's decisions went (refreshed every few seconds while it runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutStatus>,
    /// Where and how the plugin's decisions are recorded, while they are (`spec.record`
    /// or `wasmop run --record`), as the leader's host sees it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recording: Option<RecordingStatus>,
}

/// The recording of a plugin's decisions as golden cases, on the leader's host.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecordingStatus {
    /// The directory the cases go to, inside the host's container.
    pub directory: String,
    /// Cases written since the host started.
    pub cases: u64,
    /// Why the last case could not be written (for example a read-only file system); absent
    /// while cases are written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The candidate version the host loaded.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CandidateStatus {
    /// Version the candidate declares.
    pub version: String,
    /// Its digest.
    pub digest: String,
    /// `Shadow` or `Canary`.
    pub mode: String,
    /// The canary's share, in percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary_percent: Option<u8>,
}

/// How a candidate's decisions compare with the active version's.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    /// Digest of the candidate these counts are about.
    pub digest: String,
    /// Decisions the candidate made.
    pub decisions: u64,
    /// Shadow decisions equal to the active version's.
    pub agreements: u64,
    /// Shadow decisions that differed.
    pub divergences: u64,
    /// Candidate calls the sandbox stopped.
    pub faults: u64,
    /// Agreeing (shadow) or fault-free (canary) decisions in a row.
    pub streak: u64,
    /// Share of the shadow decisions that agreed, like `98.5%` (`-` before the first one).
    pub agreement: String,
    /// Primary objects the active version decides.
    pub objects_active: u64,
    /// Primary objects the candidate decides (canary).
    pub objects_candidate: u64,
    /// The last divergences and faults, oldest first.
    #[serde(default)]
    pub last_divergences: Vec<DivergenceStatus>,
}

/// One decision where the candidate differed.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DivergenceStatus {
    /// `namespace/name` of the primary object.
    pub object: String,
    /// When.
    pub time: String,
    /// Unified diff from the active outcome to the candidate's, or the fault.
    pub diff: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    #[test]
    fn crd_has_status_columns_and_digest_pattern() {
        let crd = serde_json::to_value(WasmPlugin::crd()).unwrap();
        assert_eq!(crd["metadata"]["name"], "wasmplugins.wasmop.dev");
        let v = &crd["spec"]["versions"][0];
        assert_eq!(v["subresources"]["status"], serde_json::json!({}));
        let sha = &v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["sha256"];
        assert_eq!(sha["pattern"], "^sha256:[0-9a-f]{64}$");
        let oci = &v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["oci"];
        assert_eq!(oci["required"], serde_json::json!(["reference"]));
        assert_eq!(
            oci["properties"]["pollSeconds"]["minimum"].as_f64(),
            Some(5.0)
        );
        let cols: Vec<&str> = v["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            cols,
            [
                "Primary",
                "Version",
                "Candidate",
                "Mode",
                "Agreement",
                "Artifact",
                "Digest",
                "Ready",
                "Reason",
                "Age"
            ]
        );
    }
}
