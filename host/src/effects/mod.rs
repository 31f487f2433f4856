//! Effects outside the cluster: the requests a plan carries, sent by the host after the
//! plan's Kubernetes writes, and their answers, held on the primary ([`held`]) for the next
//! decisions to observe. A decision stays a pure function of what it observed: the guest
//! never touches a socket, and an answer is an observation like any other (recorded,
//! replayed, compared).
//!
//! - [`grants`]: the hosts a plugin declares and an admin grants.
//! - [`sender`]: one request, refused before connecting or sent within its bounds.
//! - [`held`]: the answers kept on the primary.
//!
//! Guarantees: a key whose answer is held is not sent again; a plan that stops carrying a
//! key lets its answer go (and a later plan that carries it sends it again). A request is
//! sent at most once per key while its answer is held, and at least once across a restart
//! of the host (sent, then the host died before the answer was kept: sent again; the
//! `Idempotency-Key` lets an API that honours it tell).

pub(crate) mod grants;
pub(crate) mod held;
pub(crate) mod sender;

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::effects::grants::Pattern;
use crate::effects::held::Held;
use crate::effects::sender::{ApiServer, Limits, Refusal, Sender};
use crate::runtime::types::{Answer, Credential, OutboundRequest, Outcome};
use crate::telemetry::metrics::{Metrics, OutboundLabels, PluginOnlyLabels, RejectLabels};

/// The host's senders, one per plugin, and the grants and bounds they share.
pub(crate) struct Outbound {
    grants: HashMap<String, Vec<Pattern>>,
    limits: Limits,
    api: Arc<ApiServer>,
    senders: Mutex<HashMap<String, Arc<Sender>>>,
}

/// What came of one plan's requests.
#[derive(Debug, Default)]
pub(crate) struct Carried {
    /// The answers to hold now: those of the plan's keys, old and new.
    pub(crate) held: Held,
    /// Requests sent (or refused) this time: answers the next decision has not seen.
    pub(crate) answered: usize,
    /// The refusals of this time: key, rule, what broke it.
    pub(crate) refusals: Vec<(String, &'static str, String)>,
}

impl Outbound {
    /// Senders with `grants` (`PLUGIN=PATTERN` each) and `limits`, never reaching the API
    /// server of `cluster_url`.
    pub(crate) async fn new(
        grants: &[String],
        limits: Limits,
        cluster_url: &str,
    ) -> Result<Self, String> {
        let mut by_plugin: HashMap<String, Vec<Pattern>> = HashMap::new();
        for g in grants {
            let (plugin, pattern) =
                grants::parse_grant(g).map_err(|e| format!("--outbound-grant {e}"))?;
            by_plugin.entry(plugin).or_default().push(pattern);
        }
        Ok(Outbound {
            grants: by_plugin,
            limits,
            api: Arc::new(ApiServer::of(cluster_url).await),
            senders: Mutex::new(HashMap::new()),
        })
    }

    /// The sender of `plugin`, made on first use.
    fn sender(&self, plugin: &str) -> Result<Arc<Sender>, String> {
        let mut senders = self.senders.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = senders.get(plugin) {
            return Ok(s.clone());
        }
        let grants = self.grants.get(plugin).cloned().unwrap_or_default();
        let s = Arc::new(Sender::new(grants, self.limits.clone(), self.api.clone())?);
        senders.insert(plugin.to_string(), s.clone());
        Ok(s)
    }

