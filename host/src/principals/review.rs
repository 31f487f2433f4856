//! Admin approval: before a plugin version becomes active, the API server is asked
//! (SubjectAccessReview) whether the plugin's ServiceAccount holds every rule the version
//! needs. An upload cannot grant itself anything; what is missing is reported with the
//! command an admin would run.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, PostParams};

use crate::principals::identity::Naming;
use crate::principals::rules::{Rule, plugin_rules};
use crate::runtime::PluginInfo;

/// One verb the plugin's ServiceAccount lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// The rule (with just that verb).
    pub rule: Rule,
    /// Where it was checked (`None`: in every namespace, or cluster-scoped).
    pub namespace: Option<String>,
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} in namespace {ns}", self.rule),
            None if self.rule.cluster_scoped => write!(f, "{} (cluster-scoped)", self.rule),
            None => write!(f, "{} in all namespaces", self.rule),
        }
    }
}

/// The attributes of a question about `verb` on the rule's resource in `namespace`
/// (`None`: all namespaces; always `None` for a cluster-scoped resource).
pub(crate) fn attributes(rule: &Rule, verb: &str, namespace: Option<&str>) -> ResourceAttributes {
    let (resource, subresource) = rule.resource_parts();
    ResourceAttributes {
        group: Some(rule.group.clone()),
        resource: Some(resource.to_string()),
        subresource: subresource.map(str::to_string),
        verb: Some(verb.to_string()),
        namespace: if rule.cluster_scoped {
            None
        } else {
            namespace.map(str::to_string)
        },
        ..Default::default()
    }
}

/// Whether `user` may `verb` the rule's resource in `namespace` (`None`: all namespaces).
async fn allowed(
    client: &Client,
    naming: &Naming,
    user: &str,
    rule: &Rule,
    verb: &str,
    namespace: Option<&str>,
) -> Result<bool, kube::Error> {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.to_string()),
            groups: Some(naming.groups()),
            resource_attributes: Some(attributes(rule, verb, namespace)),
            ..Default::default()
        },
        ..Default::default()
    };
    let api: Api<SubjectAccessReview> = Api::all(client.clone());
    let pp = PostParams::default();
    let answer = ask(|| api.create(&pp, &review)).await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

/// How often a review is asked before its error counts.
pub const ASKS: u32 = 5;

/// Asks a review: a question, so asking again changes nothing. An answer the API server
/// could not give (429, or a 5xx) is asked again, up to [`ASKS`] times with a pause that
/// doubles from 100 ms; any other error, or the last one, is returned.
pub(crate) async fn ask<T, F, Fut>(mut question: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let mut pause = std::time::Duration::from_millis(100);
    let mut asked = 1;
    loop {
        match question().await {
            Err(kube::Error::Api(s)) if asked < ASKS && (s.code == 429 || s.code >= 500) => {
                tokio::time::sleep(pause).await;
                pause *= 2;
                asked += 1;
            }
            other => return other,
        }
    }
}

/// The verbs of `info`'s plugin rules its ServiceAccount does not hold, checked in
/// `namespace` (the host's `--namespace`) or in all namespaces.
pub async fn missing(
    client: &Client,
    naming: &Naming,
    info: &PluginInfo,
    namespace: Option<&str>,
) -> Result<Vec<Missing>, kube::Error> {
    let user = naming.user(&info.name);
    let checks: Vec<(Rule, &'static str)> = plugin_rules(info)
        .into_iter()
        .flat_map(|r| {
            r.verbs
                .clone()
                .into_iter()
                .map(move |v| (r.clone(), v))
                .collect::<Vec<_>>()
        })
        .collect();
    let answers = futures::future::join_all(
        checks
            .iter()
            .map(|(r, v)| allowed(client, naming, &user, r, v, namespace)),
    )
    .await;
    let mut out = Vec::new();
    for ((rule, verb), answer) in checks.into_iter().zip(answers) {
        if !answer? {
            out.push(Missing {
                rule: Rule {
                    verbs: [verb].into_iter().collect(),
                    ..rule.clone()
                },
                namespace: (!rule.cluster_scoped)
                    .then(|| namespace.map(str::to_string))
                    .flatten(),
            });
        }
    }
    Ok(out)
}

/// The message of a `PermissionsMissing` verdict: the ServiceAccount, each missing rule,
/// and the command that grants them.
pub fn report(
    naming: &Naming,
    plugin: &str,
    missing: &[Missing],
    namespace: Option<&str>,
) -> String {
    let rules: Vec<String> = missing.iter().map(Missing::to_string).collect();
    let scope = match namespace {
        Some(ns) => format!("--namespace {ns}"),
        None => "--cluster".to_string(),
    };
    format!(
        "ServiceAccount {}/{} lacks: {}. An admin grants what this version declares with: wasmop rbac PLUGIN.wasm {scope} --service-account-namespace {} | kubectl apply -f - (it then activates without another upload)",
        naming.namespace,
        naming.service_account(plugin),
        rules.join("; "),
        naming.namespace,
    )
}

#[cfg(test)]
mod ask_tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure(&format!("status {code}"), "Test")
                .with_code(code)
                .boxed(),
        )
    }

    #[tokio::test]
    async fn a_question_is_asked_again_only_when_the_server_could_not_answer() {
        let calls = AtomicU32::new(0);
        let answered = ask(|| async {
            match calls.fetch_add(1, Ordering::SeqCst) {
                0 => Err(api_error(500)),
                1 => Err(api_error(429)),
                2 => Err(api_error(503)),
                _ => Ok("allowed"),
            }
        })
        .await;
        assert_eq!(answered.unwrap(), "allowed");
        assert_eq!(calls.load(Ordering::SeqCst), 4);

        let calls = AtomicU32::new(0);
        let refused: Result<(), _> = ask(|| async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(api_error(403))
        })
        .await;
        assert!(refused.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 1, "a 403 is an answer");

        let calls = AtomicU32::new(0);
        let down: Result<(), _> = ask(|| async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(api_error(500))
        })
        .await;
        assert!(down.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), ASKS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(resource: &str, verb: &'static str, cluster_scoped: bool) -> Rule {
        Rule {
            group: String::new(),
            resource: resource.into(),
            verbs: [verb].into_iter().collect(),
            cluster_scoped,
        }
    }

    #[test]
    fn the_report_names_each_rule_where_and_the_command() {
        let naming = Naming {
            namespace: "wasmop-system".into(),
            template: "wasmop-plugin-{name}".into(),
        };
        let missing = [
            Missing {
                rule: rule("configmaps", "create", false),
                namespace: Some("team-a".into()),
            },
            Missing {
                rule: rule("namespaces", "get", true),
                namespace: None,
            },
        ];
        let text = report(&naming, "demo", &missing, Some("team-a"));
        assert!(
            text.starts_with("ServiceAccount wasmop-system/wasmop-plugin-demo lacks: \"\" configmaps [create] in namespace team-a; \"\" namespaces [get] (cluster-scoped)."),
            "{text}"
        );
        assert!(text.contains("wasmop rbac PLUGIN.wasm --namespace team-a --service-account-namespace wasmop-system | kubectl apply -f -"), "{text}");
        let everywhere = report(&naming, "demo", &missing[..1], None);
        assert!(everywhere.contains("--cluster"), "{everywhere}");
    }
}
