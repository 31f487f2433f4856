//! The requests a client sends to the API server: counted by verb into
//! [`Metrics::api_requests`] (what a workload costs the API server, as the host sees it), and
//! the answer's status code recorded on the `write` span ([`write_span`]) each write is sent
//! from, so that a trace shows every write of a reconcile with what the API server said.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Method, Request, Response};
use tower::{Layer, Service};
use tracing::Span;

use crate::telemetry::metrics::{Metrics, VerbLabels};

/// The verb of a request: the method in lower case, or `watch` for a GET with `watch=true`.
pub fn verb_of<B>(req: &Request<B>) -> &'static str {
    match *req.method() {
        Method::GET
            if req
                .uri()
                .query()
                .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1")) =>
        {
            "watch"
        }
        Method::GET => "get",
        Method::POST => "post",
        Method::PUT => "put",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "other",
    }
}

/// The tower layer that counts every request passing through.
#[derive(Clone)]
pub struct CountLayer(pub Arc<Metrics>);

impl<S> Layer<S> for CountLayer {
    type Service = Counted<S>;

    fn layer(&self, inner: S) -> Counted<S> {
        Counted {
            inner,
            metrics: self.0.clone(),
        }
    }
}

/// A service that counts its requests by verb.
#[derive(Clone)]
pub struct Counted<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

impl<S, B> Service<Request<B>> for Counted<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> S::Future {
        self.metrics
            .api_requests
            .get_or_create(&VerbLabels {
                verb: verb_of(&req).to_string(),
            })
            .inc();
        self.inner.call(req)
    }
}

/// The field of a [`write_span`] that [`StatusLayer`] fills with the HTTP status code.
pub const STATUS_FIELD: &str = "http.response.status_code";

/// A span for one write to the API server (`verb` is the HTTP method), a child of the
/// current span (the reconcile's); a write to a subresource records `subresource`. Send the
/// write from inside it (`.instrument(span)`):
/// a client with [`StatusLayer`] records the answer's status code on it; a create by
/// generated name records the `name` it got. When no subscriber wants it (the log off at
/// `info`, no trace export) the span is disabled and costs next to nothing.
pub fn write_span(verb: &'static str, kind: &str, namespace: Option<&str>, name: &str) -> Span {
    tracing::info_span!(
        "write",
        otel.name = %format_args!("{verb} {kind}"),
        otel.kind = "client",
        otel.status_code = tracing::field::Empty,
        otel.status_description = tracing::field::Empty,
        verb,
        kind,
        namespace,
        name = (!name.is_empty()).then_some(name),
        subresource = tracing::field::Empty,
        http.response.status_code = tracing::field::Empty,
    )
}

/// Marks the current span (a [`write_span`]) as failed, with why.
pub fn write_failed(error: &dyn std::fmt::Display) {
    let span = Span::current();
    span.record("otel.status_code", "error");
    span.record("otel.status_description", tracing::field::display(error));
}

/// The tower layer that records each response's status code on the span the request was
/// sent from, when that span has [`STATUS_FIELD`] (a [`write_span`]); other requests (reads,
/// watches, Lease renewals) pass untouched. Every attempt of a retried write records its
/// code; the last one stays. Whether a code is a failure is the caller's to say
/// ([`write_failed`]): a 404 answering a delete is not.
#[derive(Clone, Copy, Debug, Default)]
pub struct StatusLayer;

impl<S> Layer<S> for StatusLayer {
    type Service = StatusRecorded<S>;

    fn layer(&self, inner: S) -> StatusRecorded<S> {
        StatusRecorded { inner }
    }
}

/// A service that records its responses' status codes on the sending span.
#[derive(Clone, Debug)]
pub struct StatusRecorded<S> {
    inner: S,
}

impl<S, B, RB> Service<Request<B>> for StatusRecorded<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = futures::future::Either<S::Future, Recorded<S::Future>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        // The buffers of the client stack carry the caller's span to this call.
        let span = Span::current();
        let future = self.inner.call(req);
        if span.field(STATUS_FIELD).is_none() {
            return futures::future::Either::Left(future);
        }
        futures::future::Either::Right(Recorded {
            inner: Box::pin(future),
            span,
        })
    }
}

/// A response future that records the status code on `span` when it completes.
pub struct Recorded<F> {
    inner: Pin<Box<F>>,
    span: Span,
}

impl<F, RB, E> Future for Recorded<F>
where
    F: Future<Output = Result<Response<RB>, E>>,
{
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let result = std::task::ready!(self.inner.as_mut().poll(cx));
        if let Ok(response) = &result {
            let code = response.status().as_u16();
            self.span.record(STATUS_FIELD, i64::from(code));
        }
        Poll::Ready(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_of_requests() {
        let req = |m: Method, uri: &str| Request::builder().method(m).uri(uri).body(()).unwrap();
        assert_eq!(
            verb_of(&req(
                Method::GET,
                "/api/v1/namespaces/default/pods?watch=true&resourceVersion=1"
            )),
            "watch"
        );
        assert_eq!(
            verb_of(&req(
                Method::GET,
                "/api/v1/namespaces/default/pods?limit=500"
            )),
            "get"
        );
        assert_eq!(
            verb_of(&req(Method::POST, "/api/v1/namespaces/default/pods")),
            "post"
        );
        assert_eq!(
            verb_of(&req(Method::DELETE, "/api/v1/namespaces/default/pods/a")),
            "delete"
        );
    }

    /// Every value recorded on a span after its creation: (span name, field, value).
    #[derive(Clone, Default)]
    struct Seen(Arc<std::sync::Mutex<Vec<(String, String, String)>>>);

    struct Fields<'a>(&'a str, &'a mut Vec<(String, String, String)>);

    impl tracing::field::Visit for Fields<'_> {
        fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
            let (span, field) = (self.0.to_string(), field.name().to_string());
            self.1.push((span, field, format!("{value:?}")));
        }
    }

    impl<S> tracing_subscriber::Layer<S> for Seen
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        fn on_record(
            &self,
            id: &tracing::span::Id,
            values: &tracing::span::Record<'_>,
            ctx: tracing_subscriber::layer::Context<'_, S>,
        ) {
            let name = ctx.metadata(id).map_or("?", |m| m.name());
            values.record(&mut Fields(name, &mut self.0.lock().unwrap()));
        }
    }

    #[tokio::test]
    async fn the_status_code_lands_on_the_write_span_it_was_sent_from() {
        use tracing_subscriber::layer::SubscriberExt;
        let seen = Seen::default();
        let _default =
            tracing::subscriber::set_default(tracing_subscriber::registry().with(seen.clone()));
        let answer = |_req: Request<()>| async {
            Ok::<_, std::convert::Infallible>(Response::builder().status(201).body(()).unwrap())
        };
        let mut svc = StatusLayer.layer(tower::service_fn(answer));
        let span = write_span("POST", "Pod", Some("default"), "");
        let sent = span.in_scope(|| svc.call(Request::new(())));
        assert_eq!(sent.await.unwrap().status(), 201);
        // A request from no write span (a read, a watch) records nothing.
        let other = tracing::info_span!("reconcile", object = "default/a");
        let sent = other.in_scope(|| svc.call(Request::new(())));
        sent.await.unwrap();
        svc.call(Request::new(())).await.unwrap();
        let seen = seen.0.lock().unwrap().clone();
        assert_eq!(
            seen,
            [("write".into(), STATUS_FIELD.into(), "201".into())],
            "{seen:?}"
        );
    }
}