    /// Carries out `requests` of a plan of `plugin` (which declared `declared`) against
    /// the answers `held`: a key held keeps its answer, a new key is sent (or refused) and
    /// answered, a held key the plan no longer carries is let go. `secret` reads a
    /// credential's value (as the plugin: its ServiceAccount must be allowed to).
    pub(crate) async fn carry_out<F, Fut>(
        &self,
        (plugin, declared): (&str, &[String]),
        requests: &[OutboundRequest],
        held: &Held,
        secret: F,
        metrics: &Metrics,
    ) -> Carried
    where
        F: Fn(Credential) -> Fut,
        Fut: Future<Output = Result<String, String>>,
    {
        let mut carried = Carried::default();
        let mut new = Vec::new();
        for r in requests {
            if carried.held.contains_key(&r.key)
                || new.iter().any(|n: &&OutboundRequest| n.key == r.key)
            {
                continue;
            }
            match held.get(&r.key) {
                Some(a) => {
                    carried.held.insert(r.key.clone(), a.clone());
                }
                None => new.push(r),
            }
        }
        let now = jiff::Timestamp::now().as_millisecond();
        for (key, a) in held.iter().filter(|(k, _)| !carried.held.contains_key(*k)) {
            tracing::debug!(key, "answer let go");
            metrics
                .outbound_answer_wait_seconds
                .get_or_create(&PluginOnlyLabels {
                    plugin: plugin.to_string(),
                })
                .observe((now - a.at_unix_ms).max(0) as f64 / 1000.0);
        }
        if new.is_empty() {
            return carried;
        }
        let sender = match self.sender(plugin) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "no sender for the plugin's requests");
                return carried;
            }
        };
        let declared: Vec<Pattern> = declared
            .iter()
            .filter_map(|d| Pattern::parse(d).ok())
            .collect();
        let per_plan = sender.limits().per_plan;
        let sends = new.iter().enumerate().map(|(i, r)| {
            let sender = sender.clone();
            let declared = &declared;
            let secret = &secret;
            async move {
                let started = Instant::now();
                let outcome = if i >= per_plan {
                    Outcome::Refused(
                        Refusal::new(
                            "too-many",
                            format!("more than {per_plan} new requests in one plan"),
                        )
                        .to_string(),
                    )
                } else if let Err(r) = r
                    .url
                    .parse::<reqwest::Url>()
                    .map_err(|e| Refusal::new("url", e.to_string()))
                    .and_then(|u| sender.check_url(declared, &u))
                {
                    // Refused before any Secret is read.
                    Outcome::Refused(r.to_string())
                } else {
                    match &r.credential {
                        None => sender.send(declared, r, None).await,
                        Some(c) => match secret(c.clone()).await {
                            Ok(value) => {
                                let header = format!("{}{value}", c.prefix);
                                sender
                                    .send(declared, r, Some((c.header.as_str(), header)))
                                    .await
                            }
                            Err(why) => Outcome::Refused(
                                Refusal::new(
                                    "credential",
                                    format!("Secret {} key {}: {why}", c.secret, c.key),
                                )
                                .to_string(),
                            ),
                        },
                    }
                };
                (r, outcome, started.elapsed())
            }
        });
        for (r, outcome, took) in futures::future::join_all(sends).await {
            let result = match &outcome {
                Outcome::Response(_) => "response",
                Outcome::Failed(_) => "failed",
                Outcome::Refused(_) => "refused",
            };
            metrics
                .outbound_requests
                .get_or_create(&OutboundLabels {
                    plugin: plugin.to_string(),
                    result: result.to_string(),
                })
                .inc();
            if let Outcome::Refused(text) = &outcome {
                let rule = rule_of(text);
                metrics
                    .outbound_refused
                    .get_or_create(&RejectLabels::new(plugin, rule))
                    .inc();
                carried.refusals.push((r.key.clone(), rule, text.clone()));
            } else {
                metrics
                    .outbound_duration_seconds
                    .get_or_create(&PluginOnlyLabels {
                        plugin: plugin.to_string(),
                    })
                    .observe(took.as_secs_f64());
            }
            tracing::info!(key = %r.key, method = %r.method, url = %crate::effects::sender::origin_of(&r.url), result, took_ms = took.as_millis() as u64, "request outside the cluster");
            carried.answered += 1;
            carried.held.insert(
                r.key.clone(),
                Answer {
                    key: r.key.clone(),
                    outcome,
                    at_unix_ms: jiff::Timestamp::now().as_millisecond(),
                },
            );
        }
        carried
    }
}

