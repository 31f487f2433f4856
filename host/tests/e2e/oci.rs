//! End to end: plugins from an OCI registry. A real registry on loopback (distribution 2.8
//! with TLS from a test CA and htpasswd auth) holds PodReplica v1 and v2 published by
//! `wasmop publish` (signed with a key made by openssl); a WasmPlugin points at a tag:
//! - a pull secret with a wrong password is refused with a clear reason (condition, Event,
//!   metric) and the host tries again once the Secret is fixed;
//! - v1 runs from its tag, the status names the manifest digest; repointing to v2 swaps;
//! - a followed tag moved (by another tool: curl) to a build that traps is refused and v2
//!   keeps deciding;
//! - under `publicKeys` an unsigned artifact and one signed by another key are refused
//!   naming the digest and the key; the signed one runs and the status names its signer;
//! - the registry goes away: the running plugin keeps working, and a host restarted with
//!   its warm disk cache (and `--require-signature`) loads v2 without the registry,
//!   compiling nothing;
//! - trust roots are the admin's: on a host with `--trusted-key`, an uploader's own key
//!   named through `publicKeys` is refused (`SignatureUntrusted`), the admin's key narrows,
//!   a signature copied with its artifact into another repository is refused;
//! - plain HTTP needs the host's `--allow-insecure-registries`; a hostile registry (endless
//!   manifest, endless error body, a redirect elsewhere, a `.sig` of 10,000 signatures) is
//!   refused with a reason while v2 keeps deciding and the host's peak memory stays flat.

use std::time::Duration;

use crate::support::hostile_registry::HostileRegistry;
use crate::support::registry::{Registry, keypair};
use crate::support::uploads::*;
use crate::support::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject};
use serde_json::json;

fn pr(name: &str, size: i64) -> serde_json::Value {
    json!({"apiVersion": "app.example.com/v1alpha1", "kind": "PodReplica",
           "metadata": {"name": name, "namespace": "default"}, "spec": {"size": size}})
}

async fn ready(client: &kube::Client) -> Option<(String, String, String, serde_json::Value)> {
    ready_condition_in(client, "default", "podreplica").await
}

/// Waits for the Ready condition with `reason`; returns its message and the status.
async fn wait_reason(
    client: &kube::Client,
    reason: &str,
    within: u64,
) -> (String, serde_json::Value) {
    eventually(
        Duration::from_secs(within),
        &format!("WasmPlugin podreplica Ready reason {reason}"),
        || async {
            let (_, r, m, s) = ready(client).await?;
            (r == reason).then_some((m, s))
        },
    )
    .await
}

/// Waits until PodReplica `name` has `size` live pods and a Ready message with `tag` (`""`:
/// v1's message, which names no version).
async fn converged_by(client: &kube::Client, name: &str, size: usize, tag: &str) {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &podreplica_resource());
    eventually(
        Duration::from_secs(120),
        &format!("{name} with {size} pods decided by {tag:?}"),
        || async {
            let o = api.get(name).await.ok()?;
            let msg = o.data["status"]["conditions"][0]["message"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let by = if tag.is_empty() {
                !msg.contains("(v")
            } else {
                msg.ends_with(tag)
            };
            by.then_some(())?;
            converged(client, o.metadata.uid.as_deref()?, size).await
        },
    )
    .await;
}

/// `wasmop push podreplica REFERENCE` with the pull secret `regcred` and the keys of
/// ConfigMap `keys`: whether the verdict was Ready, and what the command printed.
fn push_with_keys(cluster: &Cluster, reference: &str, keys: &str) -> (bool, String) {
    wasmop_on(
        cluster,
        &[
            "push",
            "podreplica",
            reference,
            "--pull-secret",
            "regcred",
            "--public-keys",
            keys,
        ],
    )
}

/// How many times the registry answered a HEAD of `repo:tag`'s manifest (its access log):
/// how a host resolves a tag it follows.
fn tag_resolutions(reg: &Registry, repo: &str, tag: &str) -> usize {
    let request = format!("\"HEAD /v2/{repo}/manifests/{tag} HTTP/");
    std::fs::read_to_string(reg.state.join("logs/registry.log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| Some(l.split_once(&request)?.1.split_once("\" ")?.1))
        .filter(|answer| answer.starts_with("200 "))
        .count()
}

