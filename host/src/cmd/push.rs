//! `wasmop push NAME FILE.wasm`: uploads a plugin version into the cluster (a ConfigMap
//! with the compressed bytes and a `WasmPlugin` pointing at them), then waits for the
//! host's verdict. `wasmop push NAME oci://REGISTRY/REPO:TAG` points the WasmPlugin at an
//! artifact in a registry instead (`wasmop publish` puts it there); the host pulls it.
//! With `--shadow` or `--canary P` the version becomes the WasmPlugin's candidate beside
//! the active one instead.
//!
//! Two ConfigMaps per plugin, `wasmplugin-NAME` and `wasmplugin-NAME-alt`: a push writes the
//! one the active version does not use, so the bytes the host may need again (after a
//! restart) are never overwritten, also once a candidate was promoted.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use serde_json::json;

use crate::cmd::target::{Target, wait_for_verdict};
use crate::registry::bytes::pack;
use crate::registry::wasmplugin::{DEFAULT_KEY, WasmPlugin};
use crate::runtime::validate::is_dns_label;

/// Arguments of `wasmop push`.
#[derive(Debug, clap::Args)]
pub struct PushArgs {
    /// Name of the WasmPlugin (a DNS label; the ConfigMap is `wasmplugin-NAME`).
    pub name: String,
    /// The plugin component: a `.wasm` file (uploaded in a ConfigMap, at most ~1 MB
    /// compressed) or `oci://REGISTRY/REPOSITORY:TAG[@sha256:DIGEST]` (pulled by the host).
    pub source: String,
    /// OCI: the `kubernetes.io/dockerconfigjson` Secret (in the WasmPlugin's namespace)
    /// with the registry's credentials.
    #[arg(long, value_name = "SECRET")]
    pub pull_secret: Option<String>,
    /// OCI: the host talks plain HTTP to the registry.
    #[arg(long)]
    pub insecure: bool,
    /// OCI: follow the tag, resolving it again every this many seconds (at least 5).
    #[arg(long, value_name = "SECONDS")]
    pub poll_seconds: Option<u64>,
    /// OCI: the ConfigMap of PEM public keys one of which must have signed the artifact.
    #[arg(long, value_name = "CONFIGMAP", conflicts_with = "public_keys_secret")]
    pub public_keys: Option<String>,
    /// OCI: the same, from a Secret.
    #[arg(long, value_name = "SECRET")]
    pub public_keys_secret: Option<String>,
    /// Where, and how long to wait.
    #[command(flatten)]
    pub target: Target,
    /// Push as the candidate in shadow: it decides beside the active version on every
    /// reconcile, nothing it plans is carried out, the two are compared.
    #[arg(long, conflicts_with = "canary")]
    pub shadow: bool,
    /// Push as a canary deciding (and acting) for this percentage of the objects.
    #[arg(long, value_name = "PERCENT", value_parser = clap::value_parser!(u8).range(0..=100))]
    pub canary: Option<u8>,
    /// With --shadow/--canary: the host promotes the candidate after this many decisions
    /// in a row without divergence (shadow) or fault (canary).
    #[arg(long, value_name = "K")]
    pub promote_after: Option<u64>,
    /// With --shadow/--canary: the host aborts the candidate once this percentage of its
    /// decisions were faults.
    #[arg(long, value_name = "PERCENT", value_parser = clap::value_parser!(u8).range(0..=100))]
    pub abort_fault_percent: Option<u8>,
    /// Candidate decisions before the fault rate is judged (default 10).
    #[arg(long, value_name = "N")]
    pub abort_min_decisions: Option<u64>,
}

impl PushArgs {
    fn is_candidate(&self) -> bool {
        self.shadow || self.canary.is_some()
    }