/// The rule a refusal's text names (`rule: detail`), as a static label.
fn rule_of(text: &str) -> &'static str {
    const RULES: &[&str] = &[
        "not-declared",
        "not-granted",
        "loopback",
        "link-local",
        "api-server",
        "redirect",
        "scheme",
        "url",
        "method",
        "header",
        "too-many",
        "credential",
    ];
    let head = text.split(':').next().unwrap_or_default();
    RULES
        .iter()
        .find(|r| **r == head)
        .copied()
        .unwrap_or("other")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    use axum::Router;
    use axum::extract::State;
    use axum::http::{HeaderMap, StatusCode};
    use axum::response::{IntoResponse, Redirect};
    use axum::routing::get;

    use crate::runtime::types::{Header, Response};

    /// A real HTTP server on loopback, standing in for an outside API; stopped on drop.
    struct Server {
        addr: SocketAddr,
        calls: Arc<AtomicUsize>,
        stop: Option<tokio::sync::oneshot::Sender<()>>,
    }

    impl Drop for Server {
        fn drop(&mut self) {
            if let Some(s) = self.stop.take() {
                let _ = s.send(());
            }
        }
    }

    async fn serve(other: Option<SocketAddr>) -> Server {
        let calls = Arc::new(AtomicUsize::new(0));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let other = other.unwrap_or(addr);
        let app = Router::new()
            .route(
                "/ok",
                get(
                    |State(c): State<Arc<AtomicUsize>>, h: HeaderMap| async move {
                        c.fetch_add(1, Ordering::SeqCst);
                        let auth = h
                            .get("authorization")
                            .map(|v| v.to_str().unwrap().to_string())
                            .unwrap_or_default();
                        let key = h
                            .get("idempotency-key")
                            .map(|v| v.to_str().unwrap().to_string())
                            .unwrap_or_default();
                        (
                            [("etag", "\"7\""), ("x-other", "no")],
                            format!("auth={auth};key={key}"),
                        )
                    },
                ),
            )
            .route("/big", get(|| async { "x".repeat(20_000) }))
            .route(
                "/slow",
                get(|| async {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    "late"
                }),
            )
            .route(
                "/flaky",
                get(|State(c): State<Arc<AtomicUsize>>| async move {
                    if c.fetch_add(1, Ordering::SeqCst) < 2 {
                        StatusCode::SERVICE_UNAVAILABLE.into_response()
                    } else {
                        "fine".into_response()
                    }
                }),
            )
            .route("/here", get(|| async { Redirect::temporary("/ok") }))
            .route(
                "/away",
                get(move || async move {
                    Redirect::temporary(&format!("http://localhost:{}/ok", other.port()))
                }),
            )
            .with_state(calls.clone());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await
                .unwrap();
        });
        Server {
            addr,
            calls,
            stop: Some(tx),
        }
    }

    fn request(key: &str, url: String) -> OutboundRequest {
        OutboundRequest {
            key: key.into(),
            method: "GET".into(),
            url,
            headers: Vec::new(),
            body: None,
            credential: None,
            idempotency_key: None,
            retry: false,
            keep_headers: vec!["ETag".into()],
        }
    }

    fn limits() -> Limits {
        Limits {
            timeout: Duration::from_millis(300),
            max_body: 1024,
            ..Limits::default()
        }
    }

    fn sender(grants: &[String], api: ApiServer) -> Sender {
        let grants = grants.iter().map(|g| Pattern::parse(g).unwrap()).collect();
        Sender::new(grants, limits(), Arc::new(api)).unwrap()
    }

    fn patterns(list: &[String]) -> Vec<Pattern> {
        list.iter().map(|g| Pattern::parse(g).unwrap()).collect()
    }

    fn rule(o: &Outcome) -> &str {
        match o {
            Outcome::Refused(text) => rule_of(text),
            other => panic!("not refused: {other:?}"),
        }
    }

    fn response(o: Outcome) -> Response {
        match o {
            Outcome::Response(r) => r,
            other => panic!("no response: {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_granted_origin_is_answered_within_its_bounds() {
        let server = serve(None).await;
        let origin = format!("http://127.0.0.1:{}", server.addr.port());
        let s = sender(std::slice::from_ref(&origin), ApiServer::default());
        let declared = patterns(std::slice::from_ref(&origin));

        let mut r = request("a", format!("{origin}/ok"));
        r.idempotency_key = Some("k-1".into());
        let got = response(
            s.send(
                &declared,
                &r,
                Some(("authorization", "Bearer s3cret".into())),
            )
            .await,
        );
        assert_eq!(got.status, 200);
        assert_eq!(
            String::from_utf8(got.body).unwrap(),
            "auth=Bearer s3cret;key=k-1"
        );
        // Only the headers asked for.
        assert_eq!(
            got.headers,
            vec![Header {
                name: "etag".into(),
                value: "\"7\"".into()
            }]
        );

        // The body is cut at the cap.
        let big = response(
            s.send(&declared, &request("b", format!("{origin}/big")), None)
                .await,
        );
        assert_eq!((big.body.len(), big.truncated), (1024, true));

        // A redirect to the same origin is followed, the credential kept.
        let here = response(
            s.send(
                &declared,
                &request("c", format!("{origin}/here")),
                Some(("authorization", "Bearer s3cret".into())),
            )
            .await,
        );
        assert_eq!(
            String::from_utf8(here.body).unwrap(),
            "auth=Bearer s3cret;key="
        );

        // A timeout is a failure.
        match s
            .send(&declared, &request("d", format!("{origin}/slow")), None)
            .await
        {
            Outcome::Failed(why) => assert!(why.contains("timed out"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn what_is_not_declared_granted_or_outside_is_refused_before_connecting() {
        let server = serve(None).await;
        let port = server.addr.port();
        let origin = format!("http://127.0.0.1:{port}");
        let declared = patterns(&[origin.clone(), format!("http://localhost:{port}")]);
        let s = sender(std::slice::from_ref(&origin), ApiServer::default());

        let refused = |o: Outcome| rule(&o).to_string();
        assert_eq!(
            refused(
                s.send(
                    &declared,
                    &request("a", format!("http://127.0.0.2:{port}/ok")),
                    None
                )
                .await
            ),
            "not-declared"
        );
        assert_eq!(
            refused(
                s.send(
                    &declared,
                    &request("b", format!("http://localhost:{port}/ok")),
                    None
                )
                .await
            ),
            "not-granted"
        );
        // A redirect to a host the grants do not cover.
        assert_eq!(
            refused(
                s.send(&declared, &request("c", format!("{origin}/away")), None)
                    .await
            ),
            "redirect"
        );
        let mut m = request("d", format!("{origin}/ok"));
        m.method = "CONNECT".into();
        assert_eq!(refused(s.send(&declared, &m, None).await), "method");
        assert_eq!(
            server.calls.load(Ordering::SeqCst),
            0,
            "nothing reached the counted routes (the redirect's target was refused)"
        );

        // Loopback reached only by a grant that names the host: a wildcard does not.
        let wild = sender(
            &[
                format!("http://*.localhost:{port}"),
                format!("http://localhost:{port}"),
            ],
            ApiServer::default(),
        );
        assert!(matches!(
            wild.send(
                &declared,
                &request("e", format!("http://localhost:{port}/ok")),
                None
            )
            .await,
            Outcome::Response(_)
        ));
        let by_wildcard_only = sender(&[format!("http://*.0.0.1:{port}")], ApiServer::default());
        assert_eq!(
            by_wildcard_only
                .check_addresses(&format!("http://127.0.0.1:{port}/").parse().unwrap())
                .await
                .unwrap_err()
                .rule,
            "loopback"
        );

        // The API server: refused even when declared and granted.
        let api = ApiServer {
            names: Default::default(),
            addrs: [server.addr].into_iter().collect(),
        };
        let to_api = sender(std::slice::from_ref(&origin), api);
        assert_eq!(
            refused(
                to_api
                    .send(&declared, &request("f", format!("{origin}/ok")), None)
                    .await
            ),
            "api-server"
        );
        let api_named = ApiServer {
            names: ["kubernetes.default.svc".to_string()].into_iter().collect(),
            addrs: Default::default(),
        };
        let by_name = sender(&["https://kubernetes.default.svc".to_string()], api_named);
        assert_eq!(
            refused(
                by_name
                    .send(
                        &patterns(&["https://kubernetes.default.svc".to_string()]),
                        &request("g", "https://kubernetes.default.svc/api".into()),
                        None
                    )
                    .await
            ),
            "api-server"
        );
        assert_eq!(
            server.calls.load(Ordering::SeqCst),
            1,
            "only the grant by name"
        );
    }

    #[tokio::test]
    async fn a_plugins_requests_keep_to_its_concurrency_and_rate() {
        // A server that holds each request 300 ms and counts how many it holds at once.
        let held = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0)));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new()
            .route(
                "/hold",
                get(
                    |State(h): State<Arc<(AtomicUsize, AtomicUsize)>>| async move {
                        let now = h.0.fetch_add(1, Ordering::SeqCst) + 1;
                        h.1.fetch_max(now, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(300)).await;
                        h.0.fetch_sub(1, Ordering::SeqCst);
                        "held"
                    },
                ),
            )
            .with_state(held.clone());
        let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let origin = format!("http://127.0.0.1:{}", addr.port());
        let grants = vec![Pattern::parse(&origin).unwrap()];
        let declared = grants.clone();
        let bounded = |concurrency, per_second| {
            let limits = Limits {
                concurrency,
                per_second,
                timeout: Duration::from_secs(60),
                ..limits()
            };
            Arc::new(Sender::new(grants.clone(), limits, Arc::new(ApiServer::default())).unwrap())
        };
        let send_all = |s: Arc<Sender>, n: usize| {
            let declared = declared.clone();
            let url = format!("{origin}/hold");
            async move {
                let started = Instant::now();
                let all = (0..n).map(|i| {
                    let (s, declared, url) = (s.clone(), declared.clone(), url.clone());
                    async move {
                        s.send(&declared, &request(&format!("k{i}"), url), None)
                            .await
                    }
                });
                let outcomes = futures::future::join_all(all).await;
                assert!(
                    outcomes.iter().all(|o| matches!(o, Outcome::Response(_))),
                    "{outcomes:?}"
                );
                started.elapsed()
            }
        };
        // Concurrency 2: never more than two held at once, whatever the machine.
        send_all(bounded(2, 1000), 6).await;
        let most = held.1.load(Ordering::SeqCst);
        assert!((1..=2).contains(&most), "{most} in flight at once");
        // 5 per second: ten requests begin over at least 1.8 s (nine gaps of 200 ms).
        let took = send_all(bounded(16, 5), 10).await;
        assert!(took >= Duration::from_millis(1800), "paced: {took:?}");
        server.abort();
    }

    #[tokio::test]
    async fn only_a_request_marked_retry_is_sent_again() {
        let server = serve(None).await;
        let origin = format!("http://127.0.0.1:{}", server.addr.port());
        let s = sender(std::slice::from_ref(&origin), ApiServer::default());
        let declared = patterns(std::slice::from_ref(&origin));
        let once = response(
            s.send(&declared, &request("a", format!("{origin}/flaky")), None)
                .await,
        );
        assert_eq!((once.status, server.calls.load(Ordering::SeqCst)), (503, 1));
        let mut r = request("b", format!("{origin}/flaky"));
        r.retry = true;
        let again = response(s.send(&declared, &r, None).await);
        assert_eq!(
            (again.status, server.calls.load(Ordering::SeqCst)),
            (200, 3)
        );
    }

    #[tokio::test]
    async fn a_held_key_is_not_sent_again_and_a_dropped_one_lets_its_answer_go() {
        let server = serve(None).await;
        let origin = format!("http://127.0.0.1:{}", server.addr.port());
        let outbound = Outbound::new(
            &[format!("p={origin}")],
            limits(),
            "https://10.255.255.1:6443",
        )
        .await
        .unwrap();
        let metrics = Metrics::new();
        let no_secret = |_c: Credential| async { Err::<String, String>("none".into()) };
        let declared = [origin.clone()];
        let first = outbound
            .carry_out(
                ("p", &declared),
                &[
                    request("a", format!("{origin}/ok")),
                    request("b", format!("{origin}/ok")),
                ],
                &Held::new(),
                no_secret,
                &metrics,
            )
            .await;
        assert_eq!((first.answered, first.held.len()), (2, 2));
        assert_eq!(server.calls.load(Ordering::SeqCst), 2);
        // The same keys again: held, not sent. "b" dropped: its answer goes.
        let second = outbound
            .carry_out(
                ("p", &declared),
                &[request("a", format!("{origin}/ok"))],
                &first.held,
                no_secret,
                &metrics,
            )
            .await;
        assert_eq!(
            (second.answered, second.held.keys().collect::<Vec<_>>()),
            (0, vec![&"a".to_string()])
        );
        assert_eq!(second.held["a"], first.held["a"]);
        assert_eq!(server.calls.load(Ordering::SeqCst), 2);
        // A credential that cannot be read refuses the request; nothing is sent.
        let mut c = request("c", format!("{origin}/ok"));
        c.credential = Some(Credential {
            header: "Authorization".into(),
            prefix: "Bearer ".into(),
            secret: "token".into(),
            key: "t".into(),
        });
        let third = outbound
            .carry_out(("p", &declared), &[c], &Held::new(), no_secret, &metrics)
            .await;
        assert_eq!(
            third.refusals.iter().map(|r| r.1).collect::<Vec<_>>(),
            vec!["credential"]
        );
        assert_eq!(server.calls.load(Ordering::SeqCst), 2);
        // More new requests than a plan may carry: the rest refused.
        let many: Vec<_> = (0..20)
            .map(|i| request(&format!("m{i}"), format!("{origin}/ok")))
            .collect();
        let fourth = outbound
            .carry_out(("p", &declared), &many, &Held::new(), no_secret, &metrics)
            .await;
        assert_eq!(fourth.refusals.len(), 4);
        assert!(fourth.refusals.iter().all(|r| r.1 == "too-many"));
        assert_eq!(server.calls.load(Ordering::SeqCst), 18);
    }
}
