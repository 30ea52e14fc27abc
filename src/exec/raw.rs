//! Thin wrappers over the PMPI calls treecast makes.
//!
//! Why PMPI and not MPI or rsmpi's safe API: the `LD_PRELOAD` interposer replaces `MPI_Bcast`
//! (and wraps `MPI_Init`/`MPI_Finalize`), so the library's own traffic must not re-enter it; and
//! PMPI keeps our internal messages out of other PMPI-based profilers' counts. Every wrapper turns
//! a non-success return into an [`Error`] naming the call.

use crate::error::{Error, ErrorKind, Result};
use mpi::ffi::{self, MPI_Comm, MPI_Datatype, MPI_Request, MPI_Status};
use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::os::raw::c_int;

/// `MPI_COMBINER_NAMED`, the envelope combiner of a predefined datatype. An enumerator whose
/// value and binding name differ by implementation: Open MPI's 0, MPICH's 1 (bindgen names it
/// inside `MPIR_Combiner_enum`).
#[cfg(not(treecast_mpi = "mpich"))]
pub const COMBINER_NAMED: c_int = ffi::MPI_COMBINER_NAMED as c_int;
#[cfg(treecast_mpi = "mpich")]
pub const COMBINER_NAMED: c_int = ffi::MPIR_Combiner_enum_MPI_COMBINER_NAMED as c_int;

/// Turn an MPI return code into a `Result`, naming the call.
pub fn check(code: c_int, what: &str) -> Result<()> {
    if code == ffi::MPI_SUCCESS as c_int {
        Ok(())
    } else {
        Err(Error::new(
            ErrorKind::Mpi(code),
            format!("{what} failed: {}", error_string(code)),
        ))
    }
}

/// MPI's text for an error code.
pub fn error_string(code: c_int) -> String {
    let mut buf = vec![0u8; ffi::MPI_MAX_ERROR_STRING as usize + 1];
    let mut len: c_int = 0;
    // SAFETY: the buffer holds MPI_MAX_ERROR_STRING bytes as MPI requires.
    let rc = unsafe { ffi::PMPI_Error_string(code, buf.as_mut_ptr() as *mut _, &mut len) };
    if rc != ffi::MPI_SUCCESS as c_int {
        return format!("MPI error {code}");
    }
    buf.truncate(len.max(0) as usize);
    String::from_utf8_lossy(&buf).into_owned()
}

/// The byte datatype (uint8_t has MPI_BYTE's size; rsmpi exports no MPI_BYTE handle).
pub fn byte_type() -> MPI_Datatype {
    // SAFETY: reading an initialized extern constant.
    unsafe { ffi::RSMPI_UINT8_T }
}

pub fn null_request() -> MPI_Request {
    // SAFETY: reading an initialized extern constant.
    unsafe { ffi::RSMPI_REQUEST_NULL }
}

pub fn any_source() -> c_int {
    // SAFETY: reading an initialized extern constant.
    unsafe { ffi::RSMPI_ANY_SOURCE }
}

/// A zeroed status (MPI fills it).
pub fn empty_status() -> MPI_Status {
    // SAFETY: MPI_Status is a plain C struct of integers; all-zero is a valid value.
    unsafe { MaybeUninit::zeroed().assume_init() }
}

pub fn comm_rank(comm: MPI_Comm) -> Result<i32> {
    let mut r = 0;
    // SAFETY: comm is a valid communicator handle supplied by the caller.
    check(unsafe { ffi::PMPI_Comm_rank(comm, &mut r) }, "MPI_Comm_rank")?;
    Ok(r)
}

pub fn comm_size(comm: MPI_Comm) -> Result<i32> {
    let mut s = 0;
    // SAFETY: as above.
    check(unsafe { ffi::PMPI_Comm_size(comm, &mut s) }, "MPI_Comm_size")?;
    Ok(s)
}

pub fn wtime() -> f64 {
    // SAFETY: no arguments.
    unsafe { ffi::PMPI_Wtime() }
}

/// Post a non-blocking receive of `len` bytes at `ptr`.
///
/// # Safety
/// `ptr..ptr+len` must stay valid and untouched until the request completes.
pub unsafe fn irecv_bytes(ptr: *mut u8, len: u64, src: i32, tag: i32, comm: MPI_Comm) -> Result<MPI_Request> {
    let (count, dt) = byte_message_type(len)?;
    let mut req = null_request();
    let rc = ffi::PMPI_Irecv(ptr as *mut c_void, count, dt.handle(), src, tag, comm, &mut req);
    check(rc, "MPI_Irecv")?;
    Ok(req)
}

