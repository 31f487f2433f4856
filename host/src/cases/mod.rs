//! Decisions as data, without a cluster: a plugin loaded from a file ([`load`]), objects and
//! outcomes in YAML ([`input`]), one decision on them ([`decision`]) and golden cases, an observed state with the outcome it
//! should give ([`golden`]). The offline commands, the recorder of live decisions and the
//! replay of recorded ones share them.

pub mod decision;
pub mod golden;
pub mod input;
pub mod load;
