//! `wasmop status` (and `kubectl wasmop status`): what each plugin is doing now, from its
//! WasmPlugin (active version, candidate and agreement, conditions), the API server (how
//! many primary objects there are) and every host replica's `/metrics` (reconciles and
//! errors of the last minute, plans refused by rule, each shard's share).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::Context;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};

use crate::cmd::target::Cluster;
use crate::registry::wasmplugin::WasmPlugin;

/// Arguments of `wasmop status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Only this WasmPlugin (default: every WasmPlugin in the namespace).
    pub name: Option<String>,
    /// The cluster and namespace (kubectl's flags).
    #[command(flatten)]
    pub cluster: Cluster,
    /// A host replica's metrics endpoint, `http://HOST:PORT/metrics` (repeat it for each
    /// replica). Without it, the host's pods (`--host-namespace`, `--host-selector`) are read
    /// through the API server's pod proxy, which needs `get` on `pods/proxy` there.
    #[arg(long = "metrics", value_name = "URL")]
    pub metrics: Vec<String>,
    /// Namespace the host's pods run in.
    #[arg(long, default_value = "wasmop-system")]
    pub host_namespace: String,
    /// Label selector of the host's pods.
    #[arg(long, default_value = "app.kubernetes.io/name=wasmop")]
    pub host_selector: String,
}

/// Runs `wasmop status`; false when a WasmPlugin is not Ready or a host could not be read.
pub async fn run(args: &StatusArgs) -> anyhow::Result<bool> {
    let crate::cmd::target::Connection {
        client,
        namespace,
        server,
    } = args.cluster.connect().await?;
    let api: Api<WasmPlugin> = Api::namespaced(client.clone(), &namespace);
    let plugins = match &args.name {
        Some(name) => vec![
            api.get_opt(name)
                .await
                .with_context(|| format!("reading the WasmPlugin from {server}"))?
                .ok_or_else(|| {
                    anyhow::anyhow!("no WasmPlugin {namespace}/{name} (wasmop push creates it)")
                })?,
        ],
        None => {
            api.list(&ListParams::default())
                .await
                .with_context(|| format!("listing WasmPlugins in {namespace} on {server}"))?
                .items
        }
    };
    if plugins.is_empty() {
        println!("no WasmPlugins in namespace {namespace} (wasmop push creates one)");
        return Ok(true);
    }
    let hosts = scrape_hosts(&client, args).await;
    let mut healthy = hosts.iter().all(|h| h.samples.is_ok());
    let mut out = String::new();
    for wp in &plugins {
        let objects = count_primaries(&client, wp).await;
        healthy &= is_ready(wp);
        out.push_str(&describe(wp, objects, &hosts));
        out.push('\n');
    }
    print!("{out}");
    Ok(healthy)
}

/// One host replica's metrics, or why they could not be read.
#[derive(Debug)]
pub(crate) struct HostMetrics {
    /// The pod's name, or the URL given.
    pub name: String,
    pub samples: Result<Vec<Sample>, String>,
}

/// One sample of the OpenMetrics text: a metric name, its labels and its value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

async fn scrape_hosts(client: &kube::Client, args: &StatusArgs) -> Vec<HostMetrics> {
    if !args.metrics.is_empty() {
        let mut hosts = Vec::new();
        for url in &args.metrics {
            let samples = fetch_url(url).await.and_then(|text| parse(&text));
            hosts.push(HostMetrics {
                name: url.clone(),
                samples,
            });
        }
        return hosts;
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), &args.host_namespace);
    let list = match pods
        .list(&ListParams::default().labels(&args.host_selector))
        .await
    {
        Ok(list) => list.items,
        Err(e) => {
            return vec![HostMetrics {
                name: format!("pods {} in {}", args.host_selector, args.host_namespace),
                samples: Err(format!("cannot list the host's pods: {e}")),
            }];
        }
    };
    let mut hosts = Vec::new();
    for pod in list {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let samples = match metrics_port(&pod) {
            None => Err("the pod declares no container port named http".to_owned()),
            Some(port) => {
                let path = format!(
                    "/api/v1/namespaces/{}/pods/{name}:{port}/proxy/metrics",
                    args.host_namespace
                );
                match http::Request::get(&path).body(Vec::new()) {
                    Ok(request) => client
                        .request_text(request)
                        .await
                        .map_err(|e| format!("through the pod proxy: {e}"))
                        .and_then(|text| parse(&text)),
                    Err(e) => Err(e.to_string()),
                }
            }
        };
        hosts.push(HostMetrics { name, samples });
    }
    if hosts.is_empty() {
        hosts.push(HostMetrics {
            name: format!("pods {} in {}", args.host_selector, args.host_namespace),
            samples: Err("no host pod found (is the host deployed there? a host run elsewhere: --metrics URL)".to_owned()),
        });
    }
    hosts
}

