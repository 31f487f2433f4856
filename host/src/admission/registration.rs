//! The webhook configurations the host registers for its plugins: for each plugin whose
//! active version declares `validate` (`default`), a ValidatingWebhookConfiguration
//! (MutatingWebhookConfiguration) `wasmop-PLUGIN` for create, update and delete (create and
//! update) of its primary kind, calling the host at the endpoint with the CA's `caBundle`.
//! Failure policy `Fail` (an operation the host cannot judge is refused, as the plugin would
//! have to judge it), 10 s timeout, no side effects. A configuration of a plugin that no
//! longer declares its webhook, or no longer runs, is deleted. For a version that declares
//! `convert`, its CRD's `spec.conversion` names the host's `/convert/PLUGIN` (strategy
//! `Webhook`); set back to `None` when a version that does not convert follows it.

use base64::Engine;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ServiceReference,
    ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams};

use crate::runtime::types::PluginInfo;

/// The label on every configuration the host registers.
pub const MANAGED: (&str, &str) = ("app.kubernetes.io/managed-by", "wasmop");
/// How long the API server waits for an answer.
pub const TIMEOUT_SECONDS: i32 = 10;

/// Where the API server reaches the webhook server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A base URL (`https://127.0.0.1:9443`): a host outside the cluster.
    Url(String),
    /// A Service in front of the host's pods: (namespace, name, port).
    Service(String, String, i32),
}

impl Endpoint {
    /// The CRD's conversion webhook `clientConfig` for `path` (JSON, `caBundle` base64).
    fn conversion_config(&self, path: &str, ca: &str) -> serde_json::Value {
        let bundle = base64::engine::general_purpose::STANDARD.encode(ca);
        match self {
            Endpoint::Url(base) => serde_json::json!({
                "url": format!("{}{path}", base.trim_end_matches('/')), "caBundle": bundle}),
            Endpoint::Service(namespace, name, port) => serde_json::json!({
                "service": {"namespace": namespace, "name": name, "path": path, "port": port},
                "caBundle": bundle}),
        }
    }

    fn client_config(&self, path: &str, ca: &str) -> WebhookClientConfig {
        let ca_bundle = Some(ByteString(ca.as_bytes().to_vec()));
        match self {
            Endpoint::Url(base) => WebhookClientConfig {
                url: Some(format!("{}{path}", base.trim_end_matches('/'))),
                ca_bundle,
                service: None,
            },
            Endpoint::Service(namespace, name, port) => WebhookClientConfig {
                service: Some(ServiceReference {
                    namespace: namespace.clone(),
                    name: name.clone(),
                    path: Some(path.into()),
                    port: Some(*port),
                }),
                ca_bundle,
                url: None,
            },
        }
    }
}

fn name_of(plugin: &str) -> String {
    format!("wasmop-{plugin}")
}

fn meta(plugin: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name_of(plugin)),
        labels: Some([(MANAGED.0.to_string(), MANAGED.1.to_string())].into()),
        ..Default::default()
    }
}

fn rule(info: &PluginInfo, operations: &[&str]) -> RuleWithOperations {
    RuleWithOperations {
        api_groups: Some(vec![info.primary.group.clone()]),
        api_versions: Some(vec!["*".into()]),
        resources: Some(vec![info.primary.plural.clone()]),
        operations: Some(operations.iter().map(ToString::to_string).collect()),
        scope: Some(
            if info.primary.namespaced {
                "Namespaced"
            } else {
                "Cluster"
            }
            .into(),
        ),
    }
}

/// The validating configuration of `info` (which declares `validate`).
pub fn validating(info: &PluginInfo, at: &Endpoint, ca: &str) -> ValidatingWebhookConfiguration {
    ValidatingWebhookConfiguration {
        metadata: meta(&info.name),
        webhooks: Some(vec![ValidatingWebhook {
            name: format!("{}.validate.wasmop.dev", info.name),
            client_config: at.client_config(&format!("/validate/{}", info.name), ca),
            rules: Some(vec![rule(info, &["CREATE", "UPDATE", "DELETE"])]),
            failure_policy: Some("Fail".into()),
            match_policy: Some("Equivalent".into()),
            side_effects: "None".into(),
            timeout_seconds: Some(TIMEOUT_SECONDS),
            admission_review_versions: vec!["v1".into()],
            ..Default::default()
        }]),
    }
}

/// The mutating configuration of `info` (which declares `default`).
pub fn mutating(info: &PluginInfo, at: &Endpoint, ca: &str) -> MutatingWebhookConfiguration {
    MutatingWebhookConfiguration {
        metadata: meta(&info.name),
        webhooks: Some(vec![MutatingWebhook {
            name: format!("{}.default.wasmop.dev", info.name),
            client_config: at.client_config(&format!("/default/{}", info.name), ca),
            rules: Some(vec![rule(info, &["CREATE", "UPDATE"])]),
            failure_policy: Some("Fail".into()),
            match_policy: Some("Equivalent".into()),
            side_effects: "None".into(),
            timeout_seconds: Some(TIMEOUT_SECONDS),
            admission_review_versions: vec!["v1".into()],
            reinvocation_policy: Some("Never".into()),
            ..Default::default()
        }]),
    }
}

