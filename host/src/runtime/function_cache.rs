//! The compiled functions of every version this process compiled, kept for the next
//! version: Cranelift's incremental compilation looks each function up by a hash of its
//! code (not of its position in the module), so a new version of a plugin compiles only
//! the functions that changed, and its dependencies' code (serde, the SDK, k8s types: most
//! of a plugin) comes from here. That is what makes `wasmop push` of a new version fast.
//!
//! Only this process's own compiler writes entries, keyed by the SHA-256 of the function
//! and of the compiler's settings (Cranelift computes the key), so an entry is exactly what
//! compiling that function again would give. Bounded by bytes: past the cap, the entries
//! used longest ago go first.
//!
//! Packed after each compile ([`FunctionCache::pack`]): the entries arrive one small
//! allocation each, in the middle of the compiler's own short-lived ones, and thousands of
//! them scattered over the heap would keep the pages the compile used from going back to
//! the system. Packed, the values are one allocation and the keys live inside the map's
//! table (stored as the SHA-256 of the key).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

/// Default cap of the cache: a plugin of 800 KB of wasm leaves about 4 MiB of entries.
pub const DEFAULT_CAP_BYTES: usize = 64 << 20;

/// Bytes an entry's key takes (its SHA-256, whatever the key's own length).
pub const KEY_BYTES: usize = 32;

/// An in-memory [`wasmtime::CacheStore`] bounded by bytes, least recently used out first.
#[derive(Debug)]
pub struct FunctionCache {
    cap_bytes: usize,
    inner: Mutex<Entries>,
    hits: AtomicU64,
    misses: AtomicU64,
}

/// One compiled function: as inserted, or packed with the others.
#[derive(Debug)]
enum Stored {
    Loose(Vec<u8>),
    Packed {
        arena: Arc<Vec<u8>>,
        start: usize,
        len: usize,
    },
}

impl Stored {
    fn bytes(&self) -> &[u8] {
        match self {
            Stored::Loose(v) => v,
            Stored::Packed { arena, start, len } => &arena[*start..*start + *len],
        }
    }
}

#[derive(Debug, Default)]
struct Entries {
    /// SHA-256 of the key → (compiled function, the tick of its last use).
    map: HashMap<[u8; KEY_BYTES], (Stored, u64)>,
    bytes: usize,
    tick: u64,
    /// Entries inserted since the last packing.
    loose: usize,
}

impl Entries {
    /// Drops the least recently used entries until at most `target` bytes remain.
    fn shrink_to(&mut self, target: usize) {
        if self.bytes <= target {
            return;
        }
        let mut by_age: Vec<(u64, [u8; KEY_BYTES])> =
            self.map.iter().map(|(k, (_, used))| (*used, *k)).collect();
        by_age.sort_unstable_by_key(|(used, _)| *used);
        for (_, key) in by_age {
            if self.bytes <= target {
                break;
            }
            if let Some((value, _)) = self.map.remove(&key) {
                self.bytes -= KEY_BYTES + value.bytes().len();
            }
        }
    }
}

fn key_hash(key: &[u8]) -> [u8; KEY_BYTES] {
    Sha256::digest(key).into()
}

