//! The consistent-hash ring that assigns objects to shards (the controller-sharding
//! design): each shard owns `vnodes` points on a 64-bit circle, an object belongs to the
//! shard of the first point at or after the hash of its UID. Adding a shard moves about
//! 1/N of the objects, all of them to the new shard; removing one moves only its own.

use sha2::{Digest, Sha256};

/// Points per shard by default: enough for an even split among a handful of replicas.
pub const DEFAULT_VNODES: usize = 128;

fn hash(s: &str) -> u64 {
    let d = Sha256::digest(s.as_bytes());
    u64::from_be_bytes(d[..8].try_into().expect("8 bytes"))
}

/// A ring of shards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ring {
    points: Vec<(u64, usize)>,
    shards: Vec<String>,
}

impl Ring {
    /// A ring of `shards` (any order, duplicates ignored) with `vnodes` points each.
    pub fn new<I, S>(shards: I, vnodes: usize) -> Ring
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut shards: Vec<String> = shards.into_iter().map(Into::into).collect();
        shards.sort();
        shards.dedup();
        let mut points: Vec<(u64, usize)> = shards
            .iter()
            .enumerate()
            .flat_map(|(i, s)| (0..vnodes.max(1)).map(move |v| (hash(&format!("{s}#{v}")), i)))
            .collect();
        points.sort_unstable();
        Ring { points, shards }
    }

    /// The shards, sorted.
    pub fn shards(&self) -> &[String] {
        &self.shards
    }

    /// The shard that owns `key` (an object's UID); `None` on an empty ring.
    pub fn owner(&self, key: &str) -> Option<&str> {
        if self.points.is_empty() {
            return None;
        }
        let h = hash(key);
        let i = self.points.partition_point(|(p, _)| *p < h) % self.points.len();
        Some(&self.shards[self.points[i].1])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn uids(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!("7c9e6679-7425-40de-944b-{i:012}"))
            .collect()
    }

    fn split(ring: &Ring, keys: &[String]) -> HashMap<String, usize> {
        let mut m = HashMap::new();
        for k in keys {
            *m.entry(ring.owner(k).unwrap().to_string()).or_default() += 1;
        }
        m
    }

    #[test]
    fn three_shards_share_about_a_third_each() {
        let keys = uids(10_000);
        let ring = Ring::new(["a", "b", "c"], DEFAULT_VNODES);
        for (shard, n) in split(&ring, &keys) {
            assert!((2_800..=3_900).contains(&n), "{shard}: {n} of 10,000");
        }
    }

    #[test]
    fn a_fourth_shard_takes_about_a_quarter_and_only_moves_to_itself() {
        let keys = uids(10_000);
        let three = Ring::new(["a", "b", "c"], DEFAULT_VNODES);
        let four = Ring::new(["d", "c", "b", "a"], DEFAULT_VNODES);
        let mut moved = 0;
        for k in &keys {
            let (before, after) = (three.owner(k).unwrap(), four.owner(k).unwrap());
            if before != after {
                assert_eq!(after, "d", "{k} moved from {before} to {after}");
                moved += 1;
            }
        }
        assert!((1_900..=3_100).contains(&moved), "{moved} of 10,000 moved");
    }

    #[test]
    fn removing_a_shard_moves_only_its_objects() {
        let keys = uids(5_000);
        let three = Ring::new(["a", "b", "c"], DEFAULT_VNODES);
        let two = Ring::new(["a", "c"], DEFAULT_VNODES);
        for k in &keys {
            let before = three.owner(k).unwrap();
            if before != "b" {
                assert_eq!(two.owner(k).unwrap(), before);
            }
        }
        assert_eq!(Ring::new(Vec::<String>::new(), 8).owner("x"), None);
        assert_eq!(Ring::new(["only"], 8).owner("x"), Some("only"));
    }
}