/// Start a non-blocking send of `len` bytes at `ptr`.
///
/// # Safety
/// `ptr..ptr+len` must stay valid until the request completes.
pub unsafe fn isend_bytes(ptr: *const u8, len: u64, dst: i32, tag: i32, comm: MPI_Comm) -> Result<MPI_Request> {
    let (count, dt) = byte_message_type(len)?;
    let mut req = null_request();
    let rc = ffi::PMPI_Isend(ptr as *mut c_void, count, dt.handle(), dst, tag, comm, &mut req);
    check(rc, "MPI_Isend")?;
    Ok(req)
}

/// A datatype describing one message of some byte length: plain bytes when the length fits an
/// `int` count, otherwise a committed struct type of `q` MiB blocks plus a byte remainder, so a
/// message above 2 GiB is still ONE message (both ends build the same type from the length).
pub enum MessageType {
    Bytes,
    Large(MPI_Datatype),
}

impl MessageType {
    pub fn handle(&self) -> MPI_Datatype {
        match self {
            MessageType::Bytes => byte_type(),
            MessageType::Large(t) => *t,
        }
    }
}

impl Drop for MessageType {
    fn drop(&mut self) {
        if let MessageType::Large(t) = self {
            // MPI keeps a committed type alive until pending operations using it complete, so
            // freeing right after posting is allowed (MPI-4 section 5.1.11).
            // SAFETY: t is a type we created and own.
            unsafe {
                ffi::PMPI_Type_free(t);
            }
        }
    }
}

/// `(count, type)` for a message of `len` bytes.
pub fn byte_message_type(len: u64) -> Result<(c_int, MessageType)> {
    if len <= c_int::MAX as u64 {
        return Ok((len as c_int, MessageType::Bytes));
    }
    const BLOCK: u64 = 1 << 20;
    let q = len / BLOCK;
    let rem = len % BLOCK;
    if q > c_int::MAX as u64 {
        return Err(Error::new(
            ErrorKind::Count,
            format!("message of {len} bytes is too large"),
        ));
    }
    // SAFETY: plain type-constructor calls on handles we own.
    unsafe {
        let mut block = MaybeUninit::<MPI_Datatype>::uninit();
        check(
            ffi::PMPI_Type_contiguous(BLOCK as c_int, byte_type(), block.as_mut_ptr()),
            "MPI_Type_contiguous",
        )?;
        let mut block = block.assume_init();
        let lens = [q as c_int, rem as c_int];
        let displs = [0 as ffi::MPI_Aint, (q * BLOCK) as ffi::MPI_Aint];
        let types = [block, byte_type()];
        let mut t = MaybeUninit::<MPI_Datatype>::uninit();
        let rc = ffi::PMPI_Type_create_struct(
            2,
            lens.as_ptr(),
            displs.as_ptr(),
            types.as_ptr() as *mut MPI_Datatype,
            t.as_mut_ptr(),
        );
        ffi::PMPI_Type_free(&mut block);
        check(rc, "MPI_Type_create_struct")?;
        let mut t = t.assume_init();
        check(ffi::PMPI_Type_commit(&mut t), "MPI_Type_commit")?;
        Ok((1, MessageType::Large(t)))
    }
}

/// Number of bytes a completed receive or probe delivered (64-bit safe).
pub fn status_bytes(status: &MPI_Status) -> Result<u64> {
    let mut n: ffi::MPI_Count = 0;
    // SAFETY: status was filled by MPI.
    check(
        unsafe { ffi::PMPI_Get_elements_x(status, byte_type(), &mut n) },
        "MPI_Get_elements_x",
    )?;
    if n < 0 {
        return Err(Error::new(ErrorKind::Other, "message byte count is undefined"));
    }
    Ok(n as u64)
}

/// Non-blocking probe for a message from `src` with `tag`; returns its status if one is waiting.
pub fn iprobe(src: i32, tag: i32, comm: MPI_Comm) -> Result<Option<MPI_Status>> {
    let mut flag = 0;
    let mut st = empty_status();
    // SAFETY: comm valid; status is ours.
    check(
        unsafe { ffi::PMPI_Iprobe(src, tag, comm, &mut flag, &mut st) },
        "MPI_Iprobe",
    )?;
    Ok(if flag != 0 { Some(st) } else { None })
}