impl FunctionCache {
    /// A cache holding at most `cap_bytes` of keys and compiled functions.
    pub fn new(cap_bytes: usize) -> Self {
        FunctionCache {
            cap_bytes,
            inner: Mutex::default(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// Lookups that found a compiled function, and lookups that did not.
    pub fn hits_and_misses(&self) -> (u64, u64) {
        (
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
        )
    }

    /// Bytes held (keys and values).
    pub fn bytes(&self) -> usize {
        self.inner.lock().expect("function cache lock").bytes
    }

    /// Moves every entry into one allocation (and drops what evicted entries left in the
    /// last one); call it once a compile is over. Nothing to do when no entry came since
    /// the last packing.
    pub fn pack(&self) {
        let mut inner = self.inner.lock().expect("function cache lock");
        if inner.loose == 0 {
            return;
        }
        let total = inner.map.values().map(|(s, _)| s.bytes().len()).sum();
        let mut arena = Vec::with_capacity(total);
        let mut spans = Vec::with_capacity(inner.map.len());
        for (key, (stored, _)) in &inner.map {
            let bytes = stored.bytes();
            spans.push((*key, arena.len(), bytes.len()));
            arena.extend_from_slice(bytes);
        }
        let arena = Arc::new(arena);
        for (key, start, len) in spans {
            if let Some((stored, _)) = inner.map.get_mut(&key) {
                *stored = Stored::Packed {
                    arena: arena.clone(),
                    start,
                    len,
                };
            }
        }
        inner.loose = 0;
    }
}

impl wasmtime::CacheStore for FunctionCache {
    fn get(&self, key: &[u8]) -> Option<Cow<'_, [u8]>> {
        let hash = key_hash(key);
        let mut inner = self.inner.lock().expect("function cache lock");
        inner.tick += 1;
        let tick = inner.tick;
        match inner.map.get_mut(&hash) {
            Some((value, used)) => {
                *used = tick;
                self.hits.fetch_add(1, Ordering::Relaxed);
                Some(Cow::Owned(value.bytes().to_vec()))
            }
            None => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    fn insert(&self, key: &[u8], value: Vec<u8>) -> bool {
        let size = KEY_BYTES + value.len();
        if size > self.cap_bytes {
            return false;
        }
        let hash = key_hash(key);
        let mut inner = self.inner.lock().expect("function cache lock");
        inner.tick += 1;
        let tick = inner.tick;
        if let Some((old, _)) = inner.map.insert(hash, (Stored::Loose(value), tick)) {
            inner.bytes -= KEY_BYTES + old.bytes().len();
        }
        inner.bytes += size;
        inner.loose += 1;
        // Past the cap, shrink to three quarters of it: one sort per many inserts.
        if inner.bytes > self.cap_bytes {
            let target = self.cap_bytes / 4 * 3;
            inner.shrink_to(target);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::CacheStore;

    #[test]
    fn holds_what_was_inserted_and_counts_lookups() {
        let cache = FunctionCache::new(1 << 20);
        assert!(cache.get(b"k1").is_none());
        assert!(cache.insert(b"k1", vec![1, 2, 3]));
        assert_eq!(cache.get(b"k1").as_deref(), Some(&[1u8, 2, 3][..]));
        assert_eq!(cache.hits_and_misses(), (1, 1));
        assert_eq!(cache.bytes(), KEY_BYTES + 3);
        // Replacing an entry does not count its bytes twice.
        assert!(cache.insert(b"k1", vec![9; 10]));
        assert_eq!(cache.bytes(), KEY_BYTES + 10);
    }

    #[test]
    fn packing_keeps_every_entry_and_its_bytes() {
        let cache = FunctionCache::new(1 << 20);
        for i in 0..200u32 {
            assert!(cache.insert(&i.to_le_bytes(), vec![i as u8; 1 + i as usize % 37]));
        }
        let before = cache.bytes();
        cache.pack();
        assert_eq!(cache.bytes(), before);
        // A second packing with nothing new changes nothing; entries added after a packing
        // sit beside the packed ones until the next.
        cache.pack();
        assert!(cache.insert(b"late", vec![7; 5]));
        for i in 0..200u32 {
            assert_eq!(
                cache.get(&i.to_le_bytes()).as_deref(),
                Some(&vec![i as u8; 1 + i as usize % 37][..]),
                "entry {i}"
            );
        }
        assert_eq!(cache.get(b"late").as_deref(), Some(&[7u8; 5][..]));
        cache.pack();
        assert_eq!(cache.get(b"late").as_deref(), Some(&[7u8; 5][..]));
        assert_eq!(cache.bytes(), before + KEY_BYTES + 5);
    }

    #[test]
    fn past_the_cap_the_least_recently_used_go_first() {
        // Ten entries of 100 bytes (a key's 32 + 68) fill a 1,000-byte cap exactly.
        let cache = FunctionCache::new(1000);
        for i in 0..10u8 {
            assert!(cache.insert(&[b'k', i], vec![i; 68]));
        }
        assert_eq!(cache.bytes(), 1000);
        // Entries 0 and 1 are used again: now the most recent.
        assert!(cache.get(&[b'k', 0]).is_some());
        assert!(cache.get(&[b'k', 1]).is_some());
        // One more entry goes past the cap: the cache shrinks to 750 bytes, dropping the
        // four used longest ago (2, 3, 4, 5).
        assert!(cache.insert(b"kx", vec![0; 68]));
        assert!(cache.bytes() <= 750, "{} bytes", cache.bytes());
        for gone in 2..6u8 {
            assert!(cache.get(&[b'k', gone]).is_none(), "k{gone} kept");
        }
        for kept in [0u8, 1, 6, 7, 8, 9] {
            assert!(cache.get(&[b'k', kept]).is_some(), "k{kept} dropped");
        }
        assert!(cache.get(b"kx").is_some());
    }

    #[test]
    fn an_entry_larger_than_the_cap_is_refused() {
        let cache = FunctionCache::new(10);
        assert!(!cache.insert(b"big", vec![0; 20]));
        assert_eq!(cache.bytes(), 0);
    }
}
