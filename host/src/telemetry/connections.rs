//! Connections to the ops endpoint, bounded: at most [`MAX_CONNECTIONS`] open at once (past
//! that, new ones wait in the kernel's backlog until one ends), and none kept longer than
//! [`CONNECTION_LIFETIME`], so a client that opens connections and sends nothing (or
//! trickles a request's headers) cannot hold the host's sockets and memory. The kubelet's
//! probes and a Prometheus scrape each take milliseconds; a scraper's keep-alive connection
//! is simply opened again.

use std::future::Future as _;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;

/// Connections open at once.
pub const MAX_CONNECTIONS: usize = 64;
/// The longest a connection stays open.
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(10);

/// A listener whose connections are bounded in number and lifetime (module docs).
pub struct Bounded {
    listener: TcpListener,
    slots: Arc<Semaphore>,
    lifetime: Duration,
}

impl Bounded {
    /// Bounds `listener` at `max` connections of at most `lifetime` each.
    pub fn new(listener: TcpListener, max: usize, lifetime: Duration) -> Bounded {
        Bounded {
            listener,
            slots: Arc::new(Semaphore::new(max.max(1))),
            lifetime,
        }
    }
}

impl axum::serve::Listener for Bounded {
    type Io = Connection;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Connection, SocketAddr) {
        // Past the cap nothing is accepted until a connection ends.
        let slot = match self.slots.clone().acquire_owned().await {
            Ok(slot) => slot,
            Err(_) => std::future::pending().await,
        };
        loop {
            match self.listener.accept().await {
                Ok((stream, addr)) => {
                    let ends = Box::pin(tokio::time::sleep(self.lifetime));
                    return (
                        Connection {
                            stream,
                            ends,
                            _slot: slot,
                        },
                        addr,
                    );
                }
                // Out of file descriptors and the like: wait, as axum's own listener does.
                Err(e) => {
                    tracing::debug!(error = %e, "ops endpoint: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

/// One accepted connection: reads and writes fail once its lifetime is over, and its slot
/// is given back when it is dropped.
pub struct Connection {
    stream: TcpStream,
    ends: Pin<Box<Sleep>>,
    _slot: OwnedSemaphorePermit,
}

impl Connection {
    fn over(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        self.ends
            .as_mut()
            .poll(cx)
            .is_ready()
            .then(|| io::Error::new(io::ErrorKind::TimedOut, "ops connection lifetime over"))
    }
}

impl AsyncRead for Connection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if let Some(e) = self.over(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Connection {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if let Some(e) = self.over(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
