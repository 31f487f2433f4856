//! What the host tells about itself: the Prometheus registry ([`metrics`]), readiness flags
//! ([`health`]), the `/healthz`, `/readyz` and `/metrics` endpoint ([`http`]) and its
//! connection limits ([`connections`]), and the container's memory limit ([`cgroup`]).
//! No Kubernetes client here: everything above reports into it.

pub mod cgroup;
pub mod connections;
pub mod health;
pub mod http;
pub mod metrics;
