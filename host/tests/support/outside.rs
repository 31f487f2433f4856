//! A small DNS API on loopback standing in for an outside service that plugins call over
//! HTTP: records under zones, `Idempotency-Key` honoured, and faults on demand (failures,
//! slowness, answers lost after the change was made, requests delivered twice). It runs on
//! a thread and a runtime of its own, so it keeps serving while a test kills and restarts
//! other processes, and stops when dropped.
//!
//! The API (JSON bodies; a record is `{"name", "type", "value", "ttl"}`):
//! - `POST /zones/{zone}/records` creates a record: 201 with it and its id (`r-1`, `r-2`, ...).
//! - `PUT /zones/{zone}/records/{id}` replaces one: 200 with it, 404 if there is none.
//! - `DELETE /zones/{zone}/records/{id}` removes one: 204, 404 if there is none.
//! - `GET /zones/{zone}/records/{id}`: 200 with it, 404 if there is none.
//! - `GET /redirect?to=URL`: 307 to `URL`.
//! - `/away/REST`, any method: 307 to `http://localhost:PORT/REST` (the same server by
//!   another name).
//!
//! A body that is not a record is answered 400. A POST, PUT or DELETE with an
//! `Idempotency-Key` seen before (on any path) gets the first answer again and changes
//! nothing; only the answer to a change that was made is stored (a 400 or 404 is not, so a
//! retry of one is judged afresh).

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::response::Response;
use http::{HeaderValue, Method, StatusCode, header};
use serde::Deserialize;
use serde_json::json;
use tokio::sync::oneshot;

/// A record as the API keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// `r-<n>`, n counting from 1 in order of creation.
    pub id: String,
    /// The zone it was created in.
    pub zone: String,
    /// Its name.
    pub name: String,
    /// Its type (`A`, `TXT`, ...): the JSON field `type`.
    pub kind: String,
    /// Its value.
    pub value: String,
    /// Its time to live, in seconds.
    pub ttl: u32,
    /// How many updates (applied PUTs) it has had.
    pub updates: usize,
}

/// What the API has seen and done so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Requests received, on any route (before any fault).
    pub requests: usize,
    /// Records created (applied POSTs).
    pub creates: usize,
    /// Records updated (applied PUTs).
    pub updates: usize,
    /// Records deleted (applied DELETEs).
    pub deletes: usize,
    /// Deliveries answered from the idempotency store (a key seen before), the second
    /// delivery of a duplicated request included.
    pub duplicates: usize,
    /// Requests answered 500 by [`Outside::fail_next`].
    pub injected_failures: usize,
    /// Requests applied and then left without an answer by [`Outside::drop_after_commit`].
    pub dropped_after_commit: usize,
    /// Requests answered 404 (no such record, no such route).
    pub not_found: usize,
}

/// A record in a request's body.
#[derive(Deserialize)]
struct Record {
    name: String,
    #[serde(rename = "type")]
    kind: String,
    value: String,
    ttl: u32,
}

/// An answer the application gave: a status and a JSON body (none for 204 and 307).
#[derive(Clone)]
struct Answer {
    status: StatusCode,
    body: Option<serde_json::Value>,
    location: Option<String>,
}

impl Answer {
    fn json(status: StatusCode, body: serde_json::Value) -> Answer {
        Answer {
            status,
            body: Some(body),
            location: None,
        }
    }

    fn error(status: StatusCode, message: &str) -> Answer {
        Answer::json(status, json!({ "error": message }))
    }

    fn empty(status: StatusCode) -> Answer {
        Answer {
            status,
            body: None,
            location: None,
        }
    }

    fn into_response(self) -> Response {
        let mut response = Response::new(match &self.body {
            Some(b) => Body::from(b.to_string()),
            None => Body::empty(),
        });
        *response.status_mut() = self.status;
        if self.body.is_some() {
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
        }
        if let Some(to) = self.location.and_then(|l| HeaderValue::try_from(l).ok()) {
            response.headers_mut().insert(header::LOCATION, to);
        }
        response
    }
}

