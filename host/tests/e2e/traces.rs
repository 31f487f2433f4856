//! End to end, against the local control plane and a real OTLP receiver (the OpenTelemetry
//! Collector's own otlpreceiver, `tests/otel/`, on loopback): a PodReplica scaling to 3 is a
//! trace whose `reconcile` span names the plugin, its version and the object and carries the
//! decision, with the three pod creates as child `write` spans (POST, 201); a host without
//! the OpenTelemetry endpoint variable builds no exporter at all. Requests outside the
//! cluster have their `outbound` spans, and the credential the host puts in them is in no
//! span and no log line.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;
use serde_json::{Value, json};

/// The cached bin directory of otlp-receiver (`tests/otel/build`; `make otel`).
fn receiver_bin() -> PathBuf {
    PathBuf::from(stdout_of(
        &mut Command::new(repo().join("tests/otel/build")),
        "tests/otel/build",
    ))
    .join("otlp-receiver")
}

/// otlp-receiver on a free loopback port, writing every batch it gets to a file; stopped
/// (SIGTERM, then SIGKILL) and its directory removed when dropped.
struct Receiver {
    child: Option<Child>,
    /// The value for `OTEL_EXPORTER_OTLP_ENDPOINT`.
    endpoint: String,
    dir: Scratch,
}

impl Receiver {
    fn start() -> Receiver {
        let bin = receiver_bin();
        let dir = Scratch::new("otlp");
        let addr = format!("127.0.0.1:{}", free_port());
        let child = Command::new(&bin)
            .arg("-listen")
            .arg(&addr)
            .arg("-out")
            .arg(dir.0.join("traces.jsonl"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.0.join("receiver.log")).unwrap())
            .spawn()
            .expect("start otlp-receiver");
        let mut receiver = Receiver {
            child: Some(child),
            endpoint: format!("http://{addr}"),
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(&addr).is_err() {
            if let Some(Ok(Some(status))) = receiver.child.as_mut().map(Child::try_wait) {
                panic!("otlp-receiver exited ({status}): {}", receiver.log());
            }
            assert!(
                Instant::now() < deadline,
                "otlp-receiver does not listen on {addr}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        receiver
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.0.join("receiver.log")).unwrap_or_default()
    }

    /// Every span received so far.
    fn spans(&self) -> Vec<Span> {
        let text = std::fs::read_to_string(self.dir.0.join("traces.jsonl")).unwrap_or_default();
        text.lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("a line of OTLP JSON"))
            .flat_map(|batch| spans_of(&batch))
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// One received span, with its attributes and its resource's `service.name`.
#[derive(Debug, Clone)]
struct Span {
    trace: String,
    id: String,
    parent: String,
    name: String,
    kind: i64,
    service: String,
    attributes: serde_json::Map<String, Value>,
}

impl Span {
    /// An attribute as plain JSON (OTLP JSON writes 64-bit integers as strings).
    fn attr(&self, key: &str) -> Value {
        let v = &self.attributes.get(key).cloned().unwrap_or(Value::Null);
        if let Some(s) = v.get("stringValue") {
            s.clone()
        } else if let Some(i) = v.get("intValue") {
            json!(
                i.as_str()
                    .and_then(|s| s.parse::<i64>().ok())
                    .or(i.as_i64())
            )
        } else if let Some(b) = v.get("boolValue") {
            b.clone()
        } else {
            Value::Null
        }
    }
}

/// The spans of one OTLP JSON `ExportTraceServiceRequest`.
fn spans_of(batch: &Value) -> Vec<Span> {
    let list = |v: &Value, key: &str| v[key].as_array().cloned().unwrap_or_default();
    let mut out = Vec::new();
    for rs in list(batch, "resourceSpans") {
        let service = list(&rs["resource"], "attributes")
            .iter()
            .find(|a| a["key"] == "service.name")
            .and_then(|a| a["value"]["stringValue"].as_str())
            .unwrap_or_default()
            .to_string();
        for ss in list(&rs, "scopeSpans") {
            for s in list(&ss, "spans") {
                let str_of = |k: &str| s[k].as_str().unwrap_or_default().to_string();
                out.push(Span {
                    trace: str_of("traceId"),
                    id: str_of("spanId"),
                    parent: str_of("parentSpanId"),
                    name: str_of("name"),
                    kind: s["kind"].as_i64().unwrap_or_default(),
                    service: service.clone(),
                    attributes: list(&s, "attributes")
                        .into_iter()
                        .filter_map(|a| Some((a["key"].as_str()?.to_string(), a["value"].clone())))
                        .collect(),
                });
            }
        }
    }
    out
}

/// The OpenTelemetry SDK's threads in process `pid` (its batch span processor's is named
/// `OpenTelemetry.Traces.BatchProcessor`, cut by Linux to 15 bytes).
fn exporter_threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| {
            tasks
                .flatten()
                .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                .filter(|comm| comm.starts_with("OpenTelemetry"))
                .count()
        })
        .unwrap_or(0)
}

fn podreplica(name: &str, size: i64) -> Value {
    json!({"apiVersion": "app.example.com/v1alpha1", "kind": "PodReplica",
           "metadata": {"name": name, "namespace": "default"}, "spec": {"size": size}})
}

/// The reconcile span that decided `applies` pod creates for `object`, and its writes.
fn scaling(spans: &[Span], object: &str, applies: i64) -> Option<(Span, Vec<Span>)> {
    let reconcile = spans.iter().find(|s| {
        s.name == "reconcile" && s.attr("object") == object && s.attr("plan.applies") == applies
    })?;
    let writes: Vec<Span> = spans
        .iter()
        .filter(|s| s.parent == reconcile.id && s.trace == reconcile.trace && s.name != "decide")
        .cloned()
        .collect();
    let creates = writes.iter().filter(|w| w.attr("verb") == "POST").count();
    (creates == applies as usize).then(|| (reconcile.clone(), writes))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_podreplica_scaling_is_one_trace_with_its_decision_and_pod_creates() {
    let cluster = Cluster::start("traces");
    let receiver = Receiver::start();
    let mut host = Host::start(
        &cluster,
        &["podreplica.wasm"],
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint.as_str()),
            ("OTEL_BSP_SCHEDULE_DELAY", "200"),
        ],
    );
    let client = cluster.client().await;
    let ar = podreplica_resource();
    wait_for_crd(&client, &ar).await;
    eventually(Duration::from_secs(60), "host ready", || async {
        (host.http_get("/readyz")?.0 == 200).then_some(())
    })
    .await;
    assert_eq!(
        exporter_threads(host.pid()),
        1,
        "the host with OTEL_EXPORTER_OTLP_ENDPOINT runs the SDK's batch processor"
    );

