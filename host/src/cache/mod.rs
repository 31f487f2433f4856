//! The objects the plugins read: one watch and cache per related kind, shared by every
//! plugin that relates to it ([`shared`]), each indexed by controlling owner ([`owners`]),
//! holding objects cut to the fields the plugins declared ([`guest_view`]); a referenced
//! relation's cache holds only the objects primaries name ([`named`]).

pub(crate) mod feed;
pub mod guest_view;
pub mod named;
pub mod owners;
pub mod shared;
