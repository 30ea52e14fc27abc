//! How a user buffer (pointer, count, datatype) maps to the contiguous bytes a plan moves.
//!
//! Plans move byte ranges. When the datatype's bytes lie back to back with no holes (primitive
//! types, packed structs), the user's buffer is used in place. Otherwise (derived structs with
//! padding, strided vectors) the root packs the data with `MPI_Pack` and receivers unpack it,
//! so padding and gaps in receivers' buffers are never written — exactly as `MPI_Bcast` leaves
//! them. Packing works in chunks so counts and sizes above 2 GiB are handled.

use super::raw::check;
use crate::error::{Error, ErrorKind, Result};
use mpi::ffi::{self, MPI_Comm, MPI_Datatype};
use std::ffi::c_void;
use std::os::raw::c_int;

/// The byte view of one rank's buffer.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    /// Bytes of data (count x type size).
    pub bytes: u64,
    /// True when the data is one contiguous span starting at the buffer pointer.
    pub contiguous: bool,
    /// Type size and extent (for chunked packing).
    size: u64,
    extent: i64,
}

/// Describe `count` elements of `datatype`. Rejects the null datatype without calling MPI (an
/// MPI error on it would go to `MPI_COMM_WORLD`'s handler, fatal by default).
pub fn describe(count: u64, datatype: MPI_Datatype) -> Result<Layout> {
    // SAFETY: reading an extern constant; then plain queries on a non-null handle.
    unsafe {
        if datatype == ffi::RSMPI_DATATYPE_NULL {
            return Err(Error::new(ErrorKind::Type, "datatype is MPI_DATATYPE_NULL"));
        }
        let mut size: ffi::MPI_Count = 0;
        check(ffi::PMPI_Type_size_x(datatype, &mut size), "MPI_Type_size_x")
            .map_err(|e| Error::new(ErrorKind::Type, format!("unusable datatype: {e}")))?;
        let (mut lb, mut extent, mut tlb, mut textent): (
            ffi::MPI_Count,
            ffi::MPI_Count,
            ffi::MPI_Count,
            ffi::MPI_Count,
        ) = (0, 0, 0, 0);
        check(
            ffi::PMPI_Type_get_extent_x(datatype, &mut lb, &mut extent),
            "MPI_Type_get_extent_x",
        )?;
        check(
            ffi::PMPI_Type_get_true_extent_x(datatype, &mut tlb, &mut textent),
            "MPI_Type_get_true_extent_x",
        )?;
        let size = size as u64;
        let bytes = size
            .checked_mul(count)
            .ok_or_else(|| Error::new(ErrorKind::Count, format!("{count} elements of {size} bytes overflow")))?;
        let contiguous = size == 0 || (lb == 0 && tlb == 0 && extent as u64 == size && textent as u64 == size);
        Ok(Layout {
            bytes,
            contiguous,
            size,
            extent,
        })
    }
}

/// Largest number of elements packed per `MPI_Pack` call (its sizes are `int`s).
fn chunk_elems(layout: &Layout) -> u64 {
    let by_bytes = (c_int::MAX as u64 / layout.size.max(1)).max(1);
    by_bytes.min(c_int::MAX as u64)
}

/// Walk `count` elements in chunks that `MPI_Pack`/`MPI_Unpack` can take: `f(k, first, offset,
/// bytes)` gets the chunk's element count, the byte displacement of its first element from the
/// buffer (in extents), its offset in the packed data and its packed size.
fn for_each_chunk(
    count: u64,
    layout: &Layout,
    mut f: impl FnMut(u64, isize, usize, usize) -> Result<()>,
) -> Result<()> {
    let step = chunk_elems(layout);
    let (mut done, mut offset) = (0u64, 0usize);
    while done < count {
        let k = step.min(count - done);
        let chunk_bytes = (k * layout.size) as usize;
        f(k, done as isize * layout.extent as isize, offset, chunk_bytes)?;
        offset += chunk_bytes;
        done += k;
    }
    Ok(())
}

/// Pack `count` elements at `buf` into `out` (which holds `layout.bytes`).
///
/// # Safety
/// `buf` must hold `count` elements of `datatype` (it may be `MPI_BOTTOM`, i.e. NULL, with a
/// datatype of absolute addresses: hence wrapping pointer arithmetic).
pub unsafe fn pack(
    buf: *const c_void,
    count: u64,
    datatype: MPI_Datatype,
    layout: &Layout,
    out: &mut [u8],
    comm: MPI_Comm,
) -> Result<()> {
    for_each_chunk(count, layout, |k, first, offset, chunk_bytes| {
        let src = (buf as *const u8).wrapping_offset(first);
        let mut pos: c_int = 0;
        check(
            ffi::PMPI_Pack(
                src as *const c_void,
                k as c_int,
                datatype,
                out[offset..].as_mut_ptr() as *mut c_void,
                chunk_bytes as c_int,
                &mut pos,
                comm,
            ),
            "MPI_Pack",
        )?;
        if pos as usize != chunk_bytes {
            return Err(Error::new(
                ErrorKind::Type,
                format!("MPI_Pack produced {pos} bytes for {chunk_bytes} bytes of data; heterogeneous packing is not supported"),
            ));
        }
        Ok(())
    })
}

/// Unpack `input` (as produced by [`pack`]) into `count` elements at `buf`.
///
/// # Safety
/// `buf` must hold `count` elements of `datatype` (it may be `MPI_BOTTOM`, i.e. NULL, with a
/// datatype of absolute addresses: hence wrapping pointer arithmetic).
pub unsafe fn unpack(
    input: &[u8],
    buf: *mut c_void,
    count: u64,
    datatype: MPI_Datatype,
    layout: &Layout,
    comm: MPI_Comm,
) -> Result<()> {
    for_each_chunk(count, layout, |k, first, offset, chunk_bytes| {
        let dst = (buf as *mut u8).wrapping_offset(first);
        let mut pos: c_int = 0;
        check(
            ffi::PMPI_Unpack(
                input[offset..].as_ptr() as *const c_void,
                chunk_bytes as c_int,
                &mut pos,
                dst as *mut c_void,
                k as c_int,
                datatype,
                comm,
            ),
            "MPI_Unpack",
        )
    })
}

/// Allocate a zeroed scratch buffer, reporting failure instead of aborting.
pub fn scratch(bytes: u64) -> Result<Vec<u8>> {
    let mut v = Vec::new();
    v.try_reserve_exact(bytes as usize).map_err(|_| {
        Error::new(
            ErrorKind::Other,
            format!("cannot allocate {bytes} bytes of scratch memory"),
        )
    })?;
    v.resize(bytes as usize, 0);
    Ok(v)
}
