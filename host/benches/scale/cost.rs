//! What a phase cost the host: CPU seconds and memory from `/proc`, and its requests to the
//! API server by verb from its own `/metrics` (`wasmop_api_requests_total`).

use std::collections::BTreeMap;

use crate::support::Host;

/// A look at the host's counters.
#[derive(Debug, Clone, Default)]
pub struct Look {
    /// CPU seconds (user + system) so far.
    pub cpu_s: f64,
    /// Requests so far, by verb.
    pub requests: BTreeMap<String, u64>,
}

/// CPU seconds (user + system) process `pid` has used so far; 0 when it is gone.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which is in parentheses): utime is the 14th field.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

/// CPU seconds and requests of `host` now.
pub fn look(host: &Host) -> Look {
    let cpu_s = cpu_seconds(host.pid());
    let mut requests = BTreeMap::new();
    if let Some((_, text)) = host.http_get("/metrics") {
        for line in text
            .lines()
            .filter(|l| l.starts_with("wasmop_api_requests_total{"))
        {
            let verb = line.split('"').nth(1).unwrap_or("?").to_string();
            let n = line
                .rsplit(' ')
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            requests.insert(verb, n);
        }
    }
    Look { cpu_s, requests }
}

/// What happened between two looks.
pub fn between(before: &Look, after: &Look) -> Look {
    Look {
        cpu_s: after.cpu_s - before.cpu_s,
        requests: after
            .requests
            .iter()
            .map(|(v, n)| (v.clone(), n - before.requests.get(v).copied().unwrap_or(0)))
            .filter(|(_, n)| *n > 0)
            .collect(),
    }
}

/// (VmRSS, VmHWM) of the host in MiB.
pub fn memory_mib(host: &Host) -> (f64, f64) {
    memory_of(host.pid())
}

/// (VmRSS, VmHWM) of process `pid` in MiB (0 when it is gone).
pub fn memory_of(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (kib("VmRSS:") / 1024.0, kib("VmHWM:") / 1024.0)
}
