//! estimate (being written).
