//! What the host tells about itself: the Prometheus registry ([`metrics`]), readiness flags
//! ([`health`]), the `/healthz`, `/readyz` and `/metrics` endpoint ([`http`]) and its
//! connection limits ([`connections`]), the container's memory limit ([`cgroup`]) and the
//! counts of the last minute ([`recent`]).
//! No Kubernetes client here: everything above reports into it.

pub mod cgroup;
pub mod connections;
pub mod health;
pub mod http;
pub mod metrics;
pub mod recent;
