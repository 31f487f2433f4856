//! Scale out: replicas that each reconcile and cache only their share of the objects, on
//! Kubernetes' own coordination (Leases, labels, watches), in the controller-sharding
//! design. [`ring`] (consistent hashing of object UIDs onto shards, virtual nodes),
//! [`members`] (which shards are live, from their shard Leases: each replica's own, held
//! with the leader election's renewal and fencing, labelled with the ring), [`assign`] (the
//! sharder's move for one object: assign, drain first, or stay), [`sharder`] (a pass over one
//! kind and a shard's acknowledgement of a drain, as label patches with resourceVersion
//! preconditions), [`migrate`] (objects made before sharding was on), [`custody`] (owned objects stay with their
//! controller's shard whatever their labels say), [`scope`] (what a shard watches, and the labels the host puts on what a
//! plan creates), [`running`] (the leader's sharder loop and a replica following its shard
//! Lease in `wasmop run --sharding`). A shard's drain and takeover steps inside the
//! reconcile are in [`crate::reconcile::handover`].

pub mod assign;
pub mod custody;
pub mod members;
pub mod migrate;
pub mod ring;
pub mod running;
pub mod scope;
pub mod sharder;
