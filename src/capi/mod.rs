//! capi (being written).
