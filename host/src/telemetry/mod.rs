//! What the host tells about itself: the Prometheus registry ([`metrics`]), readiness flags
//! ([`health`]), the `/healthz`, `/readyz` and `/metrics` endpoint ([`http`]) and its
//! connection limits ([`connections`]), the container's memory limit ([`cgroup`]), the
//! counts of the last minute ([`recent`]) and the export of its spans over OTLP
//! ([`traces`]). No Kubernetes client here: everything above reports into it.

pub mod cgroup;
pub mod connections;
pub mod health;
pub mod http;
pub mod metrics;
pub mod recent;
pub(crate) mod traces;