/// Cancel a pending receive and complete it. Returns true if it was cancelled, false if it had
/// already matched a message (the caller then treats it as completed).
pub fn cancel_recv(req: &mut MPI_Request) -> Result<bool> {
    if *req == null_request() {
        return Ok(false);
    }
    // SAFETY: req is an active request we own.
    unsafe {
        check(ffi::PMPI_Cancel(req), "MPI_Cancel")?;
        let mut st = empty_status();
        check(ffi::PMPI_Wait(req, &mut st), "MPI_Wait")?;
        let mut flag = 0;
        check(ffi::PMPI_Test_cancelled(&st, &mut flag), "MPI_Test_cancelled")?;
        Ok(flag != 0)
    }
}

/// Whether this MPI raises the errors of the calls that complete several requests
/// (`MPI_Testsome`, `MPI_Waitall`, ...) on the default error handler rather than on the
/// requests' communicator. MPICH does (it aborts the job on a truncated receive even though our
/// duplicate has `MPI_ERRORS_RETURN`; `MPI_Test` and `MPI_Wait` honour the communicator's
/// handler); Open MPI does not. treecast then completes requests one at a time.
const MULTI_COMPLETION_IS_FATAL: bool = crate::MPICH_FAMILY;

/// `MPI_Testsome` on `reqs`: completed indices in `idx`, their statuses in `sts`, their number
/// returned (`MPI_UNDEFINED` when every request is null). A failed request completes with its
/// error in its status' `MPI_ERROR`, and the call returns `MPI_ERR_IN_STATUS`, on every MPI
/// (see [`MULTI_COMPLETION_IS_FATAL`]). Other return codes are errors of the call itself.
///
/// # Safety
/// `reqs` are requests this process owns; `idx` and `sts` hold at least `reqs.len()` entries.
pub unsafe fn test_some(reqs: &mut [MPI_Request], idx: &mut [c_int], sts: &mut [MPI_Status]) -> (c_int, c_int) {
    if !MULTI_COMPLETION_IS_FATAL {
        let mut outcount: c_int = 0;
        let rc = ffi::PMPI_Testsome(
            reqs.len() as c_int,
            reqs.as_mut_ptr(),
            &mut outcount,
            idx.as_mut_ptr(),
            sts.as_mut_ptr(),
        );
        return (rc, outcount);
    }
    let null = null_request();
    let (mut out, mut active, mut rc) = (0usize, false, ffi::MPI_SUCCESS as c_int);
    for (i, r) in reqs.iter_mut().enumerate() {
        if *r == null {
            continue;
        }
        active = true;
        let mut flag: c_int = 0;
        let mut st = empty_status();
        let code = ffi::PMPI_Test(r, &mut flag, &mut st);
        if code != ffi::MPI_SUCCESS as c_int {
            if *r != null && flag == 0 {
                return (code, out as c_int); // the call failed, not the request
            }
            st.MPI_ERROR = code;
            rc = ffi::MPI_ERR_IN_STATUS as c_int;
            flag = 1;
        }
        if flag != 0 {
            idx[out] = i as c_int;
            sts[out] = st;
            out += 1;
        }
    }
    if !active {
        return (rc, ffi::MPI_UNDEFINED as c_int);
    }
    (rc, out as c_int)
}

/// Wait for all requests; the first error found in a status is returned.
pub fn wait_all(reqs: &mut [MPI_Request]) -> Result<()> {
    if reqs.is_empty() {
        return Ok(());
    }
    if MULTI_COMPLETION_IS_FATAL {
        for r in reqs.iter_mut() {
            let mut st = empty_status();
            // SAFETY: requests are ours.
            check(unsafe { ffi::PMPI_Wait(r, &mut st) }, "MPI_Wait")?;
        }
        return Ok(());
    }
    // SAFETY: requests are ours; statuses are ignored on success.
    let rc = unsafe { ffi::PMPI_Waitall(reqs.len() as c_int, reqs.as_mut_ptr(), ffi::RSMPI_STATUSES_IGNORE) };
    if rc == ffi::MPI_SUCCESS as c_int {
        return Ok(());
    }
    // Find which one failed: wait for each (completed ones are null now) to get its status.
    for r in reqs.iter_mut() {
        let mut st = empty_status();
        // SAFETY: as above.
        let rc = unsafe { ffi::PMPI_Wait(r, &mut st) };
        if rc != ffi::MPI_SUCCESS as c_int {
            return check(rc, "MPI_Wait");
        }
    }
    check(rc, "MPI_Waitall")
}
