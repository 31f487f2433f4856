//! What a kind cache takes in: the objects of its selection as they are now, then every
//! change. The current objects come from a *consistent streaming list*: a watch asked to
//! send the current objects first (`sendInitialEvents`, `resourceVersionMatch=NotOlderThan`)
//! with no resourceVersion, so the API server serves them from its watch cache once that
//! cache has caught up with storage (a consistent read: every write acknowledged before it
//! is in it, also the last writes of a process this one replaces), one object at a time as
//! it arrives, and the watch goes on from there. kube-runtime's watcher lists in pages of
//! 500 (each page decoded whole before the next is asked for) or, streaming, asks for
//! resourceVersion 0 (any version, possibly older than writes already acknowledged).
//!
//! An API server that refuses a streaming list (one older than Kubernetes 1.27, or with the
//! `WatchList` feature off) is read with kube-runtime's watcher, in consistent pages.
//!
//! Each object of a watch is decoded straight into its parts ([`Incoming`]), not through
//! `DynamicObject`'s own decoding, which buffers every object whole first (its body is a
//! `serde(flatten)`).
//!
//! The events are kube-runtime's ([`Event`]): `Init`, an `InitApply` per object, `InitDone`,
//! then `Apply` and `Delete`; a desync (410 Gone) lists again from `Init`. Errors are items
//! of the stream, for the caller's backoff.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ApiResource, DynamicObject, TypeMeta, WatchEvent, WatchParams};
use kube::core::{DynamicResourceScope, Status};
use kube::runtime::watcher::{self, Event};
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::{Map, Value};

/// An object as a watch sends it, decoded in one pass: `apiVersion` and `kind`, the
/// metadata typed, every other field as JSON. It becomes the `DynamicObject` the caches
/// hold.
#[derive(Clone, Debug)]
pub(crate) struct Incoming(DynamicObject);

impl Incoming {
    pub(crate) fn into_object(self) -> DynamicObject {
        self.0
    }
}

impl<'de> Deserialize<'de> for Incoming {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Incoming, D::Error> {
        d.deserialize_map(Fields)
    }
}

/// The visitor of an object's top-level fields.
struct Fields;

impl<'de> Visitor<'de> for Fields {
    type Value = Incoming;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Kubernetes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Incoming, A::Error> {
        let (mut api_version, mut kind, mut metadata) = (None, None, None);
        let mut data = Map::new();
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match key.as_ref() {
                "apiVersion" => api_version = Some(map.next_value::<String>()?),
                "kind" => kind = Some(map.next_value::<String>()?),
                "metadata" => metadata = Some(map.next_value::<ObjectMeta>()?),
                _ => {
                    let value = map.next_value::<Value>()?;
                    data.insert(key.into_owned(), value);
                }
            }
        }
        let types = match (api_version, kind) {
            (Some(api_version), Some(kind)) => Some(TypeMeta { api_version, kind }),
            _ => None,
        };
        Ok(Incoming(DynamicObject {
            types,
            metadata: metadata.unwrap_or_default(),
            data: Value::Object(data),
        }))
    }
}

impl kube::Resource for Incoming {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        DynamicObject::group(dt)
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        DynamicObject::version(dt)
    }

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        DynamicObject::kind(dt)
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        DynamicObject::api_version(dt)
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        DynamicObject::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.0.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.0.metadata
    }
}

/// The annotation of the bookmark that ends a streaming list's current objects.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";
/// How long the API server keeps one watch open (it closes it then; the feed opens the
/// next from the last version seen).
const WATCH_SECONDS: u32 = 290;
/// A watch that sends nothing, not even a bookmark, for longer than it was asked to stay
/// open is taken for dead (a connection lost without a close) and opened again.
const IDLE: Duration = Duration::from_secs(WATCH_SECONDS as u64 + 5);

type Changes = BoxStream<'static, kube::Result<WatchEvent<Incoming>>>;

