//! Small shared helpers.

pub mod bytes;
pub mod rng;
pub mod svg;
