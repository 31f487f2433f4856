//! Which objects a canary decides: those whose UID hashes below the percentage. The hash
//! is sha256 of the UID, so the split is stable across replicas, restarts and versions, and
//! raising the percentage only adds objects to the canary share.

use sha2::{Digest, Sha256};

/// The object's position in 0..10,000 (basis points), from its UID.
pub fn bucket(uid: &str) -> u32 {
    let h = Sha256::digest(uid.as_bytes());
    let n = u64::from_be_bytes(h[..8].try_into().expect("8 bytes"));
    (n % 10_000) as u32
}

/// Whether the object with `uid` is in the canary share of `percent` (0–100).
pub fn in_canary(uid: &str, percent: u8) -> bool {
    bucket(uid) < u32::from(percent.min(100)) * 100
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_stable_nested_and_close_to_the_percentage() {
        let uids: Vec<String> = (0..10_000)
            .map(|i| format!("6f1c2a4e-0000-4000-8000-{i:012}"))
            .collect();
        let share = |p: u8| uids.iter().filter(|u| in_canary(u, p)).count();
        assert_eq!(share(0), 0);
        assert_eq!(share(100), 10_000);
        let half = share(50);
        assert!((4_800..=5_200).contains(&half), "50% gave {half} of 10,000");
        let tenth = share(10);
        assert!((900..=1_100).contains(&tenth), "10% gave {tenth} of 10,000");
        // Raising the percentage keeps every object already in the share.
        assert!(uids.iter().all(|u| !in_canary(u, 10) || in_canary(u, 50)));
        // The same UID lands in the same bucket on every replica, restart and version: the
        // buckets are sha256's, computed here independently (Python's hashlib).
        assert_eq!(bucket(&uids[7]), 7252);
        assert_eq!(bucket("0b5e7c3a-1d2f-4e6a-9b8c-7d6e5f4a3b2c"), 4077);
        assert!(in_canary(&uids[7], 73) && !in_canary(&uids[7], 72));
    }
}
