//! probe (being written).
