//! The host's own reads for a plugin version: before a version becomes active, the API
//! server is asked (SelfSubjectAccessReview, as whatever identity the host runs with)
//! whether the host may do what running the version takes ([`host_rules`]: list and watch
//! its primary kind and every related kind; sharded, patch the primaries and owned kinds
//! too), in the namespace it watches or in all namespaces.
//!
//! Why before: a version whose relation the host cannot watch would stop its plugin. The
//! running controller is stopped for the new one, whose cache retries its 403 for ever, and
//! every reconcile waits on that cache. Refused instead (`HostCannotWatch`, naming each
//! kind), the running version keeps deciding until an admin grants the reads.

use k8s_openapi::api::authorization::v1::{SelfSubjectAccessReview, SelfSubjectAccessReviewSpec};
use kube::Client;
use kube::api::{Api, PostParams};

use crate::principals::review::{Missing, attributes};
use crate::principals::rules::{Rule, host_rules};
use crate::runtime::PluginInfo;

/// Whether the host may `verb` the rule's resource in `namespace` (`None`: everywhere).
async fn allowed(
    client: &Client,
    rule: &Rule,
    verb: &str,
    namespace: Option<&str>,
) -> Result<bool, kube::Error> {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(attributes(rule, verb, namespace)),
            ..Default::default()
        },
        ..Default::default()
    };
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let pp = PostParams::default();
    let answer = crate::principals::review::ask(|| api.create(&pp, &review)).await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

/// The host's rules for `info` it does not hold, each with the verbs it lacks, checked in
/// `namespace` (the host's `--namespace`) or in all namespaces.
pub async fn missing(
    client: &Client,
    info: &PluginInfo,
    sharding: bool,
    namespace: Option<&str>,
) -> Result<Vec<Missing>, kube::Error> {
    let mut out = Vec::new();
    for rule in host_rules(info, sharding) {
        let answers = futures::future::join_all(
            rule.verbs
                .iter()
                .map(|v| allowed(client, &rule, v, namespace)),
        )
        .await;
        let mut lacking = Vec::new();
        for (verb, answer) in rule.verbs.iter().zip(answers) {
            if !answer? {
                lacking.push(*verb);
            }
        }
        if !lacking.is_empty() {
            out.push(Missing {
                namespace: (!rule.cluster_scoped)
                    .then(|| namespace.map(str::to_string))
                    .flatten(),
                rule: Rule {
                    verbs: lacking.into_iter().collect(),
                    ..rule
                },
            });
        }
    }
    Ok(out)
}

/// The kind `info` watches through the resource of `rule` (what a message names).
fn kind_of<'a>(info: &'a PluginInfo, rule: &Rule) -> &'a str {
    std::iter::once(&info.primary)
        .chain(info.relations.iter().map(|r| &r.kind))
        .find(|k| k.group == rule.group && k.plural == rule.resource)
        .map_or("?", |k| k.kind.as_str())
}

/// The message of a `HostCannotWatch` verdict: each kind and what the host lacks on it,
/// and the command that grants it.
pub fn report(
    info: &PluginInfo,
    missing: &[Missing],
    sharding: bool,
    namespace: Option<&str>,
) -> String {
    let lacks: Vec<String> = missing
        .iter()
        .map(|m| format!("kind {} ({m})", kind_of(info, &m.rule)))
        .collect();
    let scope = match namespace {
        Some(ns) => format!("--namespace {ns}"),
        None => "--cluster".to_string(),
    };
    let sharded = if sharding { " --sharding" } else { "" };
    format!(
        "the host cannot read what {} {} watches; it lacks: {}. An admin grants the host's reads with: wasmop rbac PLUGIN.wasm {scope}{sharded} | kubectl apply -f - (the version then activates without another upload)",
        info.name,
        info.version,
        lacks.join("; "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{KindRef, Relation, Selection};

    #[test]
    fn the_report_names_each_kind_what_it_lacks_and_the_command() {
        let gadget = KindRef {
            group: "missing.wasmop.dev".into(),
            version: "v1".into(),
            kind: "Gadget".into(),
            plural: "gadgets".into(),
            namespaced: true,
        };
        let info = PluginInfo {
            name: "hostile".into(),
            version: "0.1.0-unwatchable".into(),
            primary: KindRef::pod(),
            crd: None,
            relations: vec![Relation {
                name: "gadgets".into(),
                kind: gadget.clone(),
                selection: Selection::Namespace,
                label_selector: None,
                fields: None,
            }],
            permissions: vec![],
            finalizer: None,
            webhooks: Default::default(),
            outbound_hosts: Vec::new(),
        };
        let rule = host_rules(&info, false).remove(1);
        assert_eq!(rule.to_string(), "missing.wasmop.dev gadgets [list,watch]");
        let missing = [Missing {
            rule,
            namespace: Some("tenant".into()),
        }];
        let text = report(&info, &missing, false, Some("tenant"));
        assert_eq!(
            text,
            "the host cannot read what hostile 0.1.0-unwatchable watches; it lacks: kind Gadget (missing.wasmop.dev gadgets [list,watch] in namespace tenant). An admin grants the host's reads with: wasmop rbac PLUGIN.wasm --namespace tenant | kubectl apply -f - (the version then activates without another upload)"
        );
        assert!(report(&info, &missing, true, None).contains("--cluster --sharding |"));
    }
}