    /// The `oci` source the arguments name, if the source is an `oci://` reference.
    fn oci(&self) -> anyhow::Result<Option<serde_json::Value>> {
        let Some(reference) = self.source.strip_prefix("oci://") else {
            if self.pull_secret.is_some()
                || self.insecure
                || self.poll_seconds.is_some()
                || self.public_keys.is_some()
                || self.public_keys_secret.is_some()
            {
                anyhow::bail!(
                    "--pull-secret, --insecure, --poll-seconds and --public-keys go with an oci:// source"
                );
            }
            return Ok(None);
        };
        crate::oci::remote::parse(reference)?;
        let mut oci = json!({"reference": reference});
        if let Some(s) = &self.pull_secret {
            oci["pullSecret"] = json!(s);
        }
        if self.insecure {
            oci["insecure"] = json!(true);
        }
        if let Some(p) = self.poll_seconds {
            if p < 5 {
                anyhow::bail!("--poll-seconds is at least 5");
            }
            oci["pollSeconds"] = json!(p);
        }
        match (&self.public_keys, &self.public_keys_secret) {
            (Some(cm), _) => oci["publicKeys"] = json!({"configMap": cm}),
            (_, Some(secret)) => oci["publicKeys"] = json!({"secret": secret}),
            _ => {}
        }
        Ok(Some(oci))
    }
}

/// The source fields of the spec `wp` runs, as they are (for a push that only adds a
/// candidate).
fn active_source(wp: &WasmPlugin) -> serde_json::Value {
    let mut spec = serde_json::Map::new();
    if let Some(cm) = &wp.spec.config_map {
        spec.insert("configMap".into(), json!(cm));
    }
    if let Some(d) = &wp.spec.sha256 {
        spec.insert("sha256".into(), json!(d));
    }
    if let Some(o) = &wp.spec.oci {
        spec.insert("oci".into(), json!(o));
    }
    serde_json::Value::Object(spec)
}

/// The ConfigMap a push writes: the one of the two that the active version does not use.
pub fn config_map_for(name: &str, current: Option<&WasmPlugin>) -> String {
    let main = format!("wasmplugin-{name}");
    match current {
        Some(wp) if wp.spec.config_map.as_ref().is_some_and(|c| c.name == main) => {
            format!("{main}-alt")
        }
        _ => main,
    }
}

