//! runtime (being written).
