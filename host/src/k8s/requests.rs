//! Counting the requests a client sends to the API server, by verb, into
//! [`Metrics::api_requests`]: what a workload costs the API server, as the host sees it.

use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Method, Request};
use tower::{Layer, Service};

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
}
