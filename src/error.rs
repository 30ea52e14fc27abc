//! Errors of a broadcast, carrying the MPI error class the C ABI returns.

use std::fmt;

/// What went wrong, mapped onto MPI error classes so C callers get the code `MPI_Bcast` would
/// give (`MPI_ERR_ROOT`, `MPI_ERR_COUNT`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Root out of range.
    Root,
    /// Negative or unrepresentable count.
    Count,
    /// Null, uncommitted or otherwise unusable datatype.
    Type,
    /// Null buffer with a non-zero count.
    Buffer,
    /// Null or unsupported communicator (e.g. an inter-communicator).
    Comm,
    /// The data arriving did not fit this rank's buffer (its count or datatype differs from the
    /// root's).
    Truncate,
    /// An upstream rank failed, so this rank's data is not valid.
    Upstream,
    /// An MPI call failed; the code is MPI's.
    Mpi(i32),
    /// Anything else (bad topology or plan, internal error).
    Other,
}

/// An error from treecast: a kind (for the MPI error code) and a message naming what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
        }
    }

    /// The MPI error code for this error (an error class of the MPI library linked in).
    pub fn mpi_code(&self) -> i32 {
        use mpi::ffi as f;
        (match self.kind {
            ErrorKind::Root => f::MPI_ERR_ROOT,
            ErrorKind::Count => f::MPI_ERR_COUNT,
            ErrorKind::Type => f::MPI_ERR_TYPE,
            ErrorKind::Buffer => f::MPI_ERR_BUFFER,
            ErrorKind::Comm => f::MPI_ERR_COMM,
            ErrorKind::Truncate => f::MPI_ERR_TRUNCATE,
            ErrorKind::Upstream | ErrorKind::Other => f::MPI_ERR_OTHER,
            ErrorKind::Mpi(code) => return code,
        }) as i32
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// Result alias used across the MPI-facing modules.
pub type Result<T> = std::result::Result<T, Error>;