/// Registers what the active versions `infos` declare and deletes the host's other
/// configurations. Errors name the configuration.
pub async fn register(
    client: &Client,
    infos: &[PluginInfo],
    at: &Endpoint,
    ca: &str,
) -> Result<(), String> {
    let pp = PatchParams::apply("wasmop").force();
    let validating_api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let mutating_api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let e = |what: &str, e: kube::Error| format!("{what}: {e}");
    for info in infos {
        let name = name_of(&info.name);
        if info.webhooks.validate {
            validating_api
                .patch(&name, &pp, &Patch::Apply(validating(info, at, ca)))
                .await
                .map_err(|x| e(&format!("ValidatingWebhookConfiguration {name}"), x))?;
        }
        if info.webhooks.default {
            mutating_api
                .patch(&name, &pp, &Patch::Apply(mutating(info, at, ca)))
                .await
                .map_err(|x| e(&format!("MutatingWebhookConfiguration {name}"), x))?;
        }
    }
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let converter = PatchParams::apply("wasmop-conversion").force();
    for info in infos {
        let crd = format!("{}.{}", info.primary.plural, info.primary.group);
        let path = format!("/convert/{}", info.name);
        let conversion = if info.webhooks.convert {
            serde_json::json!({"strategy": "Webhook", "webhook": {
                "clientConfig": at.conversion_config(&path, ca),
                "conversionReviewVersions": ["v1"]}})
        } else {
            // Only a conversion the host set is set back.
            let ours = crds.get_opt(&crd).await.ok().flatten().is_some_and(|c| {
                c.spec.conversion.as_ref().is_some_and(|v| {
                    v.webhook.as_ref().is_some_and(|w| {
                        w.client_config.as_ref().is_some_and(|cc| {
                            cc.url.as_deref().is_some_and(|u| u.ends_with(&path))
                                || cc
                                    .service
                                    .as_ref()
                                    .is_some_and(|s| s.path.as_deref() == Some(&path))
                        })
                    })
                })
            });
            if !ours {
                continue;
            }
            serde_json::json!({"strategy": "None"})
        };
        let patch = serde_json::json!({"apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition", "metadata": {"name": crd},
            "spec": {"conversion": conversion}});
        crds.patch(&crd, &converter, &Patch::Apply(patch))
            .await
            .map_err(|x| e(&format!("CustomResourceDefinition {crd}"), x))?;
    }
    let managed = ListParams::default().labels(&format!("{}={}", MANAGED.0, MANAGED.1));
    let wanted = |name: &str, declared: fn(&PluginInfo) -> bool| {
        infos
            .iter()
            .any(|i| declared(i) && name_of(&i.name) == name)
    };
    for c in validating_api
        .list_metadata(&managed)
        .await
        .map_err(|x| e("list", x))?
    {
        let name = c.metadata.name.unwrap_or_default();
        if !wanted(&name, |i| i.webhooks.validate) {
            let _ = validating_api.delete(&name, &DeleteParams::default()).await;
            tracing::info!(configuration = %name, "validating webhook unregistered");
        }
    }
    for c in mutating_api
        .list_metadata(&managed)
        .await
        .map_err(|x| e("list", x))?
    {
        let name = c.metadata.name.unwrap_or_default();
        if !wanted(&name, |i| i.webhooks.default) {
            let _ = mutating_api.delete(&name, &DeleteParams::default()).await;
            tracing::info!(configuration = %name, "mutating webhook unregistered");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::types::{KindRef, Webhooks};

    fn info() -> PluginInfo {
        PluginInfo {
            name: "podreplica".into(),
            version: "1".into(),
            primary: KindRef {
                group: "app.example.com".into(),
                version: "v1alpha1".into(),
                kind: "PodReplica".into(),
                plural: "podreplicas".into(),
                namespaced: true,
            },
            crd: None,
            relations: vec![],
            permissions: vec![],
            finalizer: None,
            webhooks: Webhooks {
                validate: true,
                default: true,
                convert: false,
            },
            outbound_hosts: vec![],
        }
    }

    #[test]
    fn a_configuration_calls_the_plugins_route_for_its_primary_kind() {
        let at = Endpoint::Url("https://127.0.0.1:9443/".into());
        let v = validating(&info(), &at, "CA");
        let hook = &v.webhooks.as_ref().unwrap()[0];
        assert_eq!(v.metadata.name.as_deref(), Some("wasmop-podreplica"));
        assert_eq!(
            hook.client_config.url.as_deref(),
            Some("https://127.0.0.1:9443/validate/podreplica")
        );
        assert_eq!(
            hook.client_config.ca_bundle,
            Some(ByteString(b"CA".to_vec()))
        );
        let r = &hook.rules.as_ref().unwrap()[0];
        assert_eq!(
            r.resources.as_deref(),
            Some(&["podreplicas".to_string()][..])
        );
        assert_eq!(r.operations.as_ref().unwrap().len(), 3);
        assert_eq!(hook.failure_policy.as_deref(), Some("Fail"));
        let at = Endpoint::Service("sys".into(), "wasmop-webhook".into(), 443);
        let m = mutating(&info(), &at, "CA");
        let hook = &m.webhooks.as_ref().unwrap()[0];
        let svc = hook.client_config.service.as_ref().unwrap();
        assert_eq!(
            (svc.namespace.as_str(), svc.path.as_deref()),
            ("sys", Some("/default/podreplica"))
        );
        assert_eq!(
            hook.rules.as_ref().unwrap()[0]
                .operations
                .as_ref()
                .unwrap()
                .len(),
            2
        );
    }
}
