//! Commands that run plugins without a cluster: `info`, `plan`, `test` (golden cases) and
//! `wasi-run` (the cargo runner for guest unit tests).

pub mod info;
pub mod plan;
pub mod replay;
pub mod test;
pub mod wasi_run;
