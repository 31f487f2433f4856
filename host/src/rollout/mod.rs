//! Safe rollout of reconcile logic: a candidate version decides beside the active one.
//!
//! Every decision is a pure function of what it observed (time and seed included), so a
//! candidate can be asked the very same question as the active version:
//! - **Shadow**: the candidate decides on every reconcile, on the same observed value, off the
//!   reconcile's path; only the active plan is carried out. The two outcomes are compared
//!   ([`compare`]) and counted; the last divergences are kept with a readable diff.
//! - **Canary**: objects whose UID hashes below the percentage ([`canary`]) are decided (and
//!   acted on) by the candidate, the others by the active version; an object always lands on
//!   the same side.
//!
//! Promotion and abort are changes of the `WasmPlugin` spec ([`crate::cmd::rollout`]);
//! the host promotes or aborts by itself when the candidate's [`Policy`] says so.
//! [`record`] writes decisions as golden cases for `wasmop replay`.

pub mod canary;
pub mod compare;
pub mod record;
pub mod shadow;

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::runtime::LoadedPlugin;

/// How a candidate takes part in the decisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Decides next to the active version; nothing it plans is carried out.
    Shadow,
    /// Decides, and acts, for the objects whose UID hashes below this percentage (0–100).
    Canary(u8),
}

impl Mode {
    /// `Shadow` or `Canary`, as the WasmPlugin spec and status spell it.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Shadow => "Shadow",
            Mode::Canary(_) => "Canary",
        }
    }
}

/// When the host ends a rollout by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Policy {
    /// Promote after this many candidate decisions in a row that agree with the active
    /// version (shadow) or end without a fault (canary).
    pub promote_after: Option<u64>,
    /// Abort once this percentage of the candidate's decisions were faults, judged from
    /// [`Policy::min_decisions`] decisions on.
    pub abort_fault_percent: Option<u8>,
    /// Decisions before the fault rate is judged.
    pub min_decisions: u64,
}

/// What the policy asks for now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Keep going.
    Continue,
    /// Make the candidate the active version (why).
    Promote(String),
    /// Drop the candidate (why).
    Abort(String),
}

/// One shadow decision whose outcome differed from the active version's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Divergence {
    /// `namespace/name` of the primary.
    pub object: String,
    /// When it was decided (RFC 3339).
    pub time: String,
    /// Unified diff from the active outcome to the candidate's (YAML), or the fault.
    pub diff: String,
}

/// How many divergences a candidate keeps.
pub const KEPT_DIVERGENCES: usize = 5;

/// Counts of a candidate's decisions; shared by the reconciles and the status reporter.
#[derive(Debug, Default)]
pub struct Stats {
    decisions: AtomicU64,
    agreements: AtomicU64,
    divergences: AtomicU64,
    faults: AtomicU64,
    streak: AtomicU64,
    recent: Mutex<VecDeque<Divergence>>,
}

/// A snapshot of [`Stats`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Decisions the candidate made.
    pub decisions: u64,
    /// Shadow decisions equal to the active version's.
    pub agreements: u64,
    /// Shadow decisions different from the active version's (faults not included).
    pub divergences: u64,
    /// Candidate calls the sandbox stopped.
    pub faults: u64,
    /// Agreeing (shadow) or fault-free (canary) decisions in a row, up to now.
    pub streak: u64,
    /// The last divergences, oldest first.
    pub recent: Vec<Divergence>,
}

impl Stats {
    /// A shadow decision equal to the active one.
    pub fn agreed(&self) {
        self.decisions.fetch_add(1, Ordering::Relaxed);
        self.agreements.fetch_add(1, Ordering::Relaxed);
        self.streak.fetch_add(1, Ordering::Relaxed);
    }

    /// A shadow decision that differed (a fault is counted as one too, see [`Stats::faulted`]).
    pub fn diverged(&self, d: Divergence) {
        self.decisions.fetch_add(1, Ordering::Relaxed);
        self.divergences.fetch_add(1, Ordering::Relaxed);
        self.streak.store(0, Ordering::Relaxed);
        self.keep(d);
    }

    /// A candidate call the sandbox stopped.
    pub fn faulted(&self, d: Divergence) {
        self.decisions.fetch_add(1, Ordering::Relaxed);
        self.faults.fetch_add(1, Ordering::Relaxed);
        self.streak.store(0, Ordering::Relaxed);
        self.keep(d);
    }

    /// A canary decision that ended without a fault.
    pub fn decided(&self) {
        self.decisions.fetch_add(1, Ordering::Relaxed);
        self.streak.fetch_add(1, Ordering::Relaxed);
    }