fn metric(host: &Host, prefix: &str) -> u64 {
    let (_, text) = host.http_get("/metrics").unwrap();
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread")]
async fn publish_point_follow_sign_and_outlive_the_registry() {
    let cluster = Cluster::start("oci");
    let mut reg = Registry::start("oci");
    let keys = Scratch::new("keys");
    let (key_a, pub_a) = keypair(&keys.0, "a");
    let (key_b, _) = keypair(&keys.0, "b");
    let dir = plugin_dir();
    let v1 = reg.publish(
        &dir.join("podreplica.wasm"),
        "plugins/podreplica:v1",
        Some(&key_a),
    );
    let v2 = reg.publish(
        &dir.join("podreplica_v2.wasm"),
        "plugins/podreplica:v2",
        Some(&key_a),
    );
    let unsigned = reg.publish(
        &dir.join("podreplica_v2.wasm"),
        "plugins/podreplica:unsigned",
        None,
    );
    let by_b = reg.publish(
        &dir.join("podreplica_v2.wasm"),
        "plugins/podreplica:by-b",
        Some(&key_b),
    );
    reg.publish(
        &dir.join("podreplica_v2.wasm"),
        "plugins/podreplica:stable",
        None,
    );

    cluster.grant(&["podreplica.wasm"]);
    cluster
        .apply_yaml(&std::fs::read_to_string(repo().join("deploy/crds/podreplica.yaml")).unwrap());
    let cache = Scratch::new("cache");
    let ca = reg.ca.to_str().unwrap().to_string();
    let cache_dir = cache.0.to_str().unwrap().to_string();
    let host_args = [
        "--install-crds",
        "--registry-ca",
        &ca,
        "--cache-dir",
        &cache_dir,
    ];
    let mut host = Host::start_deployed(&cluster.kubeconfig, &[], &host_args, &[]);
    let client = cluster.client().await;
    wait_for_crd(&client, &wasmplugin_resource()).await;
    wait_for_crd(&client, &podreplica_resource()).await;

    // A pull secret with a wrong password: refused, said three ways, tried again.
    reg.pull_secret(&cluster, "regcred", "wrong");
    let v1_ref = format!("oci://{}:v1", reg.repo("plugins/podreplica"));
    let (ok, text) = wasmop_on(
        &cluster,
        &["push", "podreplica", &v1_ref, "--pull-secret", "regcred"],
    );
    assert!(!ok, "a wrong password is no verdict of success: {text}");
    assert!(text.contains("RegistryUnauthorized"), "{text}");
    let (message, _) = wait_reason(&client, "RegistryUnauthorized", 30).await;
    assert!(message.contains("401"), "{message}");
    assert!(
        event_notes(&client, "RegistryUnauthorized").await.len() == 1,
        "one Warning Event for the refusal, not one per retry"
    );
    assert_eq!(
        metric(
            &host,
            "wasmop_source_refusals_total{wasmplugin=\"default/podreplica\",source=\"oci\",reason=\"RegistryUnauthorized\"}"
        ),
        1
    );
    // The admin fixes the Secret (no change to the WasmPlugin): the host's retry pulls v1.
    reg.pull_secret(&cluster, "regcred", &reg.user.1.clone());
    let (_, status) = wait_reason(&client, "Loaded", 30).await;
    assert_eq!(status["artifact"]["digest"], v1, "{status}");
    assert_eq!(
        status["artifact"]["reference"],
        v1_ref.trim_start_matches("oci://")
    );
    let columns = String::from_utf8(
        cluster
            .kubectl()
            .args(["get", "wasmplugins", "-n", "default"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(
        columns.contains("ARTIFACT") && columns.contains(&v1),
        "{columns}"
    );
    for i in 0..3 {
        apply(
            &client,
            &podreplica_resource(),
            "default",
            &pr(&format!("oci-{i}"), 2),
        )
        .await
        .unwrap();
    }
    for i in 0..3 {
        converged_by(&client, &format!("oci-{i}"), 2, "").await;
    }

    // Repoint to v2: a swap, as an upload is.
    let v2_ref = format!("oci://{}:v2", reg.repo("plugins/podreplica"));
    let (ok, text) = wasmop_on(
        &cluster,
        &["push", "podreplica", &v2_ref, "--pull-secret", "regcred"],
    );
    assert!(ok, "{text}");
    let (_, status) = wait_reason(&client, "Loaded", 30).await;
    assert_eq!(status["artifact"]["digest"], v2);
    apply(&client, &podreplica_resource(), "default", &pr("oci-0", 3))
        .await
        .unwrap();
    converged_by(&client, "oci-0", 3, "(v2)").await;

    // An OCI candidate in shadow beside v2, promoted by `wasmop promote`: the spec takes its
    // reference; then v2 again.
    let (ok, text) = wasmop_on(
        &cluster,
        &[
            "push",
            "podreplica",
            &v1_ref,
            "--pull-secret",
            "regcred",
            "--shadow",
        ],
    );
    assert!(ok && text.contains("candidate accepted"), "{text}");
    let (ok, text) = wasmop_on(&cluster, &["promote", "podreplica"]);
    assert!(ok, "{text}");
    let (_, status) = wait_reason(&client, "Loaded", 30).await;
    assert_eq!(status["artifact"]["digest"], v1, "{status}");
    assert_eq!(status["pluginVersion"], "0.1.0", "{status}");
    let (ok, text) = wasmop_on(
        &cluster,
        &["push", "podreplica", &v2_ref, "--pull-secret", "regcred"],
    );
    assert!(ok, "{text}");

    // Follow a tag; another tool moves it to a build that traps in info(): refused, v2 stays.
    let stable = format!("oci://{}:stable", reg.repo("plugins/podreplica"));
    let (ok, text) = wasmop_on(
        &cluster,
        &[
            "push",
            "podreplica",
            &stable,
            "--pull-secret",
            "regcred",
            "--poll-seconds",
            "5",
        ],
    );
    assert!(ok, "{text}");
    let trap = plugin_bytes("wasmop_hostile_trap_info.wasm");
    let moved = reg.push_raw("plugins/podreplica", "stable", &trap);
    let (message, status) = wait_reason(&client, "InfoFailed", 30).await;
    assert!(!message.is_empty());
    assert_eq!(status["pluginVersion"], "0.1.0-v2", "{status}");
    // The polls that follow find the tag where it was: the refused build is not loaded
    // again. Two whole polls, as the registry's access log shows them: each resolves the tag
    // (a HEAD of its manifest), and one WasmPlugin's handlings run one after another, so the
    // third resolution after the refusal was written means the two before it have ended.
    let refusals = || host.log_text().matches("reason=InfoFailed").count();
    // (A version whose info() fails has no name of its own: its load counts under its
    // WasmPlugin's.)
    let rejected = "wasmop_plugin_loads_total{plugin=\"podreplica\",result=\"rejected\"}";
    let (before, rejected_before) = (refusals(), metric(&host, rejected));
    let polls_before = tag_resolutions(&reg, "plugins/podreplica", "stable");
    let polls = eventually(
        Duration::from_secs(60),
        "two more polls of the tag ended",
        || {
            let n = tag_resolutions(&reg, "plugins/podreplica", "stable");
            std::future::ready((n >= polls_before + 3).then_some(n - polls_before))
        },
    )
    .await;
    println!(
        "# after the refused tag move: {polls} resolutions of the tag, the refusal logged {before} time(s), {rejected_before} rejected load(s)"
    );
    // Positive first: the refusal was logged and counted, by the names read below.
    assert!(
        before >= 1 && rejected_before >= 1,
        "the refusal logged and counted"
    );
    assert_eq!(
        (refusals(), metric(&host, rejected)),
        (before, rejected_before),
        "the refused build was loaded again at a poll"
    );
    assert_eq!(
        metric(
            &host,
            "wasmop_source_refusals_total{wasmplugin=\"default/podreplica\",source=\"oci\",reason=\"InfoFailed\"}"
        ),
        1,
        "the refusal counted once"
    );
    assert!(
        event_notes(&client, "InfoFailed")
            .await
            .iter()
            .any(|n| n.contains("refused")),
        "an Event for the refused tag move to {moved}"
    );
    apply(&client, &podreplica_resource(), "default", &pr("oci-1", 3))
        .await
        .unwrap();
    converged_by(&client, "oci-1", 3, "(v2)").await;

    // What is not a wasm plugin artifact, or not there, or not what the spec pins: refused
    // with its reason, v2 keeps deciding.
    let index = json!({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "digest": v2, "size": 1, "platform": {"architecture": "wasm", "os": "wasip2"}}]});
    reg.put_manifest(
        "plugins/podreplica",
        "index",
        &index,
        "application/vnd.oci.image.index.v1+json",
    );
    let image = json!({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": reg.put_blob("plugins/podreplica", b"{}"), "size": 2},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": reg.put_blob("plugins/podreplica", b"layer"), "size": 5}]});
    reg.put_manifest(
        "plugins/podreplica",
        "image",
        &image,
        "application/vnd.oci.image.manifest.v1+json",
    );
    let other = Registry::start("oci-other");
    other.publish(&dir.join("podreplica.wasm"), "plugins/podreplica:v1", None);
    let wrong_pin = format!("sha256:{}", "0".repeat(64));
    let wps: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &wasmplugin_resource());
    let merge = |patch: serde_json::Value| {
        let wps = wps.clone();
        async move {
            wps.patch(
                "podreplica",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await
            .unwrap();
        }
    };
    let refusals = [
        (
            format!("oci://{}:missing", reg.repo("plugins/podreplica")),
            None,
            "ArtifactNotFound",
        ),
        (
            format!("oci://{}:index", reg.repo("plugins/podreplica")),
            None,
            "ManifestList",
        ),
        (
            format!("oci://{}:image", reg.repo("plugins/podreplica")),
            None,
            "WrongMediaType",
        ),
        // A registry whose CA the host does not trust.
        (
            format!("oci://{}:v1", other.repo("plugins/podreplica")),
            None,
            "RegistryTls",
        ),
        (v2_ref.clone(), Some(wrong_pin.clone()), "DigestMismatch"),
    ];
    for (reference, pin, reason) in &refusals {
        // The other registry is asked anonymously: its TLS handshake fails first.
        let mut args = vec!["push", "podreplica", reference.as_str()];
        if !reference.contains(&other.address) {
            args.extend(["--pull-secret", "regcred"]);
        }
        let (ok, text) = wasmop_on(&cluster, &args);
        match pin {
            Some(pin) => {
                assert!(ok, "{text}");
                merge(json!({"spec": {"sha256": pin}})).await;
            }
            None => assert!(!ok, "{reference}: {text}"),
        }
        let (message, status) = wait_reason(&client, reason, 30).await;
        println!("# {reason}: {message}");
        assert_eq!(
            status["pluginVersion"], "0.1.0-v2",
            "{reason}: v2 keeps running: {status}"
        );
        assert_eq!(
            event_notes(&client, reason).await.len(),
            1,
            "{reason}: one Warning Event"
        );
        let counted = format!(
            "wasmop_source_refusals_total{{wasmplugin=\"default/podreplica\",source=\"oci\",reason=\"{reason}\"}}"
        );
        assert!(metric(&host, &counted) >= 1, "{reason} counted");
        if pin.is_some() {
            merge(json!({"spec": {"sha256": null}})).await;
        }
    }
    // An unqualified reference: the CLI refuses it, and so does the host when written by hand.
    let (ok, text) = wasmop_on(&cluster, &["push", "podreplica", "oci://podreplica:v2"]);
    assert!(!ok && text.contains("name the registry in full"), "{text}");
    merge(json!({"spec": {"oci": {"reference": "podreplica:v2"}}})).await;
    let (message, _) = wait_reason(&client, "InvalidReference", 30).await;
    assert!(message.contains("name the registry in full"), "{message}");
    drop(other);

    // Plain HTTP: refused by a host not started with --allow-insecure-registries, before
    // anything is sent (nothing listens on port 9).
    let (ok, text) = wasmop_on(
        &cluster,
        &[
            "push",
            "podreplica",
            "oci://127.0.0.1:9/plugins/podreplica:v1",
            "--insecure",
            "--pull-secret",
            "regcred",
        ],
    );
    assert!(!ok, "{text}");
    let (message, status) = wait_reason(&client, "InsecureNotAllowed", 30).await;
    assert!(message.contains("--allow-insecure-registries"), "{message}");
    assert_eq!(status["pluginVersion"], "0.1.0-v2", "{status}");

    // Signatures: the WasmPlugin trusts key A.
    cluster.apply_yaml(
        &serde_json::to_string(&json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "trusted", "namespace": "default"},
            "data": {"a.pub": std::fs::read_to_string(&pub_a).unwrap()}}))
        .unwrap(),
    );
    for (tag, reason, digest) in [
        ("unsigned", "Unsigned", &unsigned),
        ("by-b", "SignatureInvalid", &by_b),
    ] {
        let r = format!("oci://{}:{tag}", reg.repo("plugins/podreplica"));
        let (ok, text) = push_with_keys(&cluster, &r, "trusted");
        assert!(!ok, "{tag}: {text}");
        let (message, status) = wait_reason(&client, reason, 30).await;
        assert!(
            message.contains(digest.as_str()),
            "{reason} names the digest: {message}"
        );
        assert!(
            message.contains("ConfigMap default/trusted key a.pub"),
            "{reason} names the key: {message}"
        );
        assert_eq!(
            status["pluginVersion"], "0.1.0-v2",
            "v2 keeps running: {status}"
        );
    }
    assert!(
        metric(
            &host,
            "wasmop_source_refusals_total{wasmplugin=\"default/podreplica\",source=\"oci\",reason=\"Unsigned\"}"
        ) >= 1
    );
    let (ok, text) = push_with_keys(&cluster, &v2_ref, "trusted");
    assert!(ok, "{text}");
    let (_, status) = wait_reason(&client, "Loaded", 30).await;
    assert!(
        status["artifact"]["signedBy"]
            .as_str()
            .unwrap_or_default()
            .contains("a.pub"),
        "{status}"
    );

    // The registry goes away: v2 keeps deciding; a restart (requiring signatures now)
    // loads it from the disk, compiling nothing.
    reg.stop();
    apply(&client, &podreplica_resource(), "default", &pr("oci-2", 3))
        .await
        .unwrap();
    converged_by(&client, "oci-2", 3, "(v2)").await;
    assert!(host.terminate(Duration::from_secs(15)));
    // The line a compile writes, as this host wrote it for each version it compiled.
    let compiled = host
        .log_text()
        .matches("compiled (functions reused")
        .count();
    assert!(compiled >= 1, "the first host compiled {compiled} times");
    let pub_a_s = pub_a.to_str().unwrap().to_string();
    let mut args = host_args.to_vec();
    // Also a small size cap and a short pull timeout, for the last refusals below, and
    // plain HTTP allowed for the hostile registry.
    args.extend([
        "--allow-insecure-registries",
        "--require-signature",
        "--trusted-key",
        &pub_a_s,
        "--oci-max-bytes",
        "600000",
        "--oci-timeout-seconds",
        "3",
    ]);
    let started = std::time::Instant::now();
    host = Host::start_deployed(&cluster.kubeconfig, &[], &args, &[]);
    eventually(
        Duration::from_secs(30),
        "the restarted host runs v2",
        || async {
            host.log_text()
                .contains("WasmPlugin accepted")
                .then_some(())
        },
    )
    .await;
    let log = host.log_text();
    println!(
        "# restart with warm caches, registry away: plugin accepted after {:?}",
        started.elapsed()
    );
    assert!(log.contains("from_disk=true"), "{log}");
    assert!(
        log.contains("compiled component read from the disk cache"),
        "{log}"
    );
    assert!(
        !log.contains("compiled (functions reused"),
        "compiled again:\n{log}"
    );
    apply(&client, &podreplica_resource(), "default", &pr("oci-2", 1))
        .await
        .unwrap();
    converged_by(&client, "oci-2", 1, "(v2)").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    assert!(
        !pods
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    // The registry is back; the host requires signatures of every OCI source now, so the
    // unsigned artifact is refused without publicKeys in the WasmPlugin.
    reg.restart();
    let r = format!("oci://{}:unsigned", reg.repo("plugins/podreplica"));
    let (ok, text) = wasmop_on(
        &cluster,
        &["push", "podreplica", &r, "--pull-secret", "regcred"],
    );
    assert!(!ok, "{text}");
    let (message, status) = wait_reason(&client, "Unsigned", 30).await;
    assert!(
        message.contains(&unsigned) && message.contains(&pub_a_s),
        "{message}"
    );
    assert_eq!(status["pluginVersion"], "0.1.0-v2");

    // Trust roots are the admin's: the host trusts key A alone (--trusted-key). An
    // uploader's own key B, named through publicKeys, does not make by-b's signature count.
    cluster.apply_yaml(
        &serde_json::to_string(&json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "mine", "namespace": "default"},
            "data": {"b.pub": std::fs::read_to_string(keys.0.join("b.pub")).unwrap()}}))
        .unwrap(),
    );
    let r = format!("oci://{}:by-b", reg.repo("plugins/podreplica"));
    let (ok, text) = push_with_keys(&cluster, &r, "mine");
    assert!(!ok, "{text}");
    let (message, status) = wait_reason(&client, "SignatureUntrusted", 30).await;
    println!("# SignatureUntrusted: {message}");
    assert!(
        message.contains(&by_b)
            && message.contains("ConfigMap default/mine key b.pub")
            && message.contains(&pub_a_s),
        "{message}"
    );
    assert_eq!(status["pluginVersion"], "0.1.0-v2", "{status}");
    assert!(
        status["artifact"]["signedBy"].is_null()
            || !status["artifact"]["signedBy"]
                .as_str()
                .unwrap_or_default()
                .contains("b.pub"),
        "{status}"
    );
    // Naming the admin's key narrows to it: the org-signed artifact runs, signed by the
    // host's key as the admin named it.
    let (ok, text) = push_with_keys(&cluster, &v2_ref, "trusted");
    assert!(ok, "{text}");
    let (_, status) = wait_reason(&client, "Loaded", 30).await;
    assert!(
        status["artifact"]["signedBy"]
            .as_str()
            .unwrap_or_default()
            .starts_with(&pub_a_s),
        "{status}"
    );
    // The org-signed artifact and its signature copied into another repository (as `oras
    // cp` copies them): the signature names the first repository, and is refused here.
    let bin = tools();
    let scratch = Scratch::new("copy");
    let from = reg.repo("plugins/podreplica");
    let to = reg.repo("plugins/copy");
    let sig_tag = format!("sha256-{}.sig", v2.trim_start_matches("sha256:"));
    for tag in ["v2", sig_tag.as_str()] {
        let (ok, text) = run_tool(
            &reg,
            &scratch.0,
            &bin.join("oras"),
            &["cp", &format!("{from}:{tag}"), &format!("{to}:{tag}")],
        );
        assert!(ok, "oras cp {tag}: {text}");
    }
    let r = format!("oci://{to}:v2");
    let (ok, text) = wasmop_on(
        &cluster,
        &["push", "podreplica", &r, "--pull-secret", "regcred"],
    );
    assert!(!ok, "{text}");
    let (message, status) = wait_reason(&client, "SignatureRepositoryMismatch", 30).await;
    println!("# SignatureRepositoryMismatch: {message}");
    assert!(
        message.contains(&v2) && message.contains("plugins/copy") && message.contains(&from),
        "{message}"
    );
    assert_eq!(status["pluginVersion"], "0.1.0-v2", "{status}");

    // Over the size cap (600,000 bytes; PodReplica is 0.9 MB): refused before the download.
    reg.publish(
        &dir.join("podreplica_renamed.wasm"),
        "plugins/podreplica:big",
        Some(&key_a),
    );
    let big = format!("oci://{}:big", reg.repo("plugins/podreplica"));
    let (ok, text) = wasmop_on(
        &cluster,
        &["push", "podreplica", &big, "--pull-secret", "regcred"],
    );
    assert!(!ok, "{text}");
    let (message, status) = wait_reason(&client, "ArtifactTooLarge", 30).await;
    assert!(message.contains("600000"), "{message}");
    assert_eq!(status["pluginVersion"], "0.1.0-v2");

    // A registry that accepts connections and never answers: the pull times out (3 s).
    let hung = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    hung.set_nonblocking(true).unwrap();
    let hung_addr = hung.local_addr().unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let held = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut conns = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                match hung.accept() {
                    Ok((c, _)) => conns.push(c),
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
            conns.len()
        })
    };
    let r = format!("oci://{hung_addr}/plugins/podreplica:v1");
    let (ok, text) = wasmop_on(&cluster, &["push", "podreplica", &r]);
    assert!(!ok, "{text}");
    let (message, status) = wait_reason(&client, "PullTimeout", 30).await;
    assert!(message.contains("within 3 s"), "{message}");
    assert_eq!(status["pluginVersion"], "0.1.0-v2");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(
        held.join().unwrap() >= 1,
        "the host connected to the hung registry"
    );

    // A registry that breaks the rules (plain HTTP, allowed here by
    // --allow-insecure-registries): every body is read only up to its cap, a redirect to
    // another address is not followed, a `.sig` of 10,000 signatures is refused unread;
    // v2 keeps deciding, and the host's peak memory does not grow with what was sent.
    let peak_before = host.peak_kib();
    let hostile =
        HostileRegistry::start(reg.get_manifest("plugins/podreplica", &v2), "127.0.0.1:9");
    for (repo, words) in [
        ("endless/p", "the manifest is over 4194304 bytes"),
        ("error-body/p", "the registry answered 500"),
        ("redirect/p", "redirected to 127.0.0.1:9"),
        ("signatures/p", "holds 10000 signatures, over 64"),
    ] {
        let r = format!("oci://{}/{repo}:v1", hostile.address);
        let (ok, text) = wasmop_on(&cluster, &["push", "podreplica", &r, "--insecure"]);
        assert!(!ok, "{repo}: {text}");
        let (message, status) = eventually(
            Duration::from_secs(30),
            &format!("{repo} refused"),
            || async {
                let (_, reason, m, s) = ready(&client).await?;
                (reason == "PullFailed" && m.contains(repo)).then_some((m, s))
            },
        )
        .await;
        println!("# {repo}: {message}");
        assert!(message.contains(words), "{repo}: {message}");
        assert!(
            message.len() < 2048,
            "{repo}: a body reached the message: {message}"
        );
        assert_eq!(status["pluginVersion"], "0.1.0-v2", "{repo}: {status}");
    }
    assert!(hostile.requests("endless") >= 1 && hostile.requests("redirect") >= 1);
    // The `.sig` manifest was read (positive first); none of its 10,000 blobs was.
    assert!(hostile.requests("signatures") >= 1);
    assert_eq!(
        hostile.requests("signatures blob"),
        0,
        "no signature of the 10,000 was read"
    );
    apply(&client, &podreplica_resource(), "default", &pr("oci-2", 2))
        .await
        .unwrap();
    converged_by(&client, "oci-2", 2, "(v2)").await;
    let grown = host.peak_kib().saturating_sub(peak_before);
    println!("# the hostile registry: the host's peak memory grew by {grown} KiB");
    assert!(grown < 32 << 10, "the host's peak grew by {grown} KiB");
    drop(hostile);

    // One registry that hangs stalls no other WasmPlugin: while WasmPlugin `stuck` waits
    // on a registry that accepts and never answers (each call 3 s, the whole pull 12 s),
    // deleting WasmPlugin podreplica stops its plugin at once.
    let hung = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    hung.set_nonblocking(true).unwrap();
    let hung_addr = hung.local_addr().unwrap();
    let (accepted_tx, accepted_rx) = std::sync::mpsc::channel();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let holder = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            // Holds every connection, answering nothing, until the test is done.
            let mut conns = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                match hung.accept() {
                    Ok((c, _)) => {
                        let _ = accepted_tx.send(());
                        conns.push(c);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        })
    };
    cluster.apply_yaml(
        &serde_json::to_string(&json!({"apiVersion": "wasmop.dev/v1alpha1", "kind": "WasmPlugin",
            "metadata": {"name": "stuck", "namespace": "default"},
            "spec": {"oci": {"reference": format!("{hung_addr}/plugins/stuck:v1"), "insecure": true}}}))
        .unwrap(),
    );
    accepted_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the host connected to the hung registry");
    let deleted = std::time::Instant::now();
    let wps: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &wasmplugin_resource());
    wps.delete("podreplica", &Default::default()).await.unwrap();
    eventually(
        Duration::from_secs(30),
        "podreplica removed while stuck's registry hangs",
        || async {
            host.log_text()
                .lines()
                .any(|l| l.contains("plugin removed") && l.contains("podreplica"))
                .then_some(())
        },
    )
    .await;
    let took = deleted.elapsed();
    println!("# a WasmPlugin deleted while another's registry hangs: removed after {took:?}");
    assert!(
        took < Duration::from_secs(2),
        "removed after {took:?}: behind the hung pull (3 s a call)"
    );
    drop(host);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    holder.join().unwrap();
}

