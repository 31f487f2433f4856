//! Scale out (issue "Scale out", in progress): replicas that each reconcile and cache only
//! their share of the objects, on Kubernetes' own coordination (Leases, labels, watches), in
//! the controller-sharding design. Built so far, tested, not yet wired into `wasmop run`:
//! [`ring`] (consistent hashing of object UIDs onto shards, virtual nodes), [`members`]
//! (which shards are live, from their shard Leases: each replica's own, held with the
//! leader election's renewal and fencing, labelled with the ring; tested against the API
//! server in `tests/lease.rs`) and [`assign`] (the sharder's move for one
//! object: assign, drain first, or stay). Next: the sharder and the shards talking through
//! those labels, label-selected caches per shard, owned objects following their owner.

pub mod assign;
pub mod members;
pub mod ring;
