//! End-to-end tests: the host against a local control plane, one control plane per test, one
//! test at a time (`--test-threads=1`; `make e2e`). Every suite is a module of this one test
//! binary: linking the static host into one binary per suite took minutes of every run.
//!
//! One suite, with the Makefile's cache and package set (so nothing is compiled again):
//! `CARGO_TARGET_DIR=~/.cache/wasmop/target cargo test --locked --release --target
//! x86_64-unknown-linux-musl -p wasmop -p wasmop-contract -p wasmop-sdk -p podreplica -p
//! chaospod --test e2e -- shards:: --test-threads=1 --nocapture` (the module name filters).

#[path = "../support/mod.rs"]
mod support;

mod chaospod;
mod cronjob;
mod cutoff;
mod dev;
mod disk;
mod effects;
mod hostile;
mod hotswap;
mod identity;
mod kinds;
mod leader;
mod oci;
mod podreplica;
mod polyglot;
mod principals;
mod progress;
mod references;
mod restart;
mod rollout;
mod scaffold;
mod shards;
mod size;
mod status;
mod traces;
mod tutorial;
mod webhooks;