    // Size 3: the reconcile that decides the three pods is one trace.
    let pr = apply(&client, &ar, "default", &podreplica("traced", 3))
        .await
        .unwrap();
    let uid = pr.metadata.uid.clone().unwrap();
    eventually(Duration::from_secs(60), "3 pods Running", || {
        converged(&client, &uid, 3)
    })
    .await;
    let (reconcile, writes) = eventually(
        Duration::from_secs(30),
        "a reconcile span with 3 pod creates at the receiver",
        || async { scaling(&receiver.spans(), "default/traced", 3) },
    )
    .await;
    println!("reconcile span: {:?}", reconcile.attributes);

    // The reconcile: the root of its trace, from the service `wasmop`, naming the plugin,
    // its version and digest, the object and its kind; the decision and the guard's verdict.
    assert_eq!(reconcile.service, "wasmop");
    assert_eq!(
        reconcile.parent, "",
        "the reconcile span is the root of its trace"
    );
    assert_eq!(reconcile.attr("plugin"), "podreplica");
    assert_eq!(reconcile.attr("version"), "0.1.0");
    assert_eq!(
        reconcile.attr("digest"),
        wasmop::runtime::digest_of(&plugin_bytes("podreplica.wasm")).as_str()
    );
    assert_eq!(reconcile.attr("kind"), "PodReplica");
    assert_eq!(reconcile.attr("decision"), "plan");
    assert_eq!(reconcile.attr("plan.deletes"), 0);
    // The ScaledUp Event ("creating 3 pod(s)"); the status comes with a later decision.
    assert_eq!(reconcile.attr("plan.events"), 1);
    assert!(reconcile.attr("plan.status").is_boolean());
    assert_eq!(reconcile.attr("guard"), "accepted");

    // Its writes: the three pod creates, each a client span with the API server's 201, named
    // after the pod it made: exactly the PodReplica's pods.
    let creates: Vec<&Span> = writes.iter().filter(|w| w.attr("verb") == "POST").collect();
    for w in &creates {
        assert_eq!(w.name, "POST Pod", "{w:?}");
        assert_eq!(w.kind, 3, "a client span: {w:?}");
        assert_eq!(w.attr("kind"), "Pod", "{w:?}");
        assert_eq!(w.attr("namespace"), "default", "{w:?}");
        assert_eq!(w.attr("http.response.status_code"), 201, "{w:?}");
    }
    let mut created: Vec<String> = creates
        .iter()
        .map(|w| w.attr("name").as_str().unwrap_or_default().to_string())
        .collect();
    let mut pods: Vec<String> = live_owned_pods(&client, "default", &uid)
        .await
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    created.sort();
    pods.sort();
    assert_eq!(created, pods, "the created pods' names in the write spans");
    // The sandbox call is a child span too.
    assert!(
        receiver
            .spans()
            .iter()
            .any(|s| s.name == "decide" && s.parent == reconcile.id),
        "a decide span under the reconcile"
    );

    // SIGTERM: the host flushes its last spans and stops in time.
    assert!(
        host.terminate(Duration::from_secs(30)),
        "the host with an exporter stops on SIGTERM"
    );

