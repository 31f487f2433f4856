//! `wasmop rbac PLUGIN.wasm`: the ServiceAccount, roles and bindings that grant exactly what
//! a plugin declares, for an admin to review and apply. Two parts, bound to two subjects:
//! the plugin's own ServiceAccount gets what its plans do; the host's ServiceAccount gets
//! the reads it makes for the plugin and `impersonate` on that one ServiceAccount.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::principals::identity::{DEFAULT_TEMPLATE, Naming};
use crate::principals::rules::{Rule, host_rules, plugin_rules};
use crate::runtime::PluginInfo;

/// Arguments of `wasmop rbac`.
#[derive(Debug, Clone, clap::Args)]
pub struct RbacArgs {
    /// The plugin component (`.wasm`).
    pub plugin: PathBuf,
    /// Grant in this namespace only (Role and RoleBinding); the host must then run with
    /// `--namespace` of the same value.
    #[arg(long, conflicts_with = "cluster")]
    pub namespace: Option<String>,
    /// Grant in every namespace (ClusterRole and ClusterRoleBinding): the default.
    #[arg(long)]
    pub cluster: bool,
    /// Namespace of the plugins' ServiceAccounts and of the host (the host's
    /// `--plugin-service-account-namespace`).
    #[arg(long, default_value = "wasmop-system")]
    pub service_account_namespace: String,
    /// Name template of plugin ServiceAccounts (`{name}`: the plugin's name).
    #[arg(long, default_value = DEFAULT_TEMPLATE)]
    pub service_account_template: String,
    /// The host's ServiceAccount (in --service-account-namespace), which reads for the plugin
    /// and impersonates it.
    #[arg(long, default_value = "wasmop")]
    pub host_service_account: String,
    /// The host runs with `--sharding`: it may also patch the plugin's primaries and owned
    /// objects (their shard labels).
    #[arg(long)]
    pub sharding: bool,
}

/// What the manifests are made for.
#[derive(Debug, Clone)]
pub struct Scope {
    /// The naming of plugin ServiceAccounts.
    pub naming: Naming,
    /// `Some(ns)`: Roles in `ns`; `None`: ClusterRoles.
    pub namespace: Option<String>,
    /// The host's ServiceAccount name (in `naming.namespace`).
    pub host_service_account: String,
    /// The host shards (it patches shard labels).
    pub sharding: bool,
}

fn labels(plugin: &str) -> Value {
    json!({"app.kubernetes.io/part-of": "wasmop", "wasmop.dev/plugin": plugin})
}

fn rule_json(r: &Rule) -> Value {
    json!({"apiGroups": [r.group], "resources": [r.resource],
           "verbs": r.verbs.iter().collect::<Vec<_>>()})
}

/// A Role (in `ns`) or ClusterRole with `rules`, and its binding to `subject` (name, ns).
fn role_and_binding(
    name: &str,
    plugin: &str,
    ns: Option<&str>,
    rules: &[Rule],
    subject: (&str, &str),
) -> Vec<Value> {
    let (role_kind, binding_kind) = match ns {
        Some(_) => ("Role", "RoleBinding"),
        None => ("ClusterRole", "ClusterRoleBinding"),
    };
    let mut meta = json!({"name": name, "labels": labels(plugin)});
    if let Some(ns) = ns {
        meta["namespace"] = json!(ns);
    }
    vec![
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": role_kind,
               "metadata": meta, "rules": rules.iter().map(rule_json).collect::<Vec<_>>()}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": binding_kind,
               "metadata": meta,
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
               "subjects": [{"kind": "ServiceAccount", "name": subject.0, "namespace": subject.1}]}),
    ]
}

/// The objects that grant `info`'s plugin what it declares, in `scope`.
pub fn manifests(info: &PluginInfo, scope: &Scope) -> anyhow::Result<Vec<Value>> {
    let plugin = info.name.as_str();
    let sa_ns = scope.naming.namespace.as_str();
    let sa = scope.naming.service_account(plugin);
    let host = (scope.host_service_account.as_str(), sa_ns);
    let (cluster_rules, ns_rules): (Vec<Rule>, Vec<Rule>) = plugin_rules(info)
        .into_iter()
        .partition(|r| r.cluster_scoped);
    let (host_cluster, host_ns): (Vec<Rule>, Vec<Rule>) = host_rules(info, scope.sharding)
        .into_iter()
        .partition(|r| r.cluster_scoped);
    if scope.namespace.is_some() && !(cluster_rules.is_empty() && host_cluster.is_empty()) {
        let kinds: Vec<String> = cluster_rules
            .iter()
            .chain(&host_cluster)
            .map(|r| r.resource.clone())
            .collect();
        anyhow::bail!(
            "plugin `{plugin}` declares cluster-scoped kinds ({}): a namespace cannot grant them; use --cluster",
            kinds.join(", ")
        );
    }
    let own = format!("wasmop-plugin-{plugin}");
    let reads = format!("wasmop-host-{plugin}");
    let mut out = vec![json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": sa, "namespace": sa_ns, "labels": labels(plugin)},
        // The host acts as this account; nothing mounts its token.
        "automountServiceAccountToken": false})];
    let ns = scope.namespace.as_deref();
    let all_plugin: Vec<Rule> = ns_rules.into_iter().chain(cluster_rules).collect();
    out.extend(role_and_binding(
        &own,
        plugin,
        ns,
        &all_plugin,
        (&sa, sa_ns),
    ));
    let all_host: Vec<Rule> = host_ns.into_iter().chain(host_cluster).collect();
    out.extend(role_and_binding(&reads, plugin, ns, &all_host, host));
    // Impersonation of exactly this ServiceAccount, where it lives.
    let impersonate = format!("wasmop-impersonate-{plugin}");
    let meta = json!({"name": impersonate, "namespace": sa_ns, "labels": labels(plugin)});
    out.push(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta,
        "rules": [{"apiGroups": [""], "resources": ["serviceaccounts"], "resourceNames": [sa],
                   "verbs": ["impersonate"]}]}),
    );
    out.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": impersonate},
        "subjects": [{"kind": "ServiceAccount", "name": host.0, "namespace": host.1}]}));
    Ok(out)
}