/// The port of the host container's `http` port (its `--listen`).
fn metrics_port(pod: &Pod) -> Option<i32> {
    pod.spec.as_ref()?.containers.iter().find_map(|c| {
        c.ports
            .as_ref()?
            .iter()
            .find(|p| p.name.as_deref() == Some("http"))
            .map(|p| p.container_port)
    })
}

/// GETs `url` (`http://HOST:PORT/metrics`) with kube's own HTTP client (hyper on rustls,
/// the one the host reaches the API server with), pointed at the host instead.
async fn fetch_url(url: &str) -> Result<String, String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
    let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
        return Err(format!("{url}: not an http:// or https:// URL"));
    };
    let base = format!("{scheme}://{authority}")
        .parse()
        .map_err(|e| format!("{url}: {e}"))?;
    let mut config = kube::Config::new(base);
    config.read_timeout = Some(std::time::Duration::from_secs(10));
    let client = kube::Client::try_from(config).map_err(|e| format!("{url}: {e}"))?;
    let path = uri.path_and_query().map_or("/metrics", |p| p.as_str());
    let request = http::Request::get(path)
        .body(Vec::new())
        .map_err(|e| format!("{url}: {e}"))?;
    client
        .request_text(request)
        .await
        .map_err(|e| format!("{url}: {e}"))
}

/// The samples of an OpenMetrics (or Prometheus) text exposition; comments skipped.
pub(crate) fn parse(text: &str) -> Result<Vec<Sample>, String> {
    let mut samples = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        samples
            .push(parse_line(line).ok_or_else(|| format!("line {}: cannot read `{line}`", n + 1))?);
    }
    Ok(samples)
}

fn parse_line(line: &str) -> Option<Sample> {
    let name_end = line.find(['{', ' '])?;
    let name = line[..name_end].to_owned();
    let mut labels = BTreeMap::new();
    let mut rest = &line[name_end..];
    if let Some(inner) = rest.strip_prefix('{') {
        let mut chars = inner.char_indices();
        let mut key = String::new();
        loop {
            let (i, c) = chars.next()?;
            match c {
                '}' => {
                    rest = &inner[i + 1..];
                    break;
                }
                ',' | ' ' => {}
                '=' => {
                    if chars.next()?.1 != '"' {
                        return None;
                    }
                    let mut value = String::new();
                    loop {
                        match chars.next()?.1 {
                            '"' => break,
                            '\\' => match chars.next()?.1 {
                                'n' => value.push('\n'),
                                other => value.push(other),
                            },
                            other => value.push(other),
                        }
                    }
                    labels.insert(std::mem::take(&mut key), value);
                }
                other => key.push(other),
            }
        }
    }
    // The value, then an optional timestamp.
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some(Sample {
        name,
        labels,
        value,
    })
}

/// The sum over `hosts` of `metric`'s samples whose labels include `plugin`, grouped by the
/// label `by` (`""` for one total).
fn sum_by(hosts: &[HostMetrics], metric: &str, plugin: &str, by: &str) -> BTreeMap<String, f64> {
    let mut sums = BTreeMap::new();
    for host in hosts {
        for s in host.samples.iter().flatten() {
            if s.name == metric && s.labels.get("plugin").map(String::as_str) == Some(plugin) {
                let key = s.labels.get(by).cloned().unwrap_or_default();
                *sums.entry(key).or_insert(0.0) += s.value;
            }
        }
    }
    sums
}

