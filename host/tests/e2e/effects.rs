//! End to end: effects outside the cluster (contract 0.4.0's requests and answers). The
//! `dnsrecord` plugin keeps 300 DnsRecords in an outside DNS API (a real HTTP server on
//! loopback, `support::outside`, with faults on demand: 500s, connections dropped after
//! the API committed, duplicated deliveries, answers slower than the hosts' timeout) through two sharded replicas; one is killed
//! with SIGKILL while creates are in flight (its shard moves to the other) and started
//! again (the shards move back) while updates are in flight. The API's own counts hold
//! every record to exactly one create, one update per spec change and one delete
//! (idempotency keys); the token the host puts in each request's header reached the API on
//! every request and is in no log and no recording; the recorded decisions replay offline.
//! A second test: a URL outside the allow-list, a redirect out of it, a loopback address
//! granted by no name, the API server's address and a declared but ungranted host are
//! refused before connecting, each with its rule as an Event, the host's `Ready=False`
//! condition (seen by a watch) and the metric.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::runtime::watcher;
use serde_json::{Value, json};

use crate::support::outside::Outside;
use crate::support::uploads::{
    event_notes, push, push_with, wasmop, wasmop_on, wasmplugin_resource,
};
use crate::support::*;

const RECORDS: usize = 300;
const CHANGED: usize = 100;
const ZONE: &str = "example.org";
const TOKEN: &str = "tok-3f9c1e77a2d54b08";

fn dns_resource() -> ApiResource {
    ApiResource {
        group: "dns.example.com".into(),
        version: "v1alpha1".into(),
        api_version: "dns.example.com/v1alpha1".into(),
        kind: "DnsRecord".into(),
        plural: "dnsrecords".into(),
    }
}

fn value_of(i: usize, round: u8) -> String {
    format!(
        "{}.{}.{}",
        if round == 0 { "192.0.2" } else { "198.51.100" },
        i / 250,
        i % 250
    )
}

fn record(i: usize, endpoint: &str) -> Value {
    json!({"apiVersion": "dns.example.com/v1alpha1", "kind": "DnsRecord",
        "metadata": {"name": format!("r-{i}"), "namespace": "default"},
        "spec": {"endpoint": endpoint, "zone": ZONE, "name": format!("r-{i}"),
            "value": value_of(i, 0), "tokenSecret": "dns-token"}})
}

/// Each DnsRecord's (synced, spec value) by name.
async fn synced(client: &Client) -> Option<BTreeMap<String, (bool, String)>> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &dns_resource());
    let list = api.list(&ListParams::default()).await.ok()?;
    Some(
        list.items
            .into_iter()
            .map(|o| {
                let ok = o.data["status"]["synced"].as_bool().unwrap_or(false)
                    && o.data["status"]["recordId"].is_string();
                let value = o.data["spec"]["value"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                (o.metadata.name.unwrap_or_default(), (ok, value))
            })
            .collect(),
    )
}

/// The outside API holds exactly `want` (name → value), and every DnsRecord says synced.
async fn all_synced(
    client: &Client,
    outside: &Outside,
    want: &BTreeMap<String, String>,
    what: &str,
) {
    eventually(Duration::from_secs(300), what, || async {
        let seen = synced(client).await?;
        let all = seen.len() == want.len() && seen.values().all(|(ok, _)| *ok);
        let held: BTreeMap<String, String> = outside
            .records()
            .into_iter()
            .map(|r| (r.name, r.value))
            .collect();
        (all && held == *want).then_some(())
    })
    .await;
}

fn sharded(cluster: &Cluster, id: &str, grant: &str, records: &str) -> Host {
    let args = [
        "--leader-election",
        "--sharding",
        "--lease-seconds",
        "10",
        "--lease-namespace",
        "default",
        "--identity",
        id,
        "--outbound-grant",
        grant,
        "--record",
        records,
        "--record-max",
        "5000",
        "--outbound-timeout-ms",
        "2000",
    ];
    Host::start_with(&cluster.kubeconfig, &["dnsrecord.wasm"], &args, &[])
}