/// Runs `wasmop push`; returns whether the host accepted the version (true with `--no-wait`).
pub async fn run(args: &PushArgs) -> anyhow::Result<bool> {
    if !is_dns_label(&args.name) {
        anyhow::bail!(
            "`{}` is not a valid name: lowercase letters, digits and '-', at most 63",
            args.name
        );
    }
    if !args.is_candidate()
        && (args.promote_after.is_some()
            || args.abort_fault_percent.is_some()
            || args.abort_min_decisions.is_some())
    {
        anyhow::bail!(
            "--promote-after, --abort-fault-percent and --abort-min-decisions go with --shadow or --canary"
        );
    }
    let oci = args.oci()?;
    let crate::cmd::target::Connection {
        client, namespace, ..
    } = args.target.cluster.connect().await?;
    let wps: Api<WasmPlugin> = Api::namespaced(client.clone(), &namespace);
    let current = wps
        .get_opt(&args.name)
        .await
        .context("reading the WasmPlugin")?;
    if args.is_candidate() && current.is_none() {
        anyhow::bail!(
            "WasmPlugin {}/{} does not exist: a candidate goes beside an active version (push one without --shadow/--canary first)",
            namespace,
            args.name
        );
    }
    // The source of the pushed version: an OCI reference, or a ConfigMap written now.
    let (source, digest, described) = match oci {
        Some(oci) => (json!({"oci": oci}), None, args.source.clone()),
        None => {
            let file = PathBuf::from(&args.source);
            let component =
                std::fs::read(&file).with_context(|| format!("{}: cannot read", file.display()))?;
            let (compressed, digest) =
                pack(&component).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            let cm_name = config_map_for(&args.name, current.as_ref());
            let cm = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(cm_name.clone()),
                    namespace: Some(namespace.clone()),
                    labels: Some(BTreeMap::from([(
                        "app.kubernetes.io/managed-by".into(),
                        "wasmop".into(),
                    )])),
                    ..ObjectMeta::default()
                },
                binary_data: Some(BTreeMap::from([(
                    DEFAULT_KEY.to_string(),
                    ByteString(compressed.clone()),
                )])),
                ..ConfigMap::default()
            };
            let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
            cms.patch(
                &cm_name,
                &PatchParams::apply("wasmop-push").force(),
                &Patch::Apply(&cm),
            )
            .await
            .context("writing the ConfigMap")?;
            let described = format!(
                "{} ({} bytes, {} compressed)",
                file.display(),
                component.len(),
                compressed.len()
            );
            (
                json!({"configMap": {"name": cm_name, "key": DEFAULT_KEY}, "sha256": digest}),
                Some(digest),
                described,
            )
        }
    };
    let pp = PatchParams::apply("wasmop-push").force();
    let spec = match current.as_ref().filter(|_| args.is_candidate()) {
        // The active version stays; the rollout names the candidate.
        Some(wp) => {
            let mut rollout = source;
            rollout["strategy"] = json!(if args.shadow { "Shadow" } else { "Canary" });
            for (key, value) in [
                ("canaryPercent", args.canary.map(u64::from)),
                ("promoteAfter", args.promote_after),
                ("abortFaultPercent", args.abort_fault_percent.map(u64::from)),
                ("abortMinDecisions", args.abort_min_decisions),
            ] {
                if let Some(v) = value {
                    rollout[key] = json!(v);
                }
            }
            let mut spec = active_source(wp);
            spec["rollout"] = rollout;
            spec
        }
        None => source,
    };
    let mut spec = spec;
    // The recording switch stays as it was.
    if let Some(on) = current.as_ref().and_then(|wp| wp.spec.record) {
        spec["record"] = json!(on);
    }
    let wp = json!({"apiVersion": "wasmop.dev/v1alpha1", "kind": "WasmPlugin",
        "metadata": {"name": args.name, "namespace": namespace}, "spec": spec});
    let mut written = wps
        .patch(&args.name, &pp, &Patch::Apply(&wp))
        .await
        .context("writing the WasmPlugin")?;
    // A plain push ends a rollout (also one another field manager started).
    if !args.is_candidate() && written.spec.rollout.is_some() {
        written = crate::registry::promotion::patch_spec(
            &wps,
            &args.name,
            &crate::registry::promotion::abort_patch(),
        )
        .await
        .context("ending the rollout")?;
    }
    let role = match (args.shadow, args.canary) {
        (true, _) => "the shadow candidate of ".to_string(),
        (_, Some(p)) => format!("a {p}% canary of "),
        _ => String::new(),
    };
    println!(
        "pushed {described} as {role}WasmPlugin {}/{}{}",
        namespace,
        args.name,
        digest
            .as_deref()
            .map(|d| format!(" with {d}"))
            .unwrap_or_default()
    );
    if args.target.no_wait {
        return Ok(true);
    }
    let generation = written.metadata.generation;
    let candidate = args.is_candidate();
    wait_for_verdict(wps, &args.name, &namespace, &args.target, |wp| {
        if candidate {
            candidate_verdict(wp, generation, digest.as_deref())
        } else {
            verdict(wp, generation, digest.as_deref())
        }
    })
    .await
}

/// The condition `type_` of the status of `generation`, once the host has written it.
fn condition_of<'a>(
    wp: &'a WasmPlugin,
    generation: Option<i64>,
    type_: &str,
) -> Option<(
    &'a crate::registry::WasmPluginStatus,
    &'a crate::registry::wasmplugin::Condition,
)> {
    let status = wp
        .status
        .as_ref()
        .filter(|s| s.observed_generation == generation)?;
    let c = status
        .conditions
        .iter()
        .find(|c| c.type_ == type_ && c.observed_generation == generation)?;
    Some((status, c))
}

/// The yes (when `runs` says the pushed bytes run) or no of a condition, with the line to
/// print (`prefix` names what it is about).
fn answer(
    c: &crate::registry::wasmplugin::Condition,
    runs: bool,
    prefix: &str,
) -> Option<(bool, String)> {
    if c.status == "True" && runs {
        return Some((true, format!("{prefix}accepted: {}", c.message)));
    }
    (c.status == "False").then(|| {
        let what = match c.reason.as_str() {
            "PermissionsMissing" => "loaded, not active until an admin grants its permissions",
            "HostCannotWatch" | "KindNotServed" => {
                "loaded, not active until the host can watch what it watches"
            }
            _ => "refused",
        };
        (
            false,
            format!("{prefix}{what}: {}: {}", c.reason, c.message),
        )
    })
}