    fn keep(&self, d: Divergence) {
        let mut recent = self.recent.lock().expect("divergences lock");
        if recent.len() == KEPT_DIVERGENCES {
            recent.pop_front();
        }
        recent.push_back(d);
    }

    /// The counts as they are now.
    pub fn counts(&self) -> Counts {
        Counts {
            decisions: self.decisions.load(Ordering::Relaxed),
            agreements: self.agreements.load(Ordering::Relaxed),
            divergences: self.divergences.load(Ordering::Relaxed),
            faults: self.faults.load(Ordering::Relaxed),
            streak: self.streak.load(Ordering::Relaxed),
            recent: self
                .recent
                .lock()
                .expect("divergences lock")
                .iter()
                .cloned()
                .collect(),
        }
    }
}

impl Policy {
    /// What the policy asks for, given the counts so far.
    pub fn judge(&self, c: &Counts) -> Verdict {
        if let Some(percent) = self.abort_fault_percent
            && c.decisions >= self.min_decisions.max(1)
            && c.faults * 100 >= u64::from(percent) * c.decisions
        {
            return Verdict::Abort(format!(
                "{} of {} candidate decisions were faults (abort at {percent}%)",
                c.faults, c.decisions
            ));
        }
        if let Some(k) = self.promote_after
            && c.streak >= k
        {
            return Verdict::Promote(format!(
                "{} decisions in a row without divergence or fault (promote after {k})",
                c.streak
            ));
        }
        Verdict::Continue
    }
}

/// A candidate version beside the active one.
#[derive(Debug)]
pub struct Candidate {
    /// The candidate version.
    pub plugin: Arc<LoadedPlugin>,
    /// How it takes part.
    pub mode: Mode,
    /// When the host ends the rollout by itself.
    pub policy: Policy,
    /// Its decisions so far.
    pub stats: Arc<Stats>,
    /// Bounds its shadow calls.
    pub in_flight: shadow::InFlight,
}

/// Which version decides one object, and how.
#[derive(Debug, Clone)]
pub enum Role {
    /// The active version decides; no candidate is involved.
    Active,
    /// The active version decides and acts; the candidate decides beside it (shadow).
    Shadowed(Arc<Candidate>),
    /// The candidate decides and acts (the object is in the canary share).
    Canary(Arc<Candidate>),
}

impl Role {
    /// The role of the object with `uid` under `candidate`.
    pub fn of(candidate: Option<&Arc<Candidate>>, uid: &str) -> Role {
        match candidate {
            None => Role::Active,
            Some(c) => match c.mode {
                Mode::Shadow => Role::Shadowed(c.clone()),
                Mode::Canary(p) if canary::in_canary(uid, p) => Role::Canary(c.clone()),
                Mode::Canary(_) => Role::Active,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn divergence(n: usize) -> Divergence {
        Divergence {
            object: format!("d/o{n}"),
            time: "t".into(),
            diff: "-a\n+b".into(),
        }
    }

    #[test]
    fn stats_count_and_keep_the_last_divergences() {
        let s = Stats::default();
        s.agreed();
        s.agreed();
        for n in 0..7 {
            s.diverged(divergence(n));
        }
        s.agreed();
        let c = s.counts();
        assert_eq!(
            (c.decisions, c.agreements, c.divergences, c.faults),
            (10, 3, 7, 0)
        );
        assert_eq!(c.streak, 1);
        let kept: Vec<&str> = c.recent.iter().map(|d| d.object.as_str()).collect();
        assert_eq!(kept, ["d/o2", "d/o3", "d/o4", "d/o5", "d/o6"]);
    }

    #[test]
    fn policy_promotes_on_a_streak_and_aborts_on_faults() {
        let p = Policy {
            promote_after: Some(3),
            abort_fault_percent: Some(50),
            min_decisions: 4,
        };
        let s = Stats::default();
        s.agreed();
        s.agreed();
        assert_eq!(p.judge(&s.counts()), Verdict::Continue);
        s.agreed();
        assert!(matches!(p.judge(&s.counts()), Verdict::Promote(_)));
        // A fault breaks the streak; 1 fault in 4 is under 50%.
        s.faulted(divergence(0));
        assert_eq!(p.judge(&s.counts()), Verdict::Continue);
        s.faulted(divergence(1));
        s.faulted(divergence(2));
        let Verdict::Abort(why) = p.judge(&s.counts()) else {
            panic!("3 faults in 6 decisions must abort at 50%");
        };
        assert_eq!(why, "3 of 6 candidate decisions were faults (abort at 50%)");
        // Below the minimum number of decisions, nothing is judged.
        let early = Stats::default();
        early.faulted(divergence(0));
        assert_eq!(p.judge(&early.counts()), Verdict::Continue);
        assert_eq!(Policy::default().judge(&s.counts()), Verdict::Continue);
    }
}
