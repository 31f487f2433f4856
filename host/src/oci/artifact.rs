//! The wasm OCI artifact layout of the CNCF TAG Runtime's wasm working group (the one `wkg`,
//! `wasm-pkg-tools` and the `oci-wasm` crate write): an OCI image manifest whose config has
//! the media type `application/vnd.wasm.config.v0+json` (architecture `wasm`, os `wasip2`,
//! the layers' digests, the component's imports and exports) and exactly one layer,
//! `application/wasm`, the component itself. So the layer's digest is the component's
//! sha256, the digest the host runs under.

use std::collections::BTreeMap;

use oci_client::client::{Config, ImageLayer};
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use serde::{Deserialize, Serialize};

use crate::oci::error::PullError;
use crate::runtime::plugin::digest_of;

/// The config's media type.
pub(crate) const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The component layer's media type.
pub(crate) const LAYER_MEDIA_TYPE: &str = "application/wasm";
/// An OCI image manifest.
pub(crate) const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// Media types of an image index (manifest list), which the host refuses with a reason.
pub(crate) const INDEX_MEDIA_TYPES: &[&str] = &[
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];
/// What the host accepts as a manifest when it pulls (an index only to refuse it clearly).
pub(crate) const ACCEPTED_MANIFESTS: &[&str] = &[
    MANIFEST_MEDIA_TYPE,
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
];

/// The component part of the config: what the component imports and exports.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ComponentInfo {
    /// Names of the component's exports.
    pub exports: Vec<String>,
    /// Names of its imports.
    pub imports: Vec<String>,
    /// The WIT world it targets, when known.
    pub target: Option<String>,
}

/// The artifact's config (`application/vnd.wasm.config.v0+json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WasmConfig {
    /// RFC 3339 time of the publish.
    pub created: String,
    /// Who published it, if said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    /// Always `wasm`.
    pub architecture: String,
    /// `wasip2` for a component.
    pub os: String,
    /// The layers' digests, in the manifest's order.
    pub layer_digests: Vec<String>,
    /// The component's imports and exports.
    pub component: Option<ComponentInfo>,
}

/// An artifact ready to push: its config, its one layer and the manifest naming both.
pub(crate) struct Packed {
    pub config: Config,
    pub layer: ImageLayer,
    pub manifest: OciImageManifest,
}

/// Packs `component` as a wasm artifact, with `annotations` on the manifest (for example
/// `org.opencontainers.image.title` and `.version`, as the plugin declares them).
pub(crate) fn pack(
    component: &[u8],
    info: ComponentInfo,
    annotations: BTreeMap<String, String>,
) -> Packed {
    let config = WasmConfig {
        // To the nanosecond: two publishes of the same bytes are two artifacts (each with
        // its own signatures), as with other tools.
        created: jiff::Timestamp::now().to_string(),
        author: None,
        architecture: "wasm".into(),
        os: "wasip2".into(),
        layer_digests: vec![digest_of(component)],
        component: Some(info),
    };
    let config = Config {
        data: serde_json::to_vec(&config)
            .expect("the config serialises")
            .into(),
        media_type: CONFIG_MEDIA_TYPE.into(),
        annotations: None,
    };
    let layer = ImageLayer {
        data: component.to_vec().into(),
        media_type: LAYER_MEDIA_TYPE.into(),
        annotations: None,
    };
    let mut manifest = OciImageManifest::build(
        std::slice::from_ref(&layer),
        &config,
        (!annotations.is_empty()).then_some(annotations),
    );
    manifest.media_type = Some(MANIFEST_MEDIA_TYPE.into());
    Packed {
        config,
        layer,
        manifest,
    }
}

