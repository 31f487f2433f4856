//! Temporary check of support/outside.rs (not committed).
#![allow(missing_docs)]

#[path = "support/outside.rs"]
mod outside;

use std::time::{Duration, Instant};

use outside::Outside;
use serde_json::{Value, json};

fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

async fn call(
    c: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    key: Option<&str>,
    body: Option<Value>,
) -> Result<(u16, String), String> {
    let mut r = c.request(method, url);
    if let Some(k) = key {
        r = r.header("Idempotency-Key", k);
    }
    if let Some(b) = body {
        r = r
            .header("content-type", "application/json")
            .body(b.to_string());
    }
    let resp = r.send().await.map_err(|e| format!("send: {e:?}"))?;
    let status = resp.status().as_u16();
    let text = resp.text().await.map_err(|e| format!("body: {e:?}"))?;
    Ok((status, text))
}

fn rec(name: &str, value: &str) -> Value {
    json!({"name": name, "type": "A", "value": value, "ttl": 60})
}

#[tokio::test(flavor = "current_thread")]
async fn outside_check() {
    use reqwest::Method as M;
    let o = Outside::start();
    let c = client();
    let base = o.origin();
    println!("origin {base} addr {}", o.addr());
    let z = |p: &str| format!("{base}/zones/example.com/records{p}");

    // Create without and with key.
    let (s, b) = call(&c, M::POST, z(""), None, Some(rec("a", "1.1.1.1")))
        .await
        .unwrap();
    println!("create a: {s} {b}");
    assert_eq!(s, 201);
    let v: Value = serde_json::from_str(&b).unwrap();
    assert_eq!(
        v,
        json!({"id":"r-1","zone":"example.com","name":"a","type":"A","value":"1.1.1.1","ttl":60})
    );
    let (s, b1) = call(&c, M::POST, z(""), Some("k1"), Some(rec("b", "2.2.2.2")))
        .await
        .unwrap();
    assert_eq!(s, 201);
    // Same key, other path and body: the stored answer.
    let (s, b2) = call(&c, M::PUT, z("/r-1"), Some("k1"), Some(rec("zzz", "9")))
        .await
        .unwrap();
    println!("dup k1: {s} {b2}");
    assert_eq!((s, &b2), (201, &b1));
    let st = o.stats();
    assert_eq!((st.creates, st.updates, st.duplicates), (2, 0, 1));
    assert_eq!(o.records()[0].name, "a", "the PUT replayed was not applied");

    // Bad JSON, missing fields.
    let r = c.post(z("")).body("{not json").send().await.unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let (s, _) = call(&c, M::POST, z(""), None, Some(json!({"name":"x"})))
        .await
        .unwrap();
    assert_eq!(s, 400);
    let (s, _) = call(&c, M::PUT, z("/r-1"), None, Some(json!([1])))
        .await
        .unwrap();
    assert_eq!(s, 400);

    // PUT, GET, 404s.
    let (s, b) = call(&c, M::PUT, z("/r-1"), None, Some(rec("a", "3.3.3.3")))
        .await
        .unwrap();
    println!("put: {s} {b}");
    assert_eq!(s, 200);
    let (s, b) = call(&c, M::GET, z("/r-1"), None, None).await.unwrap();
    assert_eq!(s, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&b).unwrap()["value"],
        "3.3.3.3"
    );
    assert_eq!(o.records()[0].updates, 1);
    for (m, p) in [
        (M::PUT, "/r-99"),
        (M::GET, "/r-99"),
        (M::DELETE, "/r-99"),
        (M::GET, "/nonsense"),
    ] {
        let body = (m == M::PUT).then(|| rec("q", "q"));
        let (s, b) = call(&c, m.clone(), z(p), Some("k404"), body).await.unwrap();
        println!("{m} {p}: {s} {b}");
        assert_eq!(s, 404);
    }
    assert_eq!(
        call(&c, M::PUT, z("/r-99"), None, Some(rec("q", "q")))
            .await
            .unwrap()
            .1,
        r#"{"error":"no such record"}"#
    );
    let (s, _) = call(
        &c,
        M::GET,
        format!("{base}/zones/other.org/records/r-1"),
        None,
        None,
    )
    .await
    .unwrap();
    assert_eq!(s, 404, "a record of another zone");
    let (s, _) = call(&c, M::GET, format!("{base}/nothing/here"), None, None)
        .await
        .unwrap();
    assert_eq!(s, 404);
    println!("stats {:?}", o.stats());
    assert_eq!(o.stats().not_found, 7);

    // fail_next: no change, key not stored.
    o.fail_next(2);
    for _ in 0..2 {
        let (s, b) = call(&c, M::POST, z(""), Some("k2"), Some(rec("c", "4")))
            .await
            .unwrap();
        assert_eq!((s, b.as_str()), (500, r#"{"error":"injected"}"#));
    }
    // A GET is not counted against fail_next (none left anyway).
    let (s, b) = call(&c, M::POST, z(""), Some("k2"), Some(rec("c", "4")))
        .await
        .unwrap();
    println!("after failures: {s} {b}");
    assert_eq!(s, 201);
    assert_eq!(o.stats().injected_failures, 2);
    assert_eq!(o.creates_by_name()[&("example.com".into(), "c".into())], 1);
    o.fail_next(1);
    let (s, _) = call(&c, M::GET, z("/r-1"), None, None).await.unwrap();
    assert_eq!(s, 200, "GET not failed");
    let (s, _) = call(&c, M::DELETE, z("/r-1"), None, None).await.unwrap();
    assert_eq!(s, 500);
    assert_eq!(o.records().len(), 3);

    // drop_after_commit: the client fails; the change is made; the retry gets the stored answer.
    o.drop_after_commit(1);
    let t = Instant::now();
    let e = call(&c, M::POST, z(""), Some("k3"), Some(rec("d", "5")))
        .await
        .unwrap_err();
    println!("dropped create: {e} (after {:?})", t.elapsed());
    assert!(e.starts_with("send:"), "send() itself fails: {e}");
    let d = o
        .records()
        .into_iter()
        .find(|r| r.name == "d")
        .expect("record d exists");
    let (s, b) = call(&c, M::POST, z(""), Some("k3"), Some(rec("d", "5")))
        .await
        .unwrap();
    println!("retry: {s} {b}");
    assert_eq!(s, 201);
    assert_eq!(
        serde_json::from_str::<Value>(&b).unwrap()["id"],
        d.id.as_str()
    );
    assert_eq!(o.creates_by_name()[&("example.com".into(), "d".into())], 1);
    assert_eq!(o.stats().dropped_after_commit, 1);
    // A DELETE (whose answer is a 204) dropped as well, with a fresh client.
    o.drop_after_commit(1);
    let fresh = client();
    let e = call(
        &fresh,
        M::DELETE,
        z(&format!("/{}", d.id)),
        Some("k5"),
        None,
    )
    .await
    .unwrap_err();
    println!("dropped delete: {e}");
    assert!(e.starts_with("send:"));
    assert!(o.records().iter().all(|r| r.name != "d"));
    let (s, b) = call(
        &fresh,
        M::DELETE,
        z(&format!("/{}", d.id)),
        Some("k5"),
        None,
    )
    .await
    .unwrap();
    assert_eq!((s, b.as_str()), (204, ""));
    let (s, _) = call(
        &fresh,
        M::DELETE,
        z(&format!("/{}", d.id)),
        Some("k6"),
        None,
    )
    .await
    .unwrap();
    assert_eq!(s, 404);
    assert_eq!(o.deletes_by_name()[&("example.com".into(), "d".into())], 1);
    // A PUT dropped, without a key: applied.
    o.drop_after_commit(1);
    assert!(
        call(&c, M::PUT, z("/r-1"), None, Some(rec("a", "7.7.7.7")))
            .await
            .is_err()
    );
    assert_eq!(o.records()[0].value, "7.7.7.7");
    // With the usual client, the next request works on a new connection.
    let (s, _) = call(&c, M::GET, z("/r-1"), None, None).await.unwrap();
    assert_eq!(s, 200);

    // duplicate_next: with a key, one create and one duplicate; without, two creates.
    let before = o.stats();
    o.duplicate_next(1);
    let (s, b) = call(&c, M::POST, z(""), Some("k4"), Some(rec("e", "6")))
        .await
        .unwrap();
    println!("duplicated with key: {s} {b}");
    assert_eq!(s, 201);
    let after = o.stats();
    assert_eq!(after.creates - before.creates, 1);
    assert_eq!(after.duplicates - before.duplicates, 1);
    o.duplicate_next(1);
    let (s, b) = call(&c, M::POST, z(""), None, Some(rec("f", "7")))
        .await
        .unwrap();
    println!("duplicated without key: {s} {b}");
    assert_eq!(s, 201);
    let first_id = serde_json::from_str::<Value>(&b).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let fs: Vec<_> = o.records().into_iter().filter(|r| r.name == "f").collect();
    assert_eq!(fs.len(), 2);
    assert_eq!(
        fs[0].id, first_id,
        "the client got the first delivery's answer"
    );
    assert_eq!(o.creates_by_name()[&("example.com".into(), "f".into())], 2);
    // Only the next one.
    let (s, _) = call(&c, M::POST, z(""), None, Some(rec("g", "8")))
        .await
        .unwrap();
    assert_eq!(s, 201);
    assert_eq!(o.creates_by_name()[&("example.com".into(), "g".into())], 1);

    // slow.
    o.slow(Duration::from_millis(400));
    let t = Instant::now();
    let (s, _) = call(&c, M::GET, z("/r-1"), None, None).await.unwrap();
    let took = t.elapsed();
    println!("slow GET: {s} after {took:?}");
    assert!(took >= Duration::from_millis(400));
    o.slow(Duration::ZERO);
    let t = Instant::now();
    call(&c, M::GET, z("/r-1"), None, None).await.unwrap();
    assert!(t.elapsed() < Duration::from_millis(200));

    // Redirect.
    let r = c
        .get(format!(
            "{base}/redirect?to=http%3A%2F%2F169.254.169.254%2Flatest%3Fa%3D1%26b%3D2"
        ))
        .send()
        .await
        .unwrap();
    println!("redirect: {} {:?}", r.status(), r.headers().get("location"));
    assert_eq!(r.status().as_u16(), 307);
    assert_eq!(
        r.headers()["location"],
        "http://169.254.169.254/latest?a=1&b=2"
    );
    let r = c
        .get(format!("{base}/redirect?to=http://example.com/x"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["location"], "http://example.com/x");
    let r = c.get(format!("{base}/redirect")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 400);

    // Authorization.
    c.get(z("/r-1"))
        .header("Authorization", "Bearer s3cret")
        .send()
        .await
        .unwrap();
    c.get(z("/r-1"))
        .basic_auth("u", Some("p"))
        .send()
        .await
        .unwrap();
    println!("authorizations: {:?}", o.authorizations());
    assert_eq!(
        o.authorizations(),
        vec!["Bearer s3cret".to_string(), "Basic dTpw".to_string()]
    );

    println!("records: {:#?}", o.records());
    println!("creates: {:?}", o.creates_by_name());
    println!("stats: {:?}", o.stats());

    // Independent of this runtime: a blocking std client on another thread meanwhile.
    let addr = o.addr();
    let got = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        write!(
            s,
            "GET /zones/example.com/records/r-1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut t = String::new();
        s.read_to_string(&mut t).unwrap();
        t
    })
    .join()
    .unwrap();
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");

    // Dropped with a slow request in flight: stops at once, and the port is closed.
    o.slow(Duration::from_secs(30));
    let pending = tokio::spawn({
        let c = c.clone();
        let url = z("/r-1");
        async move { c.get(url).send().await.map(|r| r.status()) }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let t = Instant::now();
    drop(o);
    println!("dropped in {:?}", t.elapsed());
    assert!(t.elapsed() < Duration::from_secs(2));
    let r = pending.await.unwrap();
    println!("in-flight request after drop: {r:?}");
    assert!(r.is_err());
    assert!(std::net::TcpStream::connect(addr).is_err(), "port closed");
}

/// Many concurrent same-key creates: exactly one applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn outside_check_concurrent() {
    let o = Outside::start();
    let c = client();
    let url = format!("{}/zones/z/records", o.origin());
    let mut tasks = Vec::new();
    for i in 0..50 {
        let c = c.clone();
        let url = url.clone();
        tasks.push(tokio::spawn(async move {
            let key = format!("k{}", i % 5);
            let r = c
                .post(url)
                .header("Idempotency-Key", key)
                .body(rec(&format!("n{}", i % 5), "v").to_string())
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap().0, 201);
    }
    let st = o.stats();
    println!("{st:?}");
    assert_eq!((st.creates, st.duplicates, st.requests), (5, 45, 50));
    assert!(o.creates_by_name().values().all(|&n| n == 1));
    // Sorted by id numerically past r-9.
    for _ in 0..8 {
        c.post(url.clone())
            .body(rec("m", "v").to_string())
            .send()
            .await
            .unwrap();
    }
    let ids: Vec<String> = o.records().into_iter().map(|r| r.id).collect();
    println!("{ids:?}");
    assert_eq!(ids.last().unwrap(), "r-13");
}