/// The manifests as one YAML stream, with a header saying what they grant.
pub fn render(info: &PluginInfo, scope: &Scope) -> anyhow::Result<String> {
    let docs = manifests(info, scope)?;
    let where_ = match &scope.namespace {
        Some(ns) => format!("in namespace {ns}"),
        None => "in every namespace".to_string(),
    };
    let mut out = format!(
        "# RBAC for wasmop plugin `{}` {} (generated by `wasmop rbac`; review before applying).\n\
         # The plugin acts as ServiceAccount {}/{}: its plans' verbs, its primary's status,\n\
         # its Events. The host ({}/{}) reads what the plugin watches and may impersonate\n\
         # exactly that ServiceAccount.\n",
        info.name,
        info.version,
        scope.naming.namespace,
        scope.naming.service_account(&info.name),
        scope.naming.namespace,
        scope.host_service_account,
    );
    out.push_str(&format!("# Scope: {where_}.\n"));
    for d in docs {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&d)?);
    }
    Ok(out)
}

/// Runs `wasmop rbac`.
pub fn run(args: &RbacArgs) -> anyhow::Result<()> {
    let sandbox = crate::runtime::Sandbox::new(1)?;
    let plugin =
        crate::cases::load::load_file(&sandbox, &args.plugin, crate::runtime::Limits::default())?;
    let scope = Scope {
        naming: Naming {
            namespace: args.service_account_namespace.clone(),
            template: args.service_account_template.clone(),
        },
        namespace: args.namespace.clone(),
        host_service_account: args.host_service_account.clone(),
        sharding: args.sharding,
    };
    print!("{}", render(&plugin.info, &scope)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{KindRef, Permission, Verb};

    fn info(kind: KindRef) -> PluginInfo {
        PluginInfo {
            name: "demo".into(),
            version: "1".into(),
            primary: KindRef {
                group: "app.example.com".into(),
                version: "v1".into(),
                kind: "Demo".into(),
                plural: "demos".into(),
                namespaced: true,
            },
            crd: None,
            relations: vec![],
            permissions: vec![Permission {
                kind,
                verbs: vec![Verb::Create],
            }],
            finalizer: None,
            webhooks: Default::default(),
            outbound_hosts: Vec::new(),
        }
    }

    fn scope(ns: Option<&str>) -> Scope {
        Scope {
            naming: Naming {
                namespace: "wasmop-system".into(),
                template: DEFAULT_TEMPLATE.into(),
            },
            namespace: ns.map(str::to_string),
            host_service_account: "wasmop".into(),
            sharding: false,
        }
    }

    #[test]
    fn namespaced_grants_are_roles_bound_to_the_right_subjects() {
        let docs = manifests(&info(KindRef::pod()), &scope(Some("team-a"))).unwrap();
        let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "ServiceAccount",
                "Role",
                "RoleBinding",
                "Role",
                "RoleBinding",
                "Role",
                "RoleBinding"
            ]
        );
        assert_eq!(docs[1]["metadata"]["namespace"], "team-a");
        assert_eq!(docs[2]["subjects"][0]["name"], "wasmop-plugin-demo");
        assert_eq!(docs[4]["subjects"][0]["name"], "wasmop");
        assert_eq!(docs[3]["rules"][0]["verbs"], json!(["list", "watch"]));
        // Impersonation: one ServiceAccount by name, in its own namespace.
        assert_eq!(docs[5]["metadata"]["namespace"], "wasmop-system");
        assert_eq!(
            docs[5]["rules"][0]["resourceNames"],
            json!(["wasmop-plugin-demo"])
        );
    }

    #[test]
    fn cluster_scoped_kinds_need_cluster_roles() {
        let ns_kind = KindRef {
            kind: "Namespace".into(),
            plural: "namespaces".into(),
            namespaced: false,
            ..KindRef::pod()
        };
        let err = manifests(&info(ns_kind.clone()), &scope(Some("team-a"))).unwrap_err();
        assert!(err.to_string().contains("use --cluster"), "{err}");
        let docs = manifests(&info(ns_kind), &scope(None)).unwrap();
        assert_eq!(docs[1]["kind"], "ClusterRole");
        assert_eq!(docs[2]["kind"], "ClusterRoleBinding");
    }
}