/// The one component layer of the manifest `raw` (whose digest is `digest`), once its media
/// types say it is a wasm component artifact.
pub(crate) fn component_layer(
    reference: &str,
    digest: &str,
    raw: &[u8],
) -> Result<OciDescriptor, PullError> {
    let bad = |why: String| PullError::MediaType {
        reference: reference.to_string(),
        digest: digest.to_string(),
        why,
    };
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Head {
        #[serde(default)]
        media_type: Option<String>,
        #[serde(default)]
        manifests: Option<serde_json::Value>,
    }
    let head: Head =
        serde_json::from_slice(raw).map_err(|e| bad(format!("the manifest is not JSON: {e}")))?;
    if head.manifests.is_some()
        || head
            .media_type
            .as_deref()
            .is_some_and(|m| INDEX_MEDIA_TYPES.contains(&m))
    {
        return Err(PullError::ManifestList {
            reference: reference.to_string(),
            digest: digest.to_string(),
        });
    }
    let manifest: OciImageManifest =
        serde_json::from_slice(raw).map_err(|e| bad(format!("not an OCI image manifest: {e}")))?;
    if manifest.config.media_type != CONFIG_MEDIA_TYPE {
        return Err(bad(format!(
            "its config is `{}`, not `{CONFIG_MEDIA_TYPE}` (a container image?)",
            manifest.config.media_type
        )));
    }
    match manifest.layers.as_slice() {
        [layer] if layer.media_type == LAYER_MEDIA_TYPE => Ok(layer.clone()),
        [layer] => Err(bad(format!(
            "its layer is `{}`, not `{LAYER_MEDIA_TYPE}`",
            layer.media_type
        ))),
        layers => Err(bad(format!(
            "{} layers; the layout has exactly one, `{LAYER_MEDIA_TYPE}`",
            layers.len()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packed_component_has_the_layout_a_pull_accepts() {
        let bytes = b"\0asm\x0d\0\x01\0";
        let packed = pack(
            bytes,
            ComponentInfo {
                exports: vec!["wasmop:plugin/plugin@0.3.0".into()],
                imports: vec![],
                target: None,
            },
            BTreeMap::from([("org.opencontainers.image.title".into(), "p".into())]),
        );
        let raw = serde_json::to_vec(&packed.manifest).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&raw).unwrap();
        assert_eq!(doc["schemaVersion"], 2);
        assert_eq!(doc["mediaType"], MANIFEST_MEDIA_TYPE);
        assert_eq!(doc["config"]["mediaType"], CONFIG_MEDIA_TYPE);
        assert_eq!(doc["layers"][0]["mediaType"], LAYER_MEDIA_TYPE);
        assert_eq!(doc["layers"][0]["digest"], digest_of(bytes));
        assert_eq!(doc["layers"][0]["size"], bytes.len());
        let config: serde_json::Value = serde_json::from_slice(&packed.config.data).unwrap();
        assert_eq!(config["architecture"], "wasm");
        assert_eq!(config["os"], "wasip2");
        assert_eq!(config["layerDigests"][0], digest_of(bytes));
        assert_eq!(
            config["component"]["exports"][0],
            "wasmop:plugin/plugin@0.3.0"
        );
        assert_eq!(doc["config"]["digest"], digest_of(&packed.config.data));
        let layer = component_layer("r", "d", &raw).unwrap();
        assert_eq!(layer.digest, digest_of(bytes));
    }

    #[test]
    fn other_layouts_are_refused_with_what_they_are() {
        let index = br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}"#;
        assert!(matches!(
            component_layer("r", "d", index),
            Err(PullError::ManifestList { .. })
        ));
        let image = br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",
            "config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:00","size":2},
            "layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:11","size":3}]}"#;
        let e = component_layer("r", "d", image).unwrap_err();
        assert_eq!(e.reason(), "WrongMediaType");
        assert!(e.to_string().contains("a container image?"), "{e}");
        let two = br#"{"schemaVersion":2,
            "config":{"mediaType":"application/vnd.wasm.config.v0+json","digest":"sha256:00","size":2},
            "layers":[{"mediaType":"application/wasm","digest":"sha256:11","size":3},
                      {"mediaType":"application/wasm","digest":"sha256:22","size":3}]}"#;
        assert!(
            component_layer("r", "d", two)
                .unwrap_err()
                .to_string()
                .contains("2 layers")
        );
    }
}