/// Everything the server keeps, behind one lock.
#[derive(Default)]
struct Inner {
    /// The live records by the number of their id.
    records: BTreeMap<u64, Stored>,
    last_id: u64,
    creates: BTreeMap<(String, String), usize>,
    deletes: BTreeMap<(String, String), usize>,
    /// The answer given the first time, by idempotency key.
    idempotent: HashMap<String, Answer>,
    stats: Stats,
    authorizations: Vec<String>,
    fail_next: usize,
    drop_next: usize,
    duplicate_next: usize,
    slow: Duration,
}

type Shared = Arc<Mutex<Inner>>;

fn lock(shared: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A DNS API on `127.0.0.1`, serving until dropped.
pub struct Outside {
    addr: SocketAddr,
    shared: Shared,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Outside {
    /// Starts the server on a free loopback port, on a thread and a two-worker runtime of
    /// its own; returns once it listens.
    pub fn start() -> Outside {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let addr = listener.local_addr().expect("the listener's address");
        let shared = Shared::default();
        let (stop, stopped) = oneshot::channel::<()>();
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let thread = std::thread::Builder::new()
            .name(format!("outside-{}", addr.port()))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("the outside API's runtime");
                runtime.block_on(async move {
                    let listener =
                        tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
                    tokio::select! {
                        _ = axum::serve(listener, app) => {}
                        _ = stopped => {}
                    }
                });
                // Dropping the runtime ends every connection still open, whatever it waits on.
                drop(runtime);
            })
            .expect("spawn the outside API's thread");
        Outside {
            addr,
            shared,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The next `n` POST, PUT and DELETE requests are answered 500 `{"error":"injected"}`
    /// before anything is applied or their idempotency key stored.
    pub fn fail_next(&self, n: usize) {
        lock(&self.shared).fail_next = n;
    }

    /// Every request from now on waits `d` before it is handled (`Duration::ZERO`: none).
    pub fn slow(&self, d: Duration) {
        lock(&self.shared).slow = d;
    }

    /// The next `n` POST, PUT and DELETE requests are applied (their answer stored under
    /// their idempotency key), and then the connection is aborted before any of the
    /// response is sent: the client sees its request fail.
    pub fn drop_after_commit(&self, n: usize) {
        lock(&self.shared).drop_next = n;
    }

    /// Each of the next `n` POST, PUT and DELETE requests is delivered twice, as a network
    /// that duplicates a request would: the second delivery meets the same idempotency
    /// check (answered from the store with a key, applied again without). The client gets
    /// the first delivery's answer.
    pub fn duplicate_next(&self, n: usize) {
        lock(&self.shared).duplicate_next = n;
    }

    /// The live records, by id (in order of creation).
    pub fn records(&self) -> Vec<Stored> {
        lock(&self.shared).records.values().cloned().collect()
    }

    /// How many records were ever created per zone and name, deleted ones included.
    pub fn creates_by_name(&self) -> BTreeMap<(String, String), usize> {
        lock(&self.shared).creates.clone()
    }

    /// How many records were deleted per zone and name.
    pub fn deletes_by_name(&self) -> BTreeMap<(String, String), usize> {
        lock(&self.shared).deletes.clone()
    }

    /// The counts so far.
    pub fn stats(&self) -> Stats {
        lock(&self.shared).stats.clone()
    }

    /// The `Authorization` header of every request that carried one, in order of arrival.
    pub fn authorizations(&self) -> Vec<String> {
        lock(&self.shared).authorizations.clone()
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Every request: counted, its credential kept, delayed if asked, then answered (or not).
async fn handle(State(shared): State<Shared>, request: Request) -> Response {
    let slow = {
        let mut inner = lock(&shared);
        inner.stats.requests += 1;
        if let Some(auth) = request.headers().get(header::AUTHORIZATION) {
            let auth = String::from_utf8_lossy(auth.as_bytes()).into_owned();
            inner.authorizations.push(auth);
        }
        inner.slow
    };
    if !slow.is_zero() {
        tokio::time::sleep(slow).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(body) = axum::body::to_bytes(body, 1 << 20).await else {
        return Answer::error(StatusCode::BAD_REQUEST, "unreadable body").into_response();
    };
    let path: Vec<&str> = parts
        .uri
        .path()
        .trim_start_matches('/')
        .split('/')
        .collect();
    // `/away/REST`, any method: 307 to the same server by another name (`localhost`), the
    // way an API moves a client elsewhere (a test checks the host refuses to follow it
    // out of a plugin's allow-list).
    if path.first() == Some(&"away") {
        let port = parts
            .headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .and_then(|h| h.rsplit(':').next())
            .unwrap_or("80")
            .to_string();
        return Answer {
            location: Some(format!("http://localhost:{port}/{}", path[1..].join("/"))),
            ..Answer::empty(StatusCode::TEMPORARY_REDIRECT)
        }
        .into_response();
    }
    if !matches!(parts.method, Method::POST | Method::PUT | Method::DELETE) {
        let mut inner = lock(&shared);
        let answer = read(&inner, &parts.method, &path, parts.uri.query());
        if answer.status == StatusCode::NOT_FOUND {
            inner.stats.not_found += 1;
        }
        return answer.into_response();
    }
    let key = parts
        .headers
        .get("idempotency-key")
        .map(|k| String::from_utf8_lossy(k.as_bytes()).into_owned());
    let (answer, dropped) = {
        let mut inner = lock(&shared);
        if inner.fail_next > 0 {
            inner.fail_next -= 1;
            inner.stats.injected_failures += 1;
            return Answer::error(StatusCode::INTERNAL_SERVER_ERROR, "injected").into_response();
        }
        let dropped = take(&mut inner.drop_next);
        let twice = take(&mut inner.duplicate_next);
        let answer = deliver(&mut inner, key.as_deref(), &parts.method, &path, &body);
        if twice {
            deliver(&mut inner, key.as_deref(), &parts.method, &path, &body);
        }
        if dropped {
            inner.stats.dropped_after_commit += 1;
        }
        (answer, dropped)
    };
    if dropped {
        return aborted();
    }
    answer.into_response()
}

/// Takes one from `count` if it is not zero; whether it did.
fn take(count: &mut usize) -> bool {
    let some = *count > 0;
    *count = count.saturating_sub(1);
    some
}

/// A response whose body fails at once. Hyper gives up on the connection when the body
/// fails, and the failure comes in the same turn as the response head, before the head
/// is written out: the client sees the connection close with no response at all.
fn aborted() -> Response {
    let failing = futures::stream::once(async {
        Err::<Bytes, _>(std::io::Error::other("dropped after commit"))
    });
    Response::new(Body::from_stream(failing))
}

/// A GET (or another method that changes nothing).
fn read(inner: &Inner, method: &Method, path: &[&str], query: Option<&str>) -> Answer {
    match (method, path) {
        (&Method::GET, ["zones", zone, "records", id]) => match find(inner, zone, id) {
            Some(n) => Answer::json(StatusCode::OK, show(&inner.records[&n])),
            None => Answer::error(StatusCode::NOT_FOUND, "no such record"),
        },
        (&Method::GET, ["redirect"]) => match redirect_target(query) {
            Some(to) => Answer {
                location: Some(to),
                ..Answer::empty(StatusCode::TEMPORARY_REDIRECT)
            },
            None => Answer::error(StatusCode::BAD_REQUEST, "redirect needs ?to=URL"),
        },
        (_, ["zones", _, "records", _]) | (_, ["redirect"]) => {
            Answer::error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed")
        }
        _ => Answer::error(StatusCode::NOT_FOUND, "no such route"),
    }
}

/// The `to` parameter of the query, percent-decoded.
fn redirect_target(query: Option<&str>) -> Option<String> {
    let url = reqwest::Url::parse(&format!("http://outside/?{}", query?)).ok()?;
    url.query_pairs()
        .find(|(k, _)| k == "to")
        .map(|(_, v)| v.into_owned())
}

/// One delivery of a POST, PUT or DELETE to the application: answered from the store if
/// its key was seen, else applied, and its answer stored under its key if a change was made.
fn deliver(
    inner: &mut Inner,
    key: Option<&str>,
    method: &Method,
    path: &[&str],
    body: &[u8],
) -> Answer {
    if let Some(stored) = key.and_then(|k| inner.idempotent.get(k)) {
        let stored = stored.clone();
        inner.stats.duplicates += 1;
        return stored;
    }
    let answer = apply(inner, method, path, body);
    if answer.status == StatusCode::NOT_FOUND {
        inner.stats.not_found += 1;
    }
    if let Some(k) = key
        && answer.status.is_success()
    {
        inner.idempotent.insert(k.to_string(), answer.clone());
    }
    answer
}

/// Applies a POST, PUT or DELETE.
fn apply(inner: &mut Inner, method: &Method, path: &[&str], body: &[u8]) -> Answer {
    match (method, path) {
        (&Method::POST, ["zones", zone, "records"]) => {
            let Ok(record) = serde_json::from_slice::<Record>(body) else {
                return Answer::error(StatusCode::BAD_REQUEST, "the body is not a record");
            };
            inner.last_id += 1;
            let stored = Stored {
                id: format!("r-{}", inner.last_id),
                zone: zone.to_string(),
                name: record.name,
                kind: record.kind,
                value: record.value,
                ttl: record.ttl,
                updates: 0,
            };
            *inner
                .creates
                .entry((stored.zone.clone(), stored.name.clone()))
                .or_default() += 1;
            inner.stats.creates += 1;
            let answer = Answer::json(StatusCode::CREATED, show(&stored));
            inner.records.insert(inner.last_id, stored);
            answer
        }
        (&Method::PUT, ["zones", zone, "records", id]) => {
            let Ok(record) = serde_json::from_slice::<Record>(body) else {
                return Answer::error(StatusCode::BAD_REQUEST, "the body is not a record");
            };
            let Some(n) = find(inner, zone, id) else {
                return Answer::error(StatusCode::NOT_FOUND, "no such record");
            };
            let stored = inner.records.get_mut(&n).expect("found above");
            stored.name = record.name;
            stored.kind = record.kind;
            stored.value = record.value;
            stored.ttl = record.ttl;
            stored.updates += 1;
            let answer = Answer::json(StatusCode::OK, show(stored));
            inner.stats.updates += 1;
            answer
        }
        (&Method::DELETE, ["zones", zone, "records", id]) => {
            let Some(n) = find(inner, zone, id) else {
                return Answer::error(StatusCode::NOT_FOUND, "no such record");
            };
            let gone = inner.records.remove(&n).expect("found above");
            *inner.deletes.entry((gone.zone, gone.name)).or_default() += 1;
            inner.stats.deletes += 1;
            Answer::empty(StatusCode::NO_CONTENT)
        }
        (_, ["zones", _, "records"] | ["zones", _, "records", _]) => {
            Answer::error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed")
        }
        _ => Answer::error(StatusCode::NOT_FOUND, "no such route"),
    }
}

/// The number of record `id` if it lives in `zone`.
fn find(inner: &Inner, zone: &str, id: &str) -> Option<u64> {
    let n = id.strip_prefix("r-")?.parse().ok()?;
    inner.records.get(&n).filter(|r| r.zone == zone).map(|_| n)
}

/// A record as the API answers it.
fn show(r: &Stored) -> serde_json::Value {
    json!({
        "id": r.id,
        "zone": r.zone,
        "name": r.name,
        "type": r.kind,
        "value": r.value,
        "ttl": r.ttl,
    })
}
