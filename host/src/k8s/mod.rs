//! Talking to the API server: [`client`] (clients, the fenced one every write goes through),
//! [`fence`] (no write leaves a replica that does not hold its Lease), [`retry`] (the API
//! server's requests to retry, honoured above the fence, never doubling a create),
//! [`requests`] (requests counted by verb), [`lease`] (leader election on a
//! `coordination.k8s.io/v1` Lease), [`kinds`] (dynamic API handles and what the API server
//! serves), [`crds`] (installing CRDs) and [`merge_patch`] (the JSON merge patch between two
//! objects).

pub mod client;
pub mod crds;
pub mod fence;
pub mod kinds;
pub mod lease;
pub mod merge_patch;
pub mod requests;
pub mod retry;
