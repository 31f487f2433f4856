//! Counts over the last minute, for the questions a person asks of a running host ("how
//! many reconciles, how many errors just now?") without two scrapes and a `rate()`:
//! `wasmop status` reads them from `/metrics`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

/// Seconds in the window.
const WINDOW: usize = 60;

/// Events per key over the last [`WINDOW`] seconds, kept in one-second slots: adding is a
/// lock and an increment, reading sums the slots still inside the window.
#[derive(Debug)]
pub struct LastMinute {
    epoch: Instant,
    keys: Mutex<HashMap<String, Slots>>,
}

#[derive(Debug)]
struct Slots {
    /// `second[i]`: the second (since `epoch`) slot `i` counts; `count[i]` its events.
    second: [u64; WINDOW],
    count: [u64; WINDOW],
}

impl LastMinute {
    /// An empty window.
    pub fn new() -> Self {
        LastMinute {
            epoch: Instant::now(),
            keys: Mutex::new(HashMap::new()),
        }
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_secs()
    }

    /// Counts one event of `key` now.
    pub fn add(&self, key: &str) {
        self.add_at(key, self.now());
    }

    fn add_at(&self, key: &str, second: u64) {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        let slots = keys.entry(key.to_owned()).or_insert_with(|| Slots {
            // No second is u64::MAX: every slot starts outside the window.
            second: [u64::MAX; WINDOW],
            count: [0; WINDOW],
        });
        let i = (second % WINDOW as u64) as usize;
        if slots.second[i] != second {
            slots.second[i] = second;
            slots.count[i] = 0;
        }
        slots.count[i] += 1;
    }

    /// Every key seen since the host started, with its events of the last minute (0 for a
    /// key that had none lately: a plugin that stopped reconciling reads 0, not nothing).
    pub fn snapshot(&self) -> Vec<(String, u64)> {
        self.snapshot_at(self.now())
    }

    fn snapshot_at(&self, now: u64) -> Vec<(String, u64)> {
        let keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        keys.iter()
            .map(|(key, slots)| {
                let total = slots
                    .second
                    .iter()
                    .zip(slots.count.iter())
                    .filter(|(s, _)| **s <= now && now - **s < WINDOW as u64)
                    .map(|(_, c)| c)
                    .sum();
                (key.clone(), total)
            })
            .collect()
    }
}

impl Default for LastMinute {
    fn default() -> Self {
        LastMinute::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(w: &LastMinute, key: &str, now: u64) -> u64 {
        w.snapshot_at(now)
            .into_iter()
            .find(|(k, _)| k == key)
            .map(|(_, c)| c)
            .unwrap()
    }

    #[test]
    fn counts_what_fell_in_the_last_sixty_seconds_only() {
        let w = LastMinute::new();
        for s in 0..200u64 {
            // Second s has s % 7 events.
            for _ in 0..s % 7 {
                w.add_at("a", s);
            }
        }
        w.add_at("b", 5);
        let expected: u64 = (140..200u64).map(|s| s % 7).sum();
        assert_eq!(count(&w, "a", 199), expected);
        // Half a minute later, only the seconds from 170 on are still in the window.
        let expected: u64 = (170..200u64).map(|s| s % 7).sum();
        assert_eq!(count(&w, "a", 229), expected);
        // "b" had one event at second 5: in the window until second 64, gone after.
        assert_eq!(count(&w, "b", 64), 1);
        assert_eq!(count(&w, "b", 65), 0);
        // A quiet key still reads 0 after a long silence: nothing from 200 s ago counts.
        assert_eq!(count(&w, "a", 400), 0);
    }

    #[test]
    fn a_slot_reused_a_minute_later_starts_from_zero() {
        let w = LastMinute::new();
        w.add_at("a", 3);
        w.add_at("a", 3);
        w.add_at("a", 63);
        assert_eq!(count(&w, "a", 63), 1);
    }
}
