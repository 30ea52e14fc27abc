//! infer (being written).
