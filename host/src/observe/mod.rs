//! Building the observed state of a primary object: which related objects it sees
//! ([`select`]), in what shape ([`trim`], and [`fields`] for the parts a plugin declared it
//! reads), and label selectors ([`labels`]). The live host
//! and the offline commands share this code, so a golden case exercises the same selection
//! the operator uses.

pub mod fields;
pub mod labels;
pub mod select;
pub mod trim;

pub use fields::Fields;
pub use labels::LabelSelector;
pub use select::{
    in_relation, is_controlled_by, may_relate, observed_for, related_for, relates_by_metadata,
    selector_of,
};
pub use trim::{LAST_APPLIED, trim_for_guest};
