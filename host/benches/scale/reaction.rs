//! Event → action inside the host: its own `wasmop_event_to_action_seconds` histogram (a
//! pod's change reaching the host's cache → the first object write of the decision it
//! caused), read before and after the samples. The audit log ([`crate::audit`]) times the
//! same reaction from the API server's side, the delete's own processing included.

use crate::support::Host;

const BUCKET: &str = "wasmop_event_to_action_seconds_bucket{";

/// A histogram as the host exposes it: cumulative counts per upper bound (seconds), the
/// bounds ascending and ending with `+Inf`, summed over the plugin's versions.
#[derive(Debug, Clone, Default)]
pub struct Reactions {
    /// (upper bound in seconds, observations at most that long).
    pub buckets: Vec<(f64, u64)>,
}

impl Reactions {
    /// Observations in all.
    pub fn count(&self) -> u64 {
        self.buckets.last().map_or(0, |b| b.1)
    }

    /// The upper bound, in ms, of the bucket holding the `q` quantile (0..=1): the
    /// reaction of that rank took at most this long. 0 without observations.
    pub fn at_most_ms(&self, q: f64) -> f64 {
        let need = (self.count() as f64 * q).ceil().max(1.0) as u64;
        self.buckets
            .iter()
            .find(|b| b.1 >= need)
            .map_or(0.0, |b| b.0 * 1000.0)
    }
}

/// The host's histogram now.
pub fn look(host: &Host) -> Reactions {
    let text = host.http_get("/metrics").map(|r| r.1).unwrap_or_default();
    parse(&text)
}

fn parse(text: &str) -> Reactions {
    let mut sums: Vec<(f64, u64)> = Vec::new();
    for line in text.lines().filter(|l| l.starts_with(BUCKET)) {
        let le = line
            .split("le=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .map(|v| {
                if v == "+Inf" {
                    f64::INFINITY
                } else {
                    v.parse().unwrap_or(f64::NAN)
                }
            })
            .unwrap_or(f64::NAN);
        let n: u64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        match sums.iter_mut().find(|b| b.0 == le) {
            Some(b) => b.1 += n,
            None => sums.push((le, n)),
        }
    }
    sums.sort_by(|a, b| a.0.total_cmp(&b.0));
    Reactions { buckets: sums }
}

/// The observations made between two looks.
pub fn between(before: &Reactions, after: &Reactions) -> Reactions {
    let earlier = |le: f64| before.buckets.iter().find(|b| b.0 == le).map_or(0, |b| b.1);
    Reactions {
        buckets: after
            .buckets
            .iter()
            .map(|&(le, n)| (le, n - earlier(le)))
            .collect(),
    }
}
