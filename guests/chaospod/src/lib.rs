//! chaospod
