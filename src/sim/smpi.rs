//! SimGrid platform export.
