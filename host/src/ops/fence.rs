//! Leadership as a fence on writes: a mutating request (anything but GET, HEAD and OPTIONS)
//! leaves this replica only while the fence is open, checked at the moment it is sent.
//!
//! The elector opens the fence until the renew deadline of each successful renewal (the
//! start of the renewal plus `renew_deadline`) and closes it when it steps down. The fence
//! judges the time itself, so a write is refused once the deadline has passed even if the
//! elector's task has not yet run to step down (a starved runtime, a slow API server): no
//! write can leave after the moment another replica may take the lease. Reads and watches
//! always pass, so a standby keeps warm caches.
//!
//! [`FenceLayer`] puts the fence into a `kube::Client`'s tower stack; the lease itself is
//! written through a client without it.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use http::{Method, Request};
use tower::{Layer, Service};

/// Until when this replica may write; `None` is closed, `Some(None)` open for good. Each
/// close starts a new epoch, so that work begun under one leadership can be abandoned when
/// it ends ([`Fence::closed_since`]).
#[derive(Debug)]
pub struct Fence {
    open_until: Mutex<Option<Option<Instant>>>,
    epoch: tokio::sync::watch::Sender<u64>,
}

impl Fence {
    /// A fence that never closes (no leader election: the only replica writes).
    pub fn always_open() -> Arc<Fence> {
        Arc::new(Fence {
            open_until: Mutex::new(Some(None)),
            epoch: tokio::sync::watch::Sender::new(0),
        })
    }

    /// A closed fence, for a replica that does not lead yet.
    pub fn closed() -> Arc<Fence> {
        Arc::new(Fence {
            open_until: Mutex::new(None),
            epoch: tokio::sync::watch::Sender::new(0),
        })
    }

    /// Opens the fence until `deadline` (a later renewal moves it on).
    pub fn open_until(&self, deadline: Instant) {
        *self.lock() = Some(Some(deadline));
    }

    /// Closes the fence: no write leaves from now on, and a new epoch starts.
    pub fn close(&self) {
        *self.lock() = None;
        self.epoch.send_modify(|e| *e += 1);
    }

    /// The current epoch (how many times the fence was closed).
    pub fn epoch(&self) -> u64 {
        *self.epoch.borrow()
    }

    /// Resolves once the fence has been closed after `epoch` was read.
    pub async fn closed_since(&self, epoch: u64) {
        let mut rx = self.epoch.subscribe();
        let _ = rx.wait_for(|e| *e != epoch).await;
    }

    /// Whether a write may leave now.
    pub fn is_open(&self) -> bool {
        self.is_open_at(Instant::now())
    }

    /// Whether a write may leave at `now`.
    pub fn is_open_at(&self, now: Instant) -> bool {
        match *self.lock() {
            None => false,
            Some(None) => true,
            Some(Some(deadline)) => now < deadline,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Option<Instant>>> {
        self.open_until.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Whether a request changes state on the server.
pub fn is_write(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// A write refused because this replica does not (or may no longer) lead.
#[derive(Debug, thiserror::Error)]
#[error("{method} {path} refused: this replica does not hold the leadership")]
pub struct FencedOff {
    /// The request's method.
    pub method: Method,
    /// The request's path.
    pub path: String,
}

/// Whether a client error is a write refused by the fence.
pub fn is_fenced_off(err: &kube::Error) -> bool {
    match err {
        kube::Error::Service(e) => e.downcast_ref::<FencedOff>().is_some(),
        _ => false,
    }
}

/// The tower layer that puts a [`Fence`] in front of a client's service.
#[derive(Clone)]
pub struct FenceLayer(pub Arc<Fence>);

impl<S> Layer<S> for FenceLayer {
    type Service = Fenced<S>;

    fn layer(&self, inner: S) -> Fenced<S> {
        Fenced {
            inner,
            fence: self.0.clone(),
        }
    }
}

/// A service whose writes pass only while its fence is open.
#[derive(Clone)]
pub struct Fenced<S> {
    inner: S,
    fence: Arc<Fence>,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<S, B> Service<Request<B>> for Fenced<S>
where
    S: Service<Request<B>>,
    S::Error: Into<BoxError>,
    S::Response: Send + 'static,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        if is_write(req.method()) && !self.fence.is_open() {
            let refused = FencedOff {
                method: req.method().clone(),
                path: req.uri().path().to_string(),
            };
            return Box::pin(std::future::ready(Err(refused.into())));
        }
        let fut = self.inner.call(req);
        Box::pin(async move { fut.await.map_err(Into::into) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn open_until_the_deadline_and_closed_after() {
        let fence = Fence::closed();
        let t0 = Instant::now();
        assert!(!fence.is_open_at(t0));
        fence.open_until(t0 + Duration::from_secs(10));
        assert!(fence.is_open_at(t0 + Duration::from_secs(9)));
        // The deadline passes without anyone closing it: closed all the same.
        assert!(!fence.is_open_at(t0 + Duration::from_secs(10)));
        fence.open_until(t0 + Duration::from_secs(20));
        assert!(fence.is_open_at(t0 + Duration::from_secs(15)));
        fence.close();
        assert!(!fence.is_open_at(t0));
        assert!(Fence::always_open().is_open_at(t0 + Duration::from_secs(1 << 30)));
    }

    #[tokio::test]
    async fn closing_ends_the_epoch() {
        let fence = Fence::closed();
        fence.open_until(Instant::now() + Duration::from_secs(60));
        let epoch = fence.epoch();
        let waiter = {
            let fence = fence.clone();
            tokio::spawn(async move { fence.closed_since(epoch).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "ended before the fence closed");
        fence.close();
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("not woken by the close")
            .unwrap();
        // Work begun in an older epoch sees it over at once.
        tokio::time::timeout(Duration::from_secs(5), fence.closed_since(epoch))
            .await
            .expect("an older epoch is over");
    }

    #[test]
    fn only_reads_pass_a_closed_fence() {
        for m in [Method::GET, Method::HEAD, Method::OPTIONS] {
            assert!(!is_write(&m), "{m}");
        }
        for m in [Method::POST, Method::PUT, Method::PATCH, Method::DELETE] {
            assert!(is_write(&m), "{m}");
        }
    }

    #[tokio::test]
    async fn the_layer_refuses_writes_when_closed_and_passes_reads() {
        use tower::ServiceExt;
        let fence = Fence::closed();
        let inner = tower::service_fn(|_req: Request<()>| async { Ok::<_, BoxError>("sent") });
        let svc = FenceLayer(fence.clone()).layer(inner);
        let req = |m: Method| {
            Request::builder()
                .method(m)
                .uri("/api/v1/pods")
                .body(())
                .unwrap()
        };
        let refused = svc.clone().oneshot(req(Method::POST)).await.unwrap_err();
        assert!(refused.downcast_ref::<FencedOff>().is_some(), "{refused}");
        assert_eq!(svc.clone().oneshot(req(Method::GET)).await.unwrap(), "sent");
        fence.open_until(Instant::now() + Duration::from_secs(60));
        assert_eq!(
            svc.clone().oneshot(req(Method::DELETE)).await.unwrap(),
            "sent"
        );
        fence.close();
        let refused = svc.oneshot(req(Method::PATCH)).await.unwrap_err();
        let err = kube::Error::Service(refused);
        assert!(is_fenced_off(&err));
    }
}