    // Without the endpoint variable (the other OpenTelemetry variables set), the exporter is
    // not built: no SDK thread, and nothing more reaches the receiver while the host scales
    // the PodReplica to 4.
    let before = receiver.spans().len();
    let host = Host::start(
        &cluster,
        &["podreplica.wasm"],
        &[],
        &[
            ("OTEL_BSP_SCHEDULE_DELAY", "200"),
            ("OTEL_SERVICE_NAME", "wasmop-untraced"),
        ],
    );
    eventually(Duration::from_secs(60), "second host ready", || async {
        (host.http_get("/readyz")?.0 == 200).then_some(())
    })
    .await;
    apply(&client, &ar, "default", &podreplica("traced", 4))
        .await
        .unwrap();
    eventually(Duration::from_secs(60), "4 pods Running", || {
        converged(&client, &uid, 4)
    })
    .await;
    assert_eq!(
        exporter_threads(host.pid()),
        0,
        "no exporter without OTEL_EXPORTER_OTLP_ENDPOINT"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let spans = receiver.spans();
    assert_eq!(spans.len(), before, "spans received from the untraced host");
    assert!(spans.iter().all(|s| s.service == "wasmop"));
    assert!(
        !host.log_text().contains("traces off"),
        "{}",
        host.log_text()
    );
}

/// Requests outside the cluster in traces: each reconcile that sends one has its `outbound`
/// span, and the token the host puts in every request's header (from a Secret) is in no span
/// the receiver got and no line the host logged at debug level.
#[tokio::test(flavor = "multi_thread")]
async fn requests_outside_are_traced_without_their_credential() {
    const TOKEN: &str = "tok-traced-5d2a9c04e1";
    let outside = crate::support::outside::Outside::start();
    let cluster = Cluster::start("traces-effects");
    let receiver = Receiver::start();
    let client = cluster.client().await;
    let secrets: kube::api::Api<k8s_openapi::api::core::v1::Secret> =
        kube::api::Api::namespaced(client.clone(), "default");
    secrets
        .create(
            &Default::default(),
            &serde_json::from_value(json!({"metadata": {"name": "dns-token"},
                "stringData": {"token": TOKEN}}))
            .unwrap(),
        )
        .await
        .unwrap();
    let grant = format!("dnsrecord={}", outside.origin());
    let host = Host::start(
        &cluster,
        &["dnsrecord.wasm"],
        &["--outbound-grant", &grant],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint.as_str()),
            ("OTEL_BSP_SCHEDULE_DELAY", "200"),
            ("WASMOP_LOG", "debug"),
        ],
    );
    let ar = kube::api::ApiResource {
        group: "dns.example.com".into(),
        version: "v1alpha1".into(),
        api_version: "dns.example.com/v1alpha1".into(),
        kind: "DnsRecord".into(),
        plural: "dnsrecords".into(),
    };
    wait_for_crd(&client, &ar).await;
    for i in 0..20 {
        let r = json!({"apiVersion": "dns.example.com/v1alpha1", "kind": "DnsRecord",
            "metadata": {"name": format!("t-{i}"), "namespace": "default"},
            "spec": {"endpoint": outside.origin(), "zone": "example.org",
                "name": format!("t-{i}"), "value": "192.0.2.7", "tokenSecret": "dns-token"}});
        apply(&client, &ar, "default", &r).await.unwrap();
    }
    let api: kube::api::Api<kube::api::DynamicObject> =
        kube::api::Api::namespaced_with(client.clone(), "default", &ar);
    eventually(Duration::from_secs(120), "20 records synced", || async {
        let list = api.list(&Default::default()).await.ok()?;
        (list.items.len() == 20
            && list
                .items
                .iter()
                .all(|o| o.data["status"]["synced"].as_bool() == Some(true)))
        .then_some(())
    })
    .await;
    let outbound = eventually(Duration::from_secs(30), "20 outbound spans", || async {
        let spans: Vec<Span> = receiver
            .spans()
            .into_iter()
            .filter(|s| s.name == "outbound")
            .collect();
        (spans.len() >= 20).then_some(spans)
    })
    .await;
    println!("{} outbound spans", outbound.len());
    assert_eq!(outside.stats().creates, 20);
    assert!(
        outside
            .authorizations()
            .iter()
            .all(|a| *a == format!("Bearer {TOKEN}")),
        "the token reached the API"
    );
    let exported = std::fs::read_to_string(receiver.dir.0.join("traces.jsonl")).unwrap();
    let logged = std::fs::read_to_string(&host.log).unwrap();
    assert!(
        logged.contains("request outside the cluster"),
        "debug log written"
    );
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(TOKEN);
    for (what, text) in [("an exported span", &exported), ("the host's log", &logged)] {
        assert!(!text.contains(TOKEN), "the token in {what}");
        assert!(!text.contains(&encoded), "the token (base64) in {what}");
    }
}