fn is_ready(wp: &WasmPlugin) -> bool {
    wp.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    })
}

/// How many primary objects of the plugin's kind the cluster holds; an error as text.
async fn count_primaries(
    client: &kube::Client,
    wp: &WasmPlugin,
) -> Result<(String, usize), String> {
    let kind = wp
        .status
        .as_ref()
        .and_then(|s| s.primary_kind.clone())
        .ok_or("the host has not loaded it yet")?;
    let gvk = parse_kind(&kind).ok_or_else(|| format!("cannot read the primary kind `{kind}`"))?;
    let (resource, _) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .map_err(|e| format!("{kind}: {e}"))?;
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let mut count = 0;
    let mut params = ListParams::default().limit(500);
    loop {
        let page = api
            .list_metadata(&params)
            .await
            .map_err(|e| format!("listing {}: {e}", resource.plural))?;
        count += page.items.len();
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(next) => params = params.continue_token(&next),
            None => break,
        }
    }
    Ok((plural_label(&resource), count))
}

fn plural_label(resource: &ApiResource) -> String {
    if resource.group.is_empty() {
        resource.plural.clone()
    } else {
        format!("{}.{}", resource.plural, resource.group)
    }
}

/// `Kind.group/version` (the WasmPlugin's `status.primaryKind`; the core group is empty).
pub(crate) fn parse_kind(text: &str) -> Option<GroupVersionKind> {
    let (kind, rest) = text.split_once('.')?;
    let (group, version) = rest.rsplit_once('/')?;
    (!kind.is_empty() && !version.is_empty()).then(|| GroupVersionKind::gvk(group, version, kind))
}

fn short(digest: &str) -> &str {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    &hex[..hex.len().min(12)]
}

/// A count as text: a whole number without a fraction (and no `-0` from an empty sum).
fn number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{}", value as i64)
    } else {
        format!("{value}")
    }
}

