//! Small shared helpers.

pub mod rng;
pub mod svg;
