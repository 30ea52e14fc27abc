//! profile (being written).