/// The text `wasmop status` prints for one WasmPlugin.
pub(crate) fn describe(
    wp: &WasmPlugin,
    objects: Result<(String, usize), String>,
    hosts: &[HostMetrics],
) -> String {
    let mut out = String::new();
    let name = format!(
        "{}/{}",
        wp.metadata.namespace.as_deref().unwrap_or_default(),
        wp.metadata.name.as_deref().unwrap_or_default()
    );
    let status = wp.status.clone().unwrap_or_default();
    let ready = status.conditions.iter().find(|c| c.type_ == "Ready");
    let _ = writeln!(
        out,
        "WasmPlugin {name}: {}",
        match ready {
            Some(c) if c.status == "True" => "Ready".to_owned(),
            Some(c) => format!("not Ready ({}: {})", c.reason, c.message),
            None => "not loaded yet".to_owned(),
        }
    );
    let plugin = status.plugin_name.clone().unwrap_or_default();
    let source = match (&wp.spec.oci, &wp.spec.config_map) {
        (Some(oci), _) => format!("oci {}", oci.reference),
        (None, Some(cm)) => format!("configMap {}", cm.name),
        (None, None) => "no source".to_owned(),
    };
    let _ = writeln!(
        out,
        "  active      {} {}  {}  ({source})",
        if plugin.is_empty() { "-" } else { &plugin },
        status.plugin_version.as_deref().unwrap_or("-"),
        status.digest.as_deref().map(short).unwrap_or("-"),
    );
    match (&status.candidate, &status.rollout) {
        (Some(c), rollout) => {
            let mut line = format!("{} {}  {}", c.version, short(&c.digest), c.mode);
            if let Some(p) = c.canary_percent {
                let _ = write!(line, " {p}%");
            }
            if let Some(r) = rollout {
                let _ = write!(
                    line,
                    ": {} decisions, agreement {} ({} agree, {} diverge, {} faults)",
                    r.decisions, r.agreement, r.agreements, r.divergences, r.faults
                );
            }
            let _ = writeln!(out, "  candidate   {line}");
        }
        (None, _) if wp.spec.rollout.is_some() => {
            let _ = writeln!(out, "  candidate   pushed, not loaded yet");
        }
        (None, _) => {
            let _ = writeln!(out, "  candidate   none");
        }
    }
    let _ = writeln!(
        out,
        "  objects     {}",
        match objects {
            Ok((resource, n)) => format!("{n} {resource}"),
            Err(e) => format!("unknown: {e}"),
        }
    );
    if plugin.is_empty() {
        return out;
    }
    let read: Vec<&HostMetrics> = hosts.iter().filter(|h| h.samples.is_ok()).collect();
    for h in hosts {
        if let Err(e) = &h.samples {
            let _ = writeln!(out, "  host        {}: metrics not read: {e}", h.name);
        }
    }
    if read.is_empty() {
        return out;
    }
    let total =
        |metric: &str| -> String { number(sum_by(hosts, metric, &plugin, "").values().sum()) };
    let _ = writeln!(
        out,
        "  last minute {} reconciles, {} errors",
        total("wasmop_reconciles_last_minute"),
        total("wasmop_reconcile_errors_last_minute"),
    );
    let refused = sum_by(hosts, "wasmop_rejected_plans_total", &plugin, "rule");
    let _ = writeln!(
        out,
        "  refused     {}",
        if refused.is_empty() {
            "no plan since the hosts started".to_owned()
        } else {
            let rules: Vec<String> = refused
                .iter()
                .map(|(rule, n)| format!("{rule} {}", number(*n)))
                .collect();
            format!(
                "{} (plans, by rule, since the hosts started)",
                rules.join(", ")
            )
        }
    );
    let shares: Vec<String> = read
        .iter()
        .filter_map(|h| {
            let samples = h.samples.as_ref().ok()?;
            samples
                .iter()
                .find(|s| {
                    s.name == "wasmop_shard_objects" && s.labels.get("plugin") == Some(&plugin)
                })
                .map(|s| format!("{} {}", h.name, number(s.value)))
        })
        .collect();
    if !shares.is_empty() {
        let _ = writeln!(out, "  shards      {}", shares.join(", "));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::wasmplugin::{
        CandidateStatus, ConfigMapSource, RolloutStatus, WasmPluginSpec, WasmPluginStatus,
    };

    fn host(name: &str, text: &str) -> HostMetrics {
        HostMetrics {
            name: name.to_owned(),
            samples: parse(text),
        }
    }

    #[test]
    fn reads_names_labels_escapes_and_values() {
        let text = "# HELP x y\n# TYPE x counter\nwasmop_a_total{plugin=\"p\",rule=\"say \\\"no\\\", twice\"} 3\nwasmop_b 1.5\nwasmop_c{} +Inf\n# EOF\n";
        let samples = parse(text).unwrap();
        assert_eq!(samples.len(), 3);
        assert_eq!(samples[0].name, "wasmop_a_total");
        assert_eq!(samples[0].labels["plugin"], "p");
        assert_eq!(samples[0].labels["rule"], "say \"no\", twice");
        assert_eq!(samples[0].value, 3.0);
        assert_eq!(samples[1].value, 1.5);
        assert!(samples[1].labels.is_empty());
        assert_eq!(samples[2].value, f64::INFINITY);
        let bad = parse("wasmop_a{plugin=\"p} 3\n").unwrap_err();
        assert!(bad.contains("line 1"), "{bad}");
    }

    #[test]
    fn reads_the_primary_kind_as_the_status_writes_it() {
        let gvk = parse_kind("PodReplica.app.example.com/v1alpha1").unwrap();
        assert_eq!(
            (gvk.group.as_str(), gvk.version.as_str(), gvk.kind.as_str()),
            ("app.example.com", "v1alpha1", "PodReplica")
        );
        let core = parse_kind("ConfigMap./v1").unwrap();
        assert_eq!((core.group.as_str(), core.kind.as_str()), ("", "ConfigMap"));
        assert!(parse_kind("PodReplica").is_none());
    }

    fn plugin() -> WasmPlugin {
        let mut wp = WasmPlugin::new(
            "podreplica",
            WasmPluginSpec {
                config_map: Some(ConfigMapSource {
                    name: "podreplica-wasm".into(),
                    key: None,
                }),
                sha256: None,
                oci: None,
                rollout: None,
                record: None,
            },
        );
        wp.metadata.namespace = Some("default".into());
        wp.status = Some(WasmPluginStatus {
            plugin_name: Some("podreplica".into()),
            plugin_version: Some("0.1.0".into()),
            digest: Some(format!("sha256:{}", "ab".repeat(32))),
            conditions: vec![crate::registry::wasmplugin::Condition {
                type_: "Ready".into(),
                status: "True".into(),
                reason: "Loaded".into(),
                message: String::new(),
                last_transition_time: String::new(),
                observed_generation: None,
            }],
            candidate: Some(CandidateStatus {
                version: "0.2.0".into(),
                digest: format!("sha256:{}", "cd".repeat(32)),
                mode: "Shadow".into(),
                canary_percent: None,
            }),
            rollout: Some(RolloutStatus {
                decisions: 10,
                agreements: 9,
                divergences: 1,
                agreement: "90.0%".into(),
                ..Default::default()
            }),
            ..Default::default()
        });
        wp
    }

    #[test]
    fn sums_the_replicas_and_shows_each_shard() {
        let a = "wasmop_reconciles_last_minute{plugin=\"podreplica\"} 7\nwasmop_reconcile_errors_last_minute{plugin=\"podreplica\"} 1\nwasmop_rejected_plans_total{plugin=\"podreplica\",rule=\"undeclared\"} 2\nwasmop_shard_objects{plugin=\"podreplica\"} 507\nwasmop_reconciles_last_minute{plugin=\"other\"} 100\n";
        let b = "wasmop_reconciles_last_minute{plugin=\"podreplica\"} 5\nwasmop_rejected_plans_total{plugin=\"podreplica\",rule=\"undeclared\"} 1\nwasmop_rejected_plans_total{plugin=\"podreplica\",rule=\"namespace\"} 4\nwasmop_shard_objects{plugin=\"podreplica\"} 493\n";
        let hosts = [host("wasmop-0", a), host("wasmop-1", b)];
        let text = describe(
            &plugin(),
            Ok(("podreplicas.app.example.com".into(), 1000)),
            &hosts,
        );
        assert!(
            text.starts_with("WasmPlugin default/podreplica: Ready\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "  active      podreplica 0.1.0  abababababab  (configMap podreplica-wasm)"
            ),
            "{text}"
        );
        assert!(
            text.contains("  candidate   0.2.0 cdcdcdcdcdcd  Shadow: 10 decisions, agreement 90.0% (9 agree, 1 diverge, 0 faults)"),
            "{text}"
        );
        assert!(
            text.contains("  objects     1000 podreplicas.app.example.com"),
            "{text}"
        );
        assert!(
            text.contains("  last minute 12 reconciles, 1 errors"),
            "{text}"
        );
        assert!(
            text.contains("  refused     namespace 4, undeclared 3 "),
            "{text}"
        );
        assert!(
            text.contains("  shards      wasmop-0 507, wasmop-1 493"),
            "{text}"
        );
    }

    #[test]
    fn says_which_host_could_not_be_read_and_what_is_known_without_it() {
        let mut wp = plugin();
        wp.status.as_mut().unwrap().conditions[0].status = "False".into();
        wp.status.as_mut().unwrap().conditions[0].reason = "Trapped".into();
        wp.status.as_mut().unwrap().conditions[0].message = "info() trapped".into();
        let hosts = [HostMetrics {
            name: "wasmop-0".into(),
            samples: Err("through the pod proxy: 403".into()),
        }];
        let text = describe(&wp, Err("the host has not loaded it yet".into()), &hosts);
        assert!(
            text.contains("not Ready (Trapped: info() trapped)"),
            "{text}"
        );
        assert!(
            text.contains("objects     unknown: the host has not loaded it yet"),
            "{text}"
        );
        assert!(
            text.contains("host        wasmop-0: metrics not read: through the pod proxy: 403"),
            "{text}"
        );
        assert!(!text.contains("last minute"), "{text}");
    }
}
