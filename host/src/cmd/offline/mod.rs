//! Commands that run plugins without a cluster: `info`, `plan`, `test` (golden cases),
//! `wasi-run` (the cargo runner for guest unit tests) and `compile` (a shelf of compiled
//! plugins for the host's image).

pub mod compile;
pub mod info;
pub mod plan;
pub mod replay;
pub mod test;
pub mod wasi_run;
