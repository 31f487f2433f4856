//! The sharder's decision for one object, as a pure function (the handover protocol of the
//! controller-sharding design): an object carries the label of the shard that owns it; to
//! move it from a live shard, the sharder first asks that shard to let go (the drain
//! label), the shard stops reconciling it and acknowledges by removing both labels, and
//! only then is the object given to its new shard. A dead shard cannot reconcile, so its
//! objects move at once. No object is ever labelled for two shards, and a live shard loses
//! an object only by its own acknowledgement: two replicas never reconcile it at once.

use crate::shards::ring::Ring;

/// The label naming the shard that owns an object (value: the shard's identity).
pub const SHARD_LABEL: &str = "shard.wasmop.dev/owner";
/// The label asking the owning shard to let an object go (value: `true`).
pub const DRAIN_LABEL: &str = "shard.wasmop.dev/drain";

/// What the sharder does about one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Move {
    /// Nothing: it is where it belongs, or a drain is under way.
    Stay,
    /// Label it for this shard (it has none, or its shard is dead).
    Assign(String),
    /// Ask its live shard to let it go (set the drain label).
    Drain,
}

/// The move for an object with `uid`, labelled for `owner` (if any) and `draining` or not,
/// given the `live` members and their `ring`.
pub fn decide(
    uid: &str,
    owner: Option<&str>,
    draining: bool,
    live: &[String],
    ring: &Ring,
) -> Move {
    let Some(wanted) = ring.owner(uid) else {
        // No live shard at all: leave everything as it is until one comes.
        return Move::Stay;
    };
    match owner {
        None => Move::Assign(wanted.to_string()),
        Some(o) if !live.iter().any(|l| l == o) => Move::Assign(wanted.to_string()),
        Some(o) if o == wanted => Move::Stay,
        // A live shard owns it and another should: drain first, once.
        Some(_) if draining => Move::Stay,
        Some(_) => Move::Drain,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn new_objects_are_assigned_dead_shards_lose_theirs_at_once() {
        let members = live(&["a", "b"]);
        let ring = Ring::new(&members, 64);
        let wanted = ring.owner("uid-1").unwrap().to_string();
        assert_eq!(
            decide("uid-1", None, false, &members, &ring),
            Move::Assign(wanted.clone())
        );
        assert_eq!(
            decide("uid-1", Some("gone"), false, &members, &ring),
            Move::Assign(wanted.clone())
        );
        // A dead shard's drain is never acknowledged: the object moves anyway.
        assert_eq!(
            decide("uid-1", Some("gone"), true, &members, &ring),
            Move::Assign(wanted.clone())
        );
        assert_eq!(
            decide("uid-1", Some(&wanted), false, &members, &ring),
            Move::Stay
        );
        assert_eq!(
            decide(
                "uid-1",
                None,
                false,
                &[],
                &Ring::new(Vec::<String>::new(), 64)
            ),
            Move::Stay
        );
    }

    #[test]
    fn a_live_shard_is_drained_first_and_only_once() {
        // Find an object that moves when shard c joins a and b.
        let before = live(&["a", "b"]);
        let after = live(&["a", "b", "c"]);
        let (r2, r3) = (Ring::new(&before, 64), Ring::new(&after, 64));
        let uid = (0..1000)
            .map(|i| format!("uid-{i}"))
            .find(|u| r3.owner(u) == Some("c"))
            .expect("some object moves to c");
        let old = r2.owner(&uid).unwrap().to_string();
        assert_eq!(decide(&uid, Some(&old), false, &after, &r3), Move::Drain);
        assert_eq!(decide(&uid, Some(&old), true, &after, &r3), Move::Stay);
        // The old shard acknowledged (both labels gone): now it goes to c.
        assert_eq!(
            decide(&uid, None, false, &after, &r3),
            Move::Assign("c".into())
        );
    }
}
