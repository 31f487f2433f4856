//! A loopback TCP relay to the API server that can break the link and mend it: it takes one
//! client (an elector, a host replica) off the network while the others keep theirs. TLS
//! passes through untouched (the API server's certificate names 127.0.0.1, whatever the
//! port). Stopped when dropped.

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

/// How a relay breaks the link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fault {
    /// Connections are closed and new ones refused: requests fail at once.
    Refuse,
    /// Connections are closed; new ones are accepted and never answered: requests hang.
    Blackhole,
}

/// A loopback TCP relay to the API server that can break the link, to take one elector
/// off the network while the other keeps its connection.
pub struct Relay {
    /// The loopback port it listens on.
    pub port: u16,
    fault: watch::Sender<Option<Fault>>,
    task: JoinHandle<()>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Relay {
    /// Starts relaying to `upstream` (`host:port`).
    pub async fn start(upstream: String) -> anyhow::Result<Relay> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let (fault, mut faulted) = watch::channel(None);
        let task = tokio::spawn(async move {
            let mut connections = JoinSet::new();
            let mut held = Vec::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let Ok((mut inbound, _)) = accepted else { return };
                        if faulted.borrow().is_some() {
                            held.push(inbound);
                            continue;
                        }
                        let upstream = upstream.clone();
                        connections.spawn(async move {
                            if let Ok(mut outbound) = TcpStream::connect(upstream).await {
                                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound)
                                    .await;
                            }
                        });
                    }
                    changed = faulted.changed() => {
                        connections.abort_all();
                        // Healed or broken anew: whatever was held sees its connection end.
                        held.clear();
                        let fault = *faulted.borrow();
                        if changed.is_err() || fault == Some(Fault::Refuse) {
                            return;
                        }
                    }
                }
            }
        });
        Ok(Relay { port, fault, task })
    }

    /// Breaks the link.
    pub fn break_link(&self, fault: Fault) {
        self.fault.send_replace(Some(fault));
    }

    /// Mends a link broken with [`Fault::Blackhole`]: new connections are relayed again.
    pub fn heal(&self) {
        self.fault.send_replace(None);
    }
}