async fn token_secret(client: &Client) {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let s: Secret = serde_json::from_value(json!({"metadata": {"name": "dns-token"},
        "stringData": {"token": TOKEN}}))
    .unwrap();
    secrets.create(&PostParams::default(), &s).await.unwrap();
}

/// The bucket bounds of a histogram's quantile `q` (the host's `/metrics`, summed over its
/// label sets): `(lower, upper]` in seconds.
fn quantile(host: &Host, name: &str, q: f64) -> Option<(f64, f64)> {
    let (_, text) = host.http_get("/metrics")?;
    let mut buckets: BTreeMap<u64, f64> = BTreeMap::new();
    for l in text
        .lines()
        .filter(|l| l.starts_with(&format!("{name}_bucket{{")))
    {
        let le = l.split("le=\"").nth(1)?.split('"').next()?;
        let bound = if le == "+Inf" {
            f64::INFINITY
        } else {
            le.parse().ok()?
        };
        let n: f64 = l.rsplit(' ').next()?.parse().ok()?;
        *buckets.entry(bound.to_bits()).or_default() += n;
    }
    let mut sorted: Vec<(f64, f64)> = buckets
        .into_iter()
        .map(|(b, n)| (f64::from_bits(b), n))
        .collect();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total = sorted.last()?.1;
    let mut lower = 0.0;
    for (bound, n) in sorted {
        if n >= q * total {
            return Some((lower, bound));
        }
        lower = bound;
    }
    None
}

/// Prints the request and answer-wait quantiles of `host` (figures for docs/performance.md).
fn print_latencies(host: &Host, who: &str) {
    for (name, what) in [
        ("wasmop_outbound_duration_seconds", "request sent -> answer"),
        (
            "wasmop_outbound_answer_wait_seconds",
            "answer -> the decision that used it",
        ),
    ] {
        let p50 = quantile(host, name, 0.5);
        let p99 = quantile(host, name, 0.99);
        println!("{who}: {what}: p50 in {p50:?} s, p99 in {p99:?} s");
    }
}

fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn records_outside_are_created_updated_and_deleted_once_across_a_kill_and_shard_moves() {
    let outside = Outside::start();
    let cluster = Cluster::start("effects");
    let client = cluster.client().await;
    token_secret(&client).await;
    let grant = format!("dnsrecord={}", outside.origin());
    let recordings = Scratch::new("recordings");
    let rec_dir = recordings.0.to_str().unwrap().to_string();
    cluster.grant(&["dnsrecord.wasm"]);
    let mut a = sharded(&cluster, "a", &grant, &rec_dir);
    let b = sharded(&cluster, "b", &grant, &rec_dir);
    let ar = dns_resource();
    wait_for_crd(&client, &ar).await;

    // A watch of every DnsRecord for the whole test: the answers the host keeps on them
    // (the annotation's bytes per held answer, and the most held at once).
    let kept: std::sync::Arc<std::sync::Mutex<(usize, usize, usize)>> = Default::default();
    let watching = {
        let kept = kept.clone();
        let api = Api::<DynamicObject>::namespaced_with(client.clone(), "default", &ar);
        tokio::spawn(async move {
            let mut events = watcher(api, watcher::Config::default()).boxed();
            while let Some(Ok(e)) = events.next().await {
                let (watcher::Event::Apply(o) | watcher::Event::InitApply(o)) = e else {
                    continue;
                };
                let Some(text) = o
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("wasmop.dev/answers"))
                else {
                    continue;
                };
                let keys = serde_json::from_str::<serde_json::Map<String, Value>>(text)
                    .map_or(0, |m| m.len());
                let mut k = kept.lock().unwrap();
                k.0 += text.len();
                k.1 += keys;
                k.2 = k.2.max(keys);
            }
        })
    };

    // Faults while the creates go out.
    outside.fail_next(20);
    outside.drop_after_commit(15);
    outside.duplicate_next(10);
    let started = Instant::now();
    let endpoint = outside.origin();
    futures::stream::iter(0..RECORDS)
        .map(|i| {
            let (client, ar, endpoint) = (client.clone(), ar.clone(), endpoint.clone());
            async move { apply(&client, &ar, "default", &record(i, &endpoint)).await }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
    // SIGKILL of a replica with creates in flight: its shard moves to the other.
    eventually(
        Duration::from_secs(120),
        "a third of the creates sent",
        || async { (outside.stats().creates >= RECORDS / 3).then_some(()) },
    )
    .await;
    a.kill();
    println!("replica a killed after {} creates", outside.stats().creates);
    let mut want: BTreeMap<String, String> = (0..RECORDS)
        .map(|i| (format!("r-{i}"), value_of(i, 0)))
        .collect();
    all_synced(&client, &outside, &want, "every record created and synced").await;
    println!(
        "{RECORDS} records created and synced in {:?}: {:?}",
        started.elapsed(),
        outside.stats()
    );
    let creates = outside.creates_by_name();
    assert_eq!(creates.len(), RECORDS, "one record per DnsRecord");
    let twice: Vec<_> = creates.iter().filter(|(_, n)| **n != 1).collect();
    assert!(
        twice.is_empty(),
        "records created more than once: {twice:?}"
    );
    let stats = outside.stats();
    assert!(
        stats.injected_failures >= 20 && stats.dropped_after_commit >= 15,
        "{stats:?}"
    );
    assert!(
        stats.duplicates > 0,
        "the kill, the drops and the duplicates were answered from the idempotency store: {stats:?}"
    );

    // The killed replica back: the shards move again, while updates are in flight.
    let a = sharded(&cluster, "a", &grant, &rec_dir);
    // Slow answers first: every request outlasts the hosts' 2 s timeout; the requests fail,
    // all their retries spent, and are asked again once the answers are fast again.
    outside.slow(Duration::from_secs(3));
    outside.fail_next(10);
    outside.drop_after_commit(10);
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    for i in 0..CHANGED {
        api.patch(
            &format!("r-{i}"),
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"value": value_of(i, 1)}})),
        )
        .await
        .unwrap();
        want.insert(format!("r-{i}"), value_of(i, 1));
    }
    let failed = |hosts: [&Host; 2]| -> f64 {
        hosts
            .iter()
            .filter_map(|h| {
                let (_, m) = h.http_get("/metrics")?;
                Some(
                    m.lines()
                        .filter(|l| {
                            l.starts_with(
                                "wasmop_outbound_requests_total{plugin=\"dnsrecord\",result=\"failed\"}",
                            )
                        })
                        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                        .sum::<f64>(),
                )
            })
            .sum()
    };
    let timed_out = eventually(Duration::from_secs(120), "requests timed out", || async {
        let n = failed([&a, &b]);
        (n >= 5.0).then_some(n)
    })
    .await;
    outside.slow(Duration::ZERO);
    println!("requests that failed (timed out, all retries spent): {timed_out}");
    all_synced(&client, &outside, &want, "every changed record updated").await;
    let updates: BTreeMap<String, usize> = outside
        .records()
        .into_iter()
        .map(|r| (r.name, r.updates))
        .collect();
    for i in 0..RECORDS {
        let n = updates[&format!("r-{i}")];
        assert_eq!(n, usize::from(i < CHANGED), "r-{i} updated {n} times");
    }

    // Deleted: the finalizer holds each until the API says its record is gone.
    futures::stream::iter(0..RECORDS)
        .map(|i| {
            let api = api.clone();
            async move {
                api.delete(&format!("r-{i}"), &DeleteParams::default())
                    .await
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
    eventually(Duration::from_secs(300), "every DnsRecord gone", || async {
        api.list(&ListParams::default())
            .await
            .ok()?
            .items
            .is_empty()
            .then_some(())
    })
    .await;
    assert!(
        outside.records().is_empty(),
        "records left outside: {}",
        outside.records().len()
    );
    let deletes = outside.deletes_by_name();
    assert_eq!(deletes.len(), RECORDS);
    assert!(
        deletes.values().all(|n| *n == 1),
        "deleted more than once: {deletes:?}"
    );
    let stats = outside.stats();
    println!("after the deletes: {stats:?}");
    print_latencies(&a, "replica a (restarted)");
    print_latencies(&b, "replica b");
    watching.abort();
    let (bytes, keys, most) = *kept.lock().unwrap();
    assert!(keys > 0, "the watch saw answers kept on the objects");
    println!(
        "answers kept: {} bytes of annotation per held answer on average ({keys} seen), at most {most} held at once on one object",
        bytes / keys
    );

    // The token reached the API on every request, and nothing else saw it.
    let auth = outside.authorizations();
    assert_eq!(auth.len(), stats.requests);
    assert!(
        auth.iter().all(|h| *h == format!("Bearer {TOKEN}")),
        "a request without the token"
    );
    for log in [&a.log, &b.log] {
        let text = std::fs::read_to_string(log).unwrap();
        assert!(!text.contains(TOKEN), "the token in {}", log.display());
    }
    let files = files_under(&recordings.0);
    assert!(files.len() > RECORDS, "decisions recorded: {}", files.len());
    let mut with_answers = 0;
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        assert!(!text.contains(TOKEN), "the token in {}", f.display());
        with_answers += usize::from(text.contains("answers:"));
    }
    assert!(
        with_answers > RECORDS,
        "decisions that observed answers recorded: {with_answers}"
    );
    // Decided again offline, against the answers they observed.
    let file = plugin_dir().join("dnsrecord.wasm");
    let (ok, out) = wasmop(&["replay", file.to_str().unwrap(), &rec_dir]);
    assert!(ok, "replay: {out}");
    println!("{}", out.lines().last().unwrap_or_default());
    drop((a, b));
}

/// The rules each record's endpoint breaks, by record name.
#[tokio::test(flavor = "multi_thread")]
async fn requests_leaving_the_allow_list_are_refused_before_connecting() {
    let outside = Outside::start();
    let cluster = Cluster::start("refusals");
    let client = cluster.client().await;
    token_secret(&client).await;
    let api_port = {
        let text = std::fs::read_to_string(&cluster.kubeconfig).unwrap();
        let server = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("server:"))
            .unwrap()
            .trim()
            .to_string();
        server
            .rsplit(':')
            .next()
            .unwrap()
            .trim_end_matches('/')
            .to_string()
    };
    let unused = free_port();
    // The outside API's origin granted by name; any other loopback port only by a pattern
    // that does not name the host.
    let grants = [
        format!("dnsrecord={}", outside.origin()),
        "dnsrecord=http://*.0.0.1:*".to_string(),
    ];
    let mut args = Vec::new();
    for g in &grants {
        args.extend(["--outbound-grant", g.as_str()]);
    }
    let host = Host::start(&cluster, &["dnsrecord.wasm"], &args, &[]);
    let ar = dns_resource();
    wait_for_crd(&client, &ar).await;

    // A watch of every DnsRecord for the whole window: the host's condition, however short.
    let seen: std::sync::Arc<std::sync::Mutex<BTreeSet<(String, String)>>> = Default::default();
    let watching = {
        let (seen, api) = (
            seen.clone(),
            Api::<DynamicObject>::namespaced_with(client.clone(), "default", &ar),
        );
        tokio::spawn(async move {
            let mut events = watcher(api, watcher::Config::default()).boxed();
            while let Some(Ok(e)) = events.next().await {
                let objs: Vec<DynamicObject> = match e {
                    watcher::Event::Apply(o) | watcher::Event::InitApply(o) => vec![o],
                    _ => vec![],
                };
                for o in objs {
                    for c in o.data["status"]["conditions"]
                        .as_array()
                        .into_iter()
                        .flatten()
                    {
                        if c["type"] == "Ready"
                            && c["status"] == "False"
                            && c["reason"] == "RequestRefused"
                        {
                            seen.lock().unwrap().insert((
                                o.metadata.name.clone().unwrap_or_default(),
                                c["message"].as_str().unwrap_or_default().to_string(),
                            ));
                        }
                    }
                }
            }
        })
    };

    let cases = [
        (
            "not-declared",
            format!("http://127.0.0.2:{}", outside.addr().port()),
        ),
        ("not-granted", "https://dns.example.com".to_string()),
        ("redirect", format!("{}/away", outside.origin())),
        ("loopback", format!("http://127.0.0.1:{unused}")),
        ("api-server", format!("http://127.0.0.1:{api_port}")),
    ];
    for (rule, endpoint) in &cases {
        let mut r = record(0, endpoint);
        r["metadata"]["name"] = json!(rule);
        apply(&client, &ar, "default", &r).await.unwrap();
    }
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    for (rule, _) in &cases {
        let needle = format!("refused by the host: {rule}:");
        eventually(
            Duration::from_secs(60),
            &format!("{rule}: the status says why"),
            || async {
                let o = api.get(rule).await.ok()?;
                o.data["status"]["message"]
                    .as_str()?
                    .contains(&needle)
                    .then_some(())
            },
        )
        .await;
        eventually(
            Duration::from_secs(30),
            &format!("{rule}: the host's condition"),
            || async {
                seen.lock()
                    .unwrap()
                    .iter()
                    .any(|(name, m)| {
                        name == rule && m.contains(&format!("refused by rule {rule}:"))
                    })
                    .then_some(())
            },
        )
        .await;
        let metric =
            format!("wasmop_outbound_refused_total{{plugin=\"dnsrecord\",rule=\"{rule}\"}}");
        eventually(
            Duration::from_secs(30),
            &format!("{rule}: the metric"),
            || async {
                let (_, m) = host.http_get("/metrics")?;
                m.lines()
                    .any(|l| {
                        l.starts_with(&metric)
                            && l.rsplit(' ')
                                .next()
                                .and_then(|v| v.parse::<f64>().ok())
                                .is_some_and(|v| v >= 1.0)
                    })
                    .then_some(())
            },
        )
        .await;
    }
    let notes = event_notes(&client, "RequestRefused").await;
    for (rule, _) in &cases {
        assert!(
            notes
                .iter()
                .any(|n| n.contains(&format!("refused by rule {rule}:"))),
            "no RequestRefused Event for {rule}: {notes:?}"
        );
    }
    // Nothing reached the outside API: the redirect's first hop only, refused on its way out.
    let stats = outside.stats();
    assert_eq!(stats.creates, 0, "{stats:?}");
    watching.abort();
}

