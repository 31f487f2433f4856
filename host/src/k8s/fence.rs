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
//! A write that leaves must also end in time: it carries a timeout no longer than the time
//! left on the fence when it was sent, so no request of this replica is still waiting on the
//! API server after its deadline. The fence counts the writes in flight
//! ([`Fence::writes_ended`]): a replica that steps down releases its Lease only once they
//! have ended or timed out, so a successor cannot act while an older write is still on its
//! way. A write cut off at the deadline may still be committed by the API server later (its
//! outcome is unknown): the fence counts those of the current term
//! ([`Fence::outcomes_unknown`]), and a replica that had one does not release its Lease
//! early but lets it run out for its whole duration.
//!
//! [`FenceLayer`] puts the fence into a `kube::Client`'s tower stack; the lease itself is
//! written through a client without it.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::{Method, Request};
use tower::{Layer, Service};

/// Until when this replica may write; `None` is closed, `Some(None)` open for good. Each
/// close starts a new epoch, so that work begun under one leadership can be abandoned when
/// it ends ([`Fence::closed_since`]).
#[derive(Debug)]
pub struct Fence {
    open_until: Mutex<Option<Option<Instant>>>,
    epoch: tokio::sync::watch::Sender<u64>,
    in_flight: tokio::sync::watch::Sender<usize>,
    /// Writes of the current term cut off at the deadline (their outcome unknown).
    unknown: std::sync::atomic::AtomicU64,
}

/// Until when writes may leave: `None` closed, `Some(None)` open for good.
type Window = Option<Option<Instant>>;

impl Fence {
    /// A fence that never closes (no leader election: the only replica writes).
    pub fn always_open() -> Arc<Fence> {
        Arc::new(Fence {
            open_until: Mutex::new(Some(None)),
            epoch: tokio::sync::watch::Sender::new(0),
            in_flight: tokio::sync::watch::Sender::new(0),
            unknown: Default::default(),
        })
    }

    /// A closed fence, for a replica that does not lead yet.
    pub fn closed() -> Arc<Fence> {
        Arc::new(Fence {
            open_until: Mutex::new(None),
            epoch: tokio::sync::watch::Sender::new(0),
            in_flight: tokio::sync::watch::Sender::new(0),
            unknown: Default::default(),
        })
    }

    /// Opens the fence until `deadline` (a later renewal moves it on). Opening a closed
    /// fence starts a term: nothing of it has an unknown outcome yet.
    pub fn open_until(&self, deadline: Instant) {
        let mut window = self.lock();
        if window.is_none() {
            self.unknown.store(0, std::sync::atomic::Ordering::SeqCst);
        }
        *window = Some(Some(deadline));
    }

    /// How many writes of the current term (since the fence last opened) were cut off at
    /// its deadline: the API server may still commit them.
    pub fn outcomes_unknown(&self) -> u64 {
        self.unknown.load(std::sync::atomic::Ordering::SeqCst)
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
        self.time_left_at(now).is_some()
    }

    /// How long a write leaving at `now` may take: `None` when the fence is closed (the
    /// write may not leave), `Some(None)` when it is open for good.
    pub fn time_left_at(&self, now: Instant) -> Option<Option<Duration>> {
        match *self.lock() {
            None => None,
            Some(None) => Some(None),
            Some(Some(deadline)) if now < deadline => Some(Some(deadline - now)),
            Some(Some(_)) => None,
        }
    }

    /// How many writes have left and not yet ended.
    pub fn writes_in_flight(&self) -> usize {
        *self.in_flight.borrow()
    }

