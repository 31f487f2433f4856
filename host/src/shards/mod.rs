//! Scale out (issue "Scale out", in progress): replicas that each reconcile and cache only
//! their share of the objects, on Kubernetes' own coordination (Leases, labels, watches), in
//! the controller-sharding design. Built so far, tested, not yet wired into `wasmop run`:
//! [`ring`] (consistent hashing of object UIDs onto shards, virtual nodes), [`members`]
//! (which shards are live, from their shard Leases: each replica's own, held with the
//! leader election's renewal and fencing, labelled with the ring; tested against the API
//! server in `tests/lease.rs`) and [`assign`] (the sharder's move for one
//! object: assign, drain first, or stay), [`sharder`] (a pass of the sharder over one kind and
//! a shard's acknowledgement of a drain, as label patches with resourceVersion
//! preconditions; tested against the API server in `tests/lease.rs`). Next: running them in
//! `wasmop run` (the leader's sharder loop; each shard acknowledging in its reconcile),
//! label-selected caches per shard behind the shard fence, owned objects following their
//! owner.

pub mod assign;
pub mod members;
pub mod ring;
pub mod running;
pub mod scope;
pub mod sharder;
