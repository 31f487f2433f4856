//! Choosing victims at random from the host's seed: the same seed and the same candidates
//! always give the same choice.

/// SplitMix64: a tiny, well-known generator; plenty for picking victims reproducibly.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `bound` (> 0), without modulo bias worth caring about here.
    fn below(&mut self, bound: usize) -> usize {
        ((u128::from(self.next()) * bound as u128) >> 64) as usize
    }
}

/// Picks `k` distinct indices out of `0..n` (all of them when `k >= n`), in pick order.
pub fn pick_indices(n: usize, k: usize, seed: u64) -> Vec<usize> {
    let mut rng = SplitMix64(seed);
    let mut idx: Vec<usize> = (0..n).collect();
    let k = k.min(n);
    for i in 0..k {
        let j = i + rng.below(n - i);
        idx.swap(i, j);
    }
    idx.truncate(k);
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_choice_and_distinct_indices() {
        assert_eq!(pick_indices(10, 3, 42), pick_indices(10, 3, 42));
        let p = pick_indices(10, 10, 7);
        let mut sorted = p.clone();
        sorted.sort();
        assert_eq!(sorted, (0..10).collect::<Vec<_>>());
        assert_eq!(pick_indices(3, 5, 1).len(), 3);
        assert!(pick_indices(0, 1, 1).is_empty());
    }

    #[test]
    fn different_seeds_spread_the_choice() {
        let firsts: std::collections::BTreeSet<usize> =
            (0..200).map(|s| pick_indices(5, 1, s)[0]).collect();
        assert_eq!(firsts.len(), 5, "every pod gets picked by some seed");
    }
}