/// The cached bin directory of cosign and oras (`tests/registry/build-tools`; `make tools`).
fn tools() -> std::path::PathBuf {
    std::path::PathBuf::from(stdout_of(
        &mut std::process::Command::new(repo().join("tests/registry/build-tools")),
        "tests/registry/build-tools",
    ))
}

/// Runs an independent tool against the registry (its CA, credentials in a Docker config);
/// returns whether it succeeded and what it printed.
fn run_tool(
    reg: &Registry,
    dir: &std::path::Path,
    tool: &std::path::Path,
    args: &[&str],
) -> (bool, String) {
    std::fs::write(
        dir.join("config.json"),
        reg.docker_config(&reg.user.1).to_string(),
    )
    .unwrap();
    let out = std::process::Command::new(tool)
        .args(args)
        .current_dir(dir)
        .env("DOCKER_CONFIG", dir)
        .env("SSL_CERT_FILE", &reg.ca)
        .env("COSIGN_PASSWORD", "")
        .output()
        .unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn cosign_and_oras_read_what_wasmop_writes_and_the_other_way_round() {
    let bin = tools();
    let (cosign, oras) = (bin.join("cosign"), bin.join("oras"));
    let reg = Registry::start("interop");
    let dir = Scratch::new("interop");
    let (key, public) = keypair(&dir.0, "w");
    let component = plugin_dir().join("podreplica.wasm");
    let repo = reg.repo("plugins/interop");

    // wasmop publishes and signs; cosign verifies with the public key alone.
    let digest = reg.publish(&component, "plugins/interop:v1", Some(&key));
    let pinned = format!("{repo}@{digest}");
    let (ok, text) = run_tool(
        &reg,
        &dir.0,
        &cosign,
        &[
            "verify",
            "--key",
            public.to_str().unwrap(),
            "--insecure-ignore-tlog=true",
            &pinned,
        ],
    );
    assert!(ok, "cosign verify of wasmop's signature: {text}");
    assert!(text.contains(&digest), "{text}");

    // cosign signs (its own key pair, imported from an openssl key); wasmop verifies.
    let (ckey, _) = keypair(&dir.0, "c");
    let (ok, text) = run_tool(
        &reg,
        &dir.0,
        &cosign,
        &[
            "import-key-pair",
            "--key",
            ckey.to_str().unwrap(),
            "--output-key-prefix",
            "cosign",
        ],
    );
    assert!(ok, "cosign import-key-pair: {text}");
    let unsigned = reg.publish(&component, "plugins/interop:v2", None);
    let ca = reg.ca.to_str().unwrap().to_string();
    let v2 = format!("{repo}:v2");
    let verify = |key: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasmop"))
            .args([
                "verify",
                &v2,
                "--key",
                key,
                "--registry-ca",
                &ca,
                "--username",
                &reg.user.0,
            ])
            .env("WASMOP_REGISTRY_PASSWORD", &reg.user.1)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
        )
    };
    let cosign_pub = dir.0.join("cosign.pub");
    let (code, text) = verify(cosign_pub.to_str().unwrap());
    assert_eq!(code, Some(1), "not signed yet: {text}");
    assert!(
        text.contains("Unsigned") && text.contains(&unsigned),
        "{text}"
    );
    let (ok, text) = run_tool(
        &reg,
        &dir.0,
        &cosign,
        &[
            "sign",
            "--key",
            "cosign.key",
            "--tlog-upload=false",
            "--yes",
            &format!("{repo}@{unsigned}"),
        ],
    );
    assert!(ok, "cosign sign: {text}");
    let (code, text) = verify(cosign_pub.to_str().unwrap());
    assert_eq!(code, Some(0), "wasmop verify of cosign's signature: {text}");
    assert!(
        text.contains("signed by") && text.contains("cosign.pub"),
        "{text}"
    );
    // Another key does not verify it.
    let (code, text) = verify(public.to_str().unwrap());
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("SignatureInvalid"), "{text}");

    // oras, an OCI artifact client, sees the wasm layout and pulls the component intact.
    let (ok, text) = run_tool(&reg, &dir.0, &oras, &["manifest", "fetch", &pinned]);
    assert!(ok, "oras manifest fetch: {text}");
    let manifest: serde_json::Value = serde_json::from_str(text.trim()).expect(&text);
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.wasm.config.v0+json"
    );
    assert_eq!(manifest["layers"][0]["mediaType"], "application/wasm");
    let out = dir.0.join("pulled");
    let (ok, text) = run_tool(
        &reg,
        &dir.0,
        &oras,
        &[
            "blob",
            "fetch",
            "--output",
            out.to_str().unwrap(),
            &format!(
                "{repo}@{}",
                manifest["layers"][0]["digest"].as_str().unwrap()
            ),
        ],
    );
    assert!(ok, "oras blob fetch: {text}");
    assert_eq!(
        std::fs::read(&out).unwrap(),
        std::fs::read(&component).unwrap()
    );
}