/// Where the feed is.
enum State {
    /// A streaming list is to be asked for.
    Empty,
    /// The current objects arrive.
    Listing(Changes),
    /// The changes after `version` arrive; without a stream, a watch from `version` is to
    /// be opened.
    Watching {
        version: String,
        changes: Option<Changes>,
    },
    /// The API server does not stream lists: kube-runtime's watcher, from here on.
    Paged(BoxStream<'static, watcher::Result<Event<DynamicObject>>>),
}

/// The feed of the objects of `api` (those matching `labels`, when given); `paged` reads
/// the same objects, for an API server that cannot stream lists.
pub(crate) fn feed(
    api: Api<Incoming>,
    paged: Api<DynamicObject>,
    labels: Option<String>,
) -> impl Stream<Item = watcher::Result<Event<DynamicObject>>> + Send + 'static {
    let apis = (api, paged);
    futures::stream::unfold(
        (apis, labels, State::Empty),
        |(apis, labels, state)| async move {
            let (item, next) = step(&apis, labels.as_deref(), state).await;
            Some((item, (apis, labels, next)))
        },
    )
}

fn params(labels: Option<&str>) -> WatchParams {
    let wp = WatchParams::default().timeout(WATCH_SECONDS);
    match labels {
        Some(l) => wp.labels(l),
        None => wp,
    }
}

/// Whether an API server's refusal of a streaming list says it cannot stream lists (as
/// opposed to a refusal any watch would get: no permission, a bad selector).
fn cannot_stream(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => {
            matches!(s.code, 400 | 422) && s.message.contains("sendInitialEvents")
        }
        _ => false,
    }
}

fn gone(s: &Status) -> bool {
    s.code == 410
}

async fn next_change(changes: &mut Changes) -> Option<kube::Result<WatchEvent<DynamicObject>>> {
    let change = tokio::time::timeout(IDLE, changes.next()).await.ok()??;
    Some(change.map(|c| match c {
        WatchEvent::Added(o) => WatchEvent::Added(o.into_object()),
        WatchEvent::Modified(o) => WatchEvent::Modified(o.into_object()),
        WatchEvent::Deleted(o) => WatchEvent::Deleted(o.into_object()),
        WatchEvent::Bookmark(b) => WatchEvent::Bookmark(b),
        WatchEvent::Error(s) => WatchEvent::Error(s),
    }))
}

