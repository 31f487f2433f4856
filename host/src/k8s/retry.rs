//! Retrying what the API server asks to have retried, without doubling a write and without
//! passing the fence by the back door.
//!
//! kube's client retries 429, 503 and 504 answers by itself (up to 15 times, honouring
//! `Retry-After`), underneath every layer the host adds. Two things are wrong with that for
//! an operator: a 504 says the server gave up waiting, not that it did nothing, so a
//! repeated `POST` (a create with a generated name) can make a second object; and a retry
//! sent seconds later from below the fence goes out even if the leadership was lost in the
//! meantime. The host therefore turns kube's retry off and puts this one above the fence:
//! every attempt passes the fence (and is counted), and a `POST` is repeated only on 429
//! and 503, which say the request was not carried out.

use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use kube::client::retry::RetryPolicy;
use tower::BoxError;
use tower::retry::Policy;

/// kube's server-aware retry policy, minus the repeats that can double a write.
#[derive(Clone)]
pub struct SafeRetry(RetryPolicy);

impl SafeRetry {
    /// The policy of kube's default client (exponential backoff, `Retry-After` honoured).
    pub fn new() -> Self {
        SafeRetry(RetryPolicy::server_retry())
    }
}

impl Default for SafeRetry {
    fn default() -> Self {
        Self::new()
    }
}

/// Whether an answer of `status` to a request of `method` may be repeated: a 504 leaves it
/// open whether a `POST` was carried out, so a create is not repeated on it.
pub fn may_repeat(method: &Method, status: StatusCode) -> bool {
    !(*method == Method::POST && status == StatusCode::GATEWAY_TIMEOUT)
}

impl<Res> Policy<Request<Body>, Response<Res>, BoxError> for SafeRetry {
    type Future = tokio::time::Sleep;

    fn retry(
        &mut self,
        req: &mut Request<Body>,
        result: &mut Result<Response<Res>, BoxError>,
    ) -> Option<Self::Future> {
        if let Ok(resp) = result
            && !may_repeat(req.method(), resp.status())
        {
            return None;
        }
        self.0.retry(req, result)
    }

    fn clone_request(&mut self, req: &Request<Body>) -> Option<Request<Body>> {
        <RetryPolicy as Policy<Request<Body>, Response<Res>, BoxError>>::clone_request(
            &mut self.0,
            req,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_create_is_not_repeated_on_a_gateway_timeout_but_on_throttling() {
        assert!(!may_repeat(&Method::POST, StatusCode::GATEWAY_TIMEOUT));
        assert!(may_repeat(&Method::POST, StatusCode::TOO_MANY_REQUESTS));
        assert!(may_repeat(&Method::POST, StatusCode::SERVICE_UNAVAILABLE));
        assert!(may_repeat(&Method::PATCH, StatusCode::GATEWAY_TIMEOUT));
        assert!(may_repeat(&Method::DELETE, StatusCode::GATEWAY_TIMEOUT));
    }

    #[tokio::test]
    async fn the_policy_stops_at_a_create_timeout_and_waits_on_throttling() {
        let mut p = SafeRetry::new();
        let mut post = Request::post("/api/v1/namespaces/d/pods")
            .body(Body::empty())
            .unwrap();
        let mut timeout: Result<Response<()>, BoxError> = Ok(Response::builder()
            .status(StatusCode::GATEWAY_TIMEOUT)
            .body(())
            .unwrap());
        assert!(p.retry(&mut post, &mut timeout).is_none());
        let mut throttled: Result<Response<()>, BoxError> = Ok(Response::builder()
            .status(StatusCode::TOO_MANY_REQUESTS)
            .body(())
            .unwrap());
        assert!(p.retry(&mut post, &mut throttled).is_some());
        let mut created: Result<Response<()>, BoxError> = Ok(Response::builder()
            .status(StatusCode::CREATED)
            .body(())
            .unwrap());
        assert!(p.retry(&mut post, &mut created).is_none());
    }
}
