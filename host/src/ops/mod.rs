//! Operating the host: metrics, health and readiness over HTTP, and leader election.
//!
//! Split by concern: [`metrics`] (the Prometheus registry), [`health`] (readiness flags),
//! [`http`] (the `/healthz`, `/readyz` and `/metrics` endpoint) and [`lease`] (leader
//! election on a `coordination.k8s.io/v1` Lease) with [`fence`] (no write leaves a replica
//! that does not lead), [`requests`] (API requests counted by verb) and [`retry`]
//! (the API server's requests to retry, honoured above the fence, never doubling a create).

pub mod cgroup;
pub mod connections;
pub mod fence;
pub mod health;
pub mod http;
pub mod lease;
pub mod metrics;
pub mod requests;
pub mod retry;

pub use health::{Health, ReadyFlag};
pub use http::serve;
pub use lease::{LeaseConfig, run_elector};
pub use metrics::Metrics;