/// A shadow candidate decides every record beside the active version, and its requests
/// (to `/v2/…`, a route the DNS API does not have) are compared, never sent: the API sees
/// exactly the active version's creates. Then the same version as a 50 % canary: its
/// requests are sent for its share of the objects only.
#[tokio::test(flavor = "multi_thread")]
async fn a_shadow_candidate_sends_nothing_and_a_canary_only_for_its_share() {
    const SHADOWED: usize = 50;
    let outside = Outside::start();
    let cluster = Cluster::start("effects-shadow");
    let client = cluster.client().await;
    token_secret(&client).await;
    let grant = format!("dnsrecord={}", outside.origin());
    let host = Host::start(
        &cluster,
        &["dnsrecord.wasm"],
        &["--outbound-grant", &grant],
        &[],
    );
    let ar = dns_resource();
    wait_for_crd(&client, &ar).await;
    wait_for_crd(&client, &wasmplugin_resource()).await;
    let (ok, text) = push(&cluster, "dnsrecord", "dnsrecord.wasm");
    assert!(ok, "{text}");
    let (ok, text) = push_with(&cluster, "dnsrecord", "dnsrecord_v2.wasm", &["--shadow"]);
    assert!(ok && text.contains("candidate accepted"), "{text}");

    let endpoint = outside.origin();
    for i in 0..SHADOWED {
        apply(&client, &ar, "default", &record(i, &endpoint))
            .await
            .unwrap();
    }
    let want: BTreeMap<String, String> = (0..SHADOWED)
        .map(|i| (format!("r-{i}"), value_of(i, 0)))
        .collect();
    all_synced(
        &client,
        &outside,
        &want,
        "every record created by the active version",
    )
    .await;
    let candidate = "wasmop_rollout_decisions_total{plugin=\"dnsrecord\",candidate=\"0.1.0-v2\",";
    let decided = eventually(
        Duration::from_secs(30),
        "the shadow's decisions counted",
        || async {
            let (_, m) = host.http_get("/metrics")?;
            let n: f64 = m
                .lines()
                .filter(|l| l.starts_with(candidate))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum();
            (n >= SHADOWED as f64).then_some(n)
        },
    )
    .await;
    let stats = outside.stats();
    println!("shadow decisions {decided}; the API saw {stats:?}");
    assert_eq!(
        stats.not_found, 0,
        "a shadow request reached the API: {stats:?}"
    );
    assert_eq!(stats.creates, SHADOWED, "{stats:?}");
    assert_eq!(
        stats.requests, SHADOWED,
        "only the active version's requests: {stats:?}"
    );
    let (_, m) = host.http_get("/metrics").unwrap();
    let diverged: f64 = m
        .lines()
        .filter(|l| l.starts_with(candidate) && l.contains("result=\"diverge\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(
        diverged >= 1.0,
        "the candidate's plans differ from the active's (their URLs): {}",
        m.lines()
            .filter(|l| l.starts_with(candidate))
            .collect::<Vec<_>>()
            .join("\n")
    );

    // Canary: v2 decides for half of 60 new records, by UID, and its requests are sent for
    // that share only (to `/v2/…`: the API answers 404, which its status shows); the other
    // half's records are created by the active version.
    let (ok, text) = wasmop_on(&cluster, &["abort", "dnsrecord"]);
    assert!(ok, "{text}");
    let (ok, text) = push_with(
        &cluster,
        "dnsrecord",
        "dnsrecord_v2.wasm",
        &["--canary", "50"],
    );
    assert!(ok, "{text}");
    let mut by_v1 = Vec::new();
    let mut by_v2 = Vec::new();
    for i in 100..160 {
        let o = apply(&client, &ar, "default", &record(i, &endpoint))
            .await
            .unwrap();
        let name = format!("r-{i}");
        if wasmop::rollout::canary::in_canary(o.metadata.uid.as_deref().unwrap(), 50) {
            by_v2.push(name);
        } else {
            by_v1.push(name);
        }
    }
    println!("canary share: {} of 60 by UID", by_v2.len());
    assert!(!by_v1.is_empty() && !by_v2.is_empty());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    eventually(
        Duration::from_secs(120),
        "each share decided by its version",
        || async {
            let held: BTreeSet<String> = outside.records().into_iter().map(|r| r.name).collect();
            for n in &by_v1 {
                held.contains(n).then_some(())?;
            }
            for n in &by_v2 {
                let o = api.get(n).await.ok()?;
                o.data["status"]["message"]
                    .as_str()?
                    .contains("HTTP 404")
                    .then_some(())?;
            }
            Some(())
        },
    )
    .await;
    let held: BTreeSet<String> = outside.records().into_iter().map(|r| r.name).collect();
    let expected: BTreeSet<String> = (0..SHADOWED)
        .map(|i| format!("r-{i}"))
        .chain(by_v1.iter().cloned())
        .collect();
    assert_eq!(
        held, expected,
        "records only for the active version's share"
    );
    let stats = outside.stats();
    assert!(
        stats.not_found >= by_v2.len(),
        "the canary's requests were sent: {stats:?}"
    );
    println!("after the canary: {stats:?}");
}
