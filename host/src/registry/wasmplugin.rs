//! The `WasmPlugin` custom resource: a plugin version uploaded into the cluster. Its bytes
//! live gzip-compressed in a ConfigMap's `binaryData` (so Kubernetes RBAC decides who may
//! upload); the spec carries their sha256 and the status says whether the host took it.

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
    printcolumn = r#"{"name":"Digest","type":"string","jsonPath":".status.digest"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct WasmPluginSpec {
    /// Where the component's bytes are.
    pub config_map: ConfigMapSource,
    /// `sha256:<hex>` of the uncompressed component; the host refuses other bytes.
    #[schemars(regex(pattern = r"^sha256:[0-9a-f]{64}$"))]
    pub sha256: String,
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
    /// `Ready`: the version is loaded and running.
    #[serde(default)]
    pub conditions: Vec<Condition>,
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
        let cols: Vec<&str> = v["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            cols,
            ["Primary", "Version", "Digest", "Ready", "Reason", "Age"]
        );
    }
}