/// The host's verdict on the candidate of `generation`, if it has written one: loaded
/// (`digest` decides beside the active version) or refused, and the line to print.
pub fn candidate_verdict(
    wp: &WasmPlugin,
    generation: Option<i64>,
    digest: Option<&str>,
) -> Option<(bool, String)> {
    let (status, c) = condition_of(wp, generation, "Candidate")?;
    let loaded = match digest {
        Some(d) => status.candidate.as_ref().map(|c| c.digest.as_str()) == Some(d),
        None => status.candidate.is_some(),
    };
    answer(c, loaded, "candidate ")
}

/// The host's verdict on `generation` of the WasmPlugin, if it has written one: accepted
/// (with the pushed `digest` running, when the push knows it) or refused, and the line to
/// print.
pub fn verdict(
    wp: &WasmPlugin,
    generation: Option<i64>,
    digest: Option<&str>,
) -> Option<(bool, String)> {
    let (status, c) = condition_of(wp, generation, "Ready")?;
    let runs = digest.is_none_or(|d| status.digest.as_deref() == Some(d));
    answer(c, runs, "")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wp(cm: &str, conditions: serde_json::Value, candidate: Option<&str>) -> WasmPlugin {
        let mut status = json!({"observedGeneration": 2, "conditions": conditions});
        if let Some(d) = candidate {
            status["candidate"] = json!({"version": "v2", "digest": d, "mode": "Shadow"});
        }
        serde_json::from_value(
            json!({"apiVersion": "wasmop.dev/v1alpha1", "kind": "WasmPlugin",
            "metadata": {"name": "p", "namespace": "d", "generation": 2},
            "spec": {"configMap": {"name": cm}, "sha256": format!("sha256:{}", "a".repeat(64))},
            "status": status}),
        )
        .unwrap()
    }

    #[test]
    fn a_push_writes_the_config_map_the_active_version_does_not_use() {
        assert_eq!(config_map_for("p", None), "wasmplugin-p");
        let on_main = wp("wasmplugin-p", json!([]), None);
        assert_eq!(config_map_for("p", Some(&on_main)), "wasmplugin-p-alt");
        let on_alt = wp("wasmplugin-p-alt", json!([]), None);
        assert_eq!(config_map_for("p", Some(&on_alt)), "wasmplugin-p");
    }

    #[test]
    fn missing_permissions_are_no_refusal_but_a_wait_for_an_admin() {
        let cond = json!([{"type": "Ready", "status": "False", "reason": "PermissionsMissing",
            "message": "lacks pods [create]", "lastTransitionTime": "2026-01-01T00:00:00Z",
            "observedGeneration": 2}]);
        let waiting = wp("wasmplugin-p", cond, None);
        assert_eq!(
            verdict(&waiting, Some(2), Some("sha256:new")),
            Some((
                false,
                "loaded, not active until an admin grants its permissions: PermissionsMissing: lacks pods [create]".into()
            ))
        );
    }

    #[test]
    fn the_candidate_verdict_needs_its_condition_and_digest() {
        let cond = |status: &str, reason: &str| {
            json!([{"type": "Candidate", "status": status, "reason": reason, "message": "m",
                "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 2}])
        };
        let loaded = wp("wasmplugin-p", cond("True", "Loaded"), Some("sha256:new"));
        assert_eq!(
            candidate_verdict(&loaded, Some(2), Some("sha256:new")),
            Some((true, "candidate accepted: m".into()))
        );
        // Another candidate's status, or an older generation, is no verdict yet.
        assert_eq!(
            candidate_verdict(&loaded, Some(2), Some("sha256:other")),
            None
        );
        assert_eq!(
            candidate_verdict(&loaded, Some(3), Some("sha256:new")),
            None
        );
        let refused = wp(
            "wasmplugin-p",
            cond("False", "CandidateWatchesDifferently"),
            None,
        );
        assert_eq!(
            candidate_verdict(&refused, Some(2), Some("sha256:new")),
            Some((
                false,
                "candidate refused: CandidateWatchesDifferently: m".into()
            ))
        );
    }
}