/// One item of the feed and where it is then.
async fn step(
    (api, paged): &(Api<Incoming>, Api<DynamicObject>),
    labels: Option<&str>,
    mut state: State,
) -> (watcher::Result<Event<DynamicObject>>, State) {
    loop {
        state = match state {
            State::Empty => match api.watch(&params(labels).initial_events(), "").await {
                Ok(changes) => return (Ok(Event::Init), State::Listing(changes.boxed())),
                Err(e) if cannot_stream(&e) => {
                    tracing::info!(error = %e, "the API server does not stream lists: listing in pages");
                    let mut config = watcher::Config::default();
                    if let Some(l) = labels {
                        config = config.labels(l);
                    }
                    State::Paged(watcher::watcher(paged.clone(), config).boxed())
                }
                Err(e) => return (Err(watcher::Error::WatchStartFailed(e)), State::Empty),
            },
            State::Listing(mut changes) => match next_change(&mut changes).await {
                Some(Ok(WatchEvent::Added(o) | WatchEvent::Modified(o))) => {
                    return (Ok(Event::InitApply(o)), State::Listing(changes));
                }
                // Not sent while the current objects arrive.
                Some(Ok(WatchEvent::Deleted(_))) => State::Listing(changes),
                Some(Ok(WatchEvent::Bookmark(b))) => {
                    if b.metadata.annotations.contains_key(INITIAL_EVENTS_END) {
                        return (
                            Ok(Event::InitDone),
                            State::Watching {
                                version: b.metadata.resource_version,
                                changes: Some(changes),
                            },
                        );
                    }
                    State::Listing(changes)
                }
                // The list is started again from `Init`: the cache drops what it buffered.
                Some(Ok(WatchEvent::Error(s))) => {
                    return (Err(watcher::Error::WatchError(s)), State::Empty);
                }
                Some(Err(e)) => return (Err(watcher::Error::WatchFailed(e)), State::Empty),
                None => State::Empty,
            },
            State::Watching {
                version,
                changes: Some(mut changes),
            } => match next_change(&mut changes).await {
                Some(Ok(WatchEvent::Added(o) | WatchEvent::Modified(o))) => {
                    let version = o.metadata.resource_version.clone().unwrap_or(version);
                    let changes = Some(changes);
                    return (Ok(Event::Apply(o)), State::Watching { version, changes });
                }
                Some(Ok(WatchEvent::Deleted(o))) => {
                    let version = o.metadata.resource_version.clone().unwrap_or(version);
                    let changes = Some(changes);
                    return (Ok(Event::Delete(o)), State::Watching { version, changes });
                }
                Some(Ok(WatchEvent::Bookmark(b))) => State::Watching {
                    version: b.metadata.resource_version,
                    changes: Some(changes),
                },
                Some(Ok(WatchEvent::Error(s))) if gone(&s) => {
                    return (Err(watcher::Error::WatchError(s)), State::Empty);
                }
                Some(Ok(WatchEvent::Error(s))) => {
                    let changes = None;
                    return (
                        Err(watcher::Error::WatchError(s)),
                        State::Watching { version, changes },
                    );
                }
                Some(Err(e)) => {
                    let changes = None;
                    return (
                        Err(watcher::Error::WatchFailed(e)),
                        State::Watching { version, changes },
                    );
                }
                None => State::Watching {
                    version,
                    changes: None,
                },
            },
            State::Watching {
                version,
                changes: None,
            } => match api.watch(&params(labels), &version).await {
                Ok(changes) => State::Watching {
                    version,
                    changes: Some(changes.boxed()),
                },
                Err(kube::Error::Api(s)) if gone(&s) => {
                    return (Err(watcher::Error::WatchError(s)), State::Empty);
                }
                Err(e) => {
                    let changes = None;
                    return (
                        Err(watcher::Error::WatchStartFailed(e)),
                        State::Watching { version, changes },
                    );
                }
            },
            State::Paged(mut pages) => match pages.next().await {
                Some(item) => return (item, State::Paged(pages)),
                None => State::Empty,
            },
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Value {
        json!({"kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": "a", "namespace": "ns", "resourceVersion": "7",
                "labels": {"app": "x"},
                "ownerReferences": [{"apiVersion": "app.example.com/v1alpha1",
                    "kind": "PodReplica", "name": "p", "uid": "u", "controller": true}],
                "managedFields": [{"manager": "kwok", "operation": "Update",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}}]},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
    }

    #[test]
    fn an_object_decodes_as_dynamic_object_decodes_it() {
        let text = pod().to_string();
        let ours = serde_json::from_str::<Incoming>(&text)
            .unwrap()
            .into_object();
        let theirs: DynamicObject = serde_json::from_str(&text).unwrap();
        assert_eq!(ours.types, theirs.types);
        assert_eq!(ours.metadata, theirs.metadata);
        assert_eq!(ours.data, theirs.data);
        // Without apiVersion and kind (a list's items may come so), and with no metadata.
        let bare = serde_json::from_str::<Incoming>(r#"{"spec": {"size": 2}}"#)
            .unwrap()
            .into_object();
        assert_eq!(bare.types, None);
        assert_eq!(bare.metadata, ObjectMeta::default());
        assert_eq!(bare.data, json!({"spec": {"size": 2}}));
    }

    #[test]
    fn watch_events_decode_with_their_objects_and_the_end_of_the_list() {
        let added = json!({"type": "ADDED", "object": pod()}).to_string();
        match serde_json::from_str::<WatchEvent<Incoming>>(&added).unwrap() {
            WatchEvent::Added(o) => assert_eq!(o.0.metadata.name.as_deref(), Some("a")),
            other => panic!("{other:?}"),
        }
        let end = json!({"type": "BOOKMARK", "object": {"kind": "Pod", "apiVersion": "v1",
            "metadata": {"resourceVersion": "11627",
                "annotations": {INITIAL_EVENTS_END: "true"}}}})
        .to_string();
        match serde_json::from_str::<WatchEvent<Incoming>>(&end).unwrap() {
            WatchEvent::Bookmark(b) => {
                assert_eq!(b.metadata.resource_version, "11627");
                assert!(b.metadata.annotations.contains_key(INITIAL_EVENTS_END));
            }
            other => panic!("{other:?}"),
        }
        assert!(serde_json::from_str::<Incoming>("[1, 2]").is_err());
    }
}