    /// Resolves once no write is in flight (at once if none is). Every write ends by the
    /// deadline in force when it left, so this waits no longer than that.
    pub async fn writes_ended(&self) {
        let mut rx = self.in_flight.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Window> {
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

/// A write cut off at the fence's deadline: it left while this replica led, and had not
/// ended when the leadership it left under could end. It may or may not have been applied.
#[derive(Debug, thiserror::Error)]
#[error("{method} {path} cut off after {after:?}: the fence's deadline passed before it ended")]
pub struct WriteTimedOut {
    /// The request's method.
    pub method: Method,
    /// The request's path.
    pub path: String,
    /// The time it was given (the time left on the fence when it left).
    pub after: Duration,
}

/// Whether a client error is a write refused by the fence, or cut off at its deadline.
pub fn is_fenced_off(err: &kube::Error) -> bool {
    match err {
        kube::Error::Service(e) => {
            e.downcast_ref::<FencedOff>().is_some() || e.downcast_ref::<WriteTimedOut>().is_some()
        }
        _ => false,
    }
}

/// Whether a client error is a write cut off at the fence's deadline: sent, and its
/// outcome unknown (the API server may still commit it).
pub fn is_cut_off(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Service(e) if e.downcast_ref::<WriteTimedOut>().is_some())
}

/// A write in flight, counted on the fence until dropped.
struct InFlight(Arc<Fence>);

impl InFlight {
    fn new(fence: &Arc<Fence>) -> InFlight {
        fence.in_flight.send_modify(|n| *n += 1);
        InFlight(fence.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.send_modify(|n| *n = n.saturating_sub(1));
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
        if !is_write(req.method()) {
            let fut = self.inner.call(req);
            return Box::pin(async move { fut.await.map_err(Into::into) });
        }
        let (method, path) = (req.method().clone(), req.uri().path().to_string());
        // Counted before the window is read: whoever closes the fence and then waits for
        // the writes in flight either sees this one or it sees the fence closed.
        let counted = InFlight::new(&self.fence);
        let Some(left) = self.fence.time_left_at(Instant::now()) else {
            drop(counted);
            let refused = FencedOff { method, path };
            return Box::pin(std::future::ready(Err(refused.into())));
        };
        let fut = self.inner.call(req);
        let fence = self.fence.clone();
        Box::pin(async move {
            let _counted = counted;
            match left {
                None => fut.await.map_err(Into::into),
                Some(after) => match tokio::time::timeout(after, fut).await {
                    Ok(result) => result.map_err(Into::into),
                    Err(_) => Err({
                        fence
                            .unknown
                            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        WriteTimedOut {
                            method,
                            path,
                            after,
                        }
                    }
                    .into()),
                },
            }
        })
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

    fn write() -> Request<()> {
        Request::builder()
            .method(Method::POST)
            .uri("/api/v1/namespaces/d/pods")
            .body(())
            .unwrap()
    }

    #[tokio::test]
    async fn a_write_ends_by_the_deadline_in_force_when_it_left() {
        use tower::ServiceExt;
        // An API server that never answers.
        let stuck = tower::service_fn(|_req: Request<()>| async {
            std::future::pending::<Result<&str, BoxError>>().await
        });
        let fence = Fence::closed();
        fence.open_until(Instant::now() + Duration::from_millis(300));
        let svc = FenceLayer(fence.clone()).layer(stuck);
        let left = Instant::now();
        let cut = tokio::time::timeout(Duration::from_secs(5), svc.clone().oneshot(write()))
            .await
            .expect("the write outlived the fence's deadline")
            .unwrap_err();
        let took = left.elapsed();
        assert!(cut.downcast_ref::<WriteTimedOut>().is_some(), "{cut}");
        assert!(
            took >= Duration::from_millis(250) && took < Duration::from_secs(2),
            "cut off after {took:?}, the fence had 300 ms left"
        );
        assert!(is_fenced_off(&kube::Error::Service(cut)));
        assert_eq!(fence.writes_in_flight(), 0);
        // Its outcome is unknown until the term ends; the next term starts with none.
        assert_eq!(fence.outcomes_unknown(), 1);
        fence.open_until(Instant::now() + Duration::from_secs(60));
        assert_eq!(fence.outcomes_unknown(), 1, "a renewal keeps the term");
        fence.close();
        assert_eq!(fence.outcomes_unknown(), 1, "known after the step-down");
        fence.open_until(Instant::now() + Duration::from_millis(300));
        assert_eq!(fence.outcomes_unknown(), 0, "a new term");
        // Reads are never cut off: a watch may take as long as it likes.
        let read = Request::builder().uri("/api/v1/pods").body(()).unwrap();
        let waiting = tokio::time::timeout(Duration::from_millis(500), svc.oneshot(read)).await;
        assert!(waiting.is_err(), "a read was cut off");
    }

    #[tokio::test]
    async fn stepping_down_waits_for_the_writes_in_flight() {
        use tower::ServiceExt;
        let (release, released) = tokio::sync::watch::channel(false);
        let slow = tower::service_fn(move |_req: Request<()>| {
            let mut released = released.clone();
            async move {
                let _ = released.wait_for(|r| *r).await;
                Ok::<_, BoxError>("applied")
            }
        });
        let fence = Fence::closed();
        fence.open_until(Instant::now() + Duration::from_secs(60));
        let svc = FenceLayer(fence.clone()).layer(slow);
        let writes: Vec<_> = (0..3)
            .map(|_| tokio::spawn(svc.clone().oneshot(write())))
            .collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(fence.writes_in_flight(), 3);
        fence.close();
        let ended = {
            let fence = fence.clone();
            tokio::spawn(async move { fence.writes_ended().await })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            !ended.is_finished(),
            "writes still in flight, yet counted ended"
        );
        // A write after the close is refused, and not counted.
        let refused = svc.clone().oneshot(write()).await.unwrap_err();
        assert!(refused.downcast_ref::<FencedOff>().is_some());
        release.send_replace(true);
        for w in writes {
            assert_eq!(w.await.unwrap().unwrap(), "applied");
        }
        tokio::time::timeout(Duration::from_secs(5), ended)
            .await
            .expect("not told the writes ended")
            .unwrap();
        assert_eq!(fence.writes_in_flight(), 0);
    }
}
