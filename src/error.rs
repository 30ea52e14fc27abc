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
    /// A panic inside treecast: a bug ([`catch_panic`]).
    Internal,
    /// Anything else (bad topology or plan).
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
            ErrorKind::Internal => f::MPI_ERR_INTERN,
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

/// Run `f`, turning a panic inside it (an internal error of treecast) into [`ErrorKind::Internal`]
/// naming the panic. For every entry point: a panic that unwinds through a Rust MPI program
/// drops its `Universe`, whose `MPI_Finalize` then waits for ranks still in a collective with
/// this one, and the job hangs (a set-up that panicked on rank 0 held 3 ranks for 9 minutes);
/// an error lets the caller abort the job or go on.
pub fn catch_panic<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let msg = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        Err(Error::new(
            ErrorKind::Internal,
            format!("internal error (panic): {msg}"),
        ))
    })
}

/// Result alias used across the MPI-facing modules.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_an_internal_error_naming_it() {
        let e = catch_panic::<()>(|| panic!("index out of bounds: the len is 8 but the index is 8")).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Internal);
        assert!(e.message.contains("the len is 8 but the index is 8"), "{e}");
        assert_eq!(e.mpi_code(), mpi::ffi::MPI_ERR_INTERN as i32);
        // Errors and values pass through.
        assert_eq!(catch_panic(|| Ok(3)), Ok(3));
        let root = Error::new(ErrorKind::Root, "root 9 of 4 ranks");
        assert_eq!(catch_panic::<()>(|| Err(root.clone())), Err(root));
    }
}
