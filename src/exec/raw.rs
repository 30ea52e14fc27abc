//! Thin wrappers over the PMPI calls treecast makes.
//!
//! Why PMPI and not MPI or rsmpi's safe API: the `LD_PRELOAD` interposer replaces `MPI_Bcast`
//! (and wraps `MPI_Init`/`MPI_Finalize`), so the library's own traffic must not re-enter it; and
//! PMPI keeps our internal messages out of other PMPI-based profilers' counts. Every wrapper turns
//! a non-success return into an [`Error`] naming the call.
//!
//! Why one layer: the `unsafe` of the FFI (raw pointers, counts as `int`, out-parameters,
//! handles read from extern statics) and the differences between Open MPI and MPICH
//! (`cfg(treecast_mpi)`, [`MULTI_COMPLETION_IS_FATAL`]) stay here, so the runtime reads as MPI
//! calls on slices and handles. Functions that take buffers an operation keeps using after they
//! return (non-blocking sends, receives, gathers) stay `unsafe fn`: the caller must keep the
//! buffer alive until the request completes, which no signature here can check.
//!
//! Sections: constants and handles; environment; communicators and attributes; datatypes;
//! point to point; collectives; completion.

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

/// Functions returning MPI's predefined handles and constants (rsmpi exposes them as extern
/// statics, whose every read is `unsafe`).
macro_rules! constants {
    ($($(#[$doc:meta])* $name:ident: $ty:ty = $item:ident;)*) => {$(
        $(#[$doc])*
        pub fn $name() -> $ty {
            // SAFETY: reading an initialized extern constant.
            unsafe { ffi::$item }
        }
    )*};
}

constants! {
    /// The byte datatype (uint8_t has MPI_BYTE's size; rsmpi exports no MPI_BYTE handle).
    byte_type: MPI_Datatype = RSMPI_UINT8_T;
    null_request: MPI_Request = RSMPI_REQUEST_NULL;
    any_source: c_int = RSMPI_ANY_SOURCE;
    any_tag: c_int = RSMPI_ANY_TAG;
    comm_null: MPI_Comm = RSMPI_COMM_NULL;
    comm_world: MPI_Comm = RSMPI_COMM_WORLD;
    comm_self: MPI_Comm = RSMPI_COMM_SELF;
    datatype_null: MPI_Datatype = RSMPI_DATATYPE_NULL;
}

/// A zeroed status (MPI fills it).
pub fn empty_status() -> MPI_Status {
    // SAFETY: MPI_Status is a plain C struct of integers; all-zero is a valid value.
    unsafe { MaybeUninit::zeroed().assume_init() }
}

/// Element types the collectives below carry, with their MPI datatype.
pub trait Element: Copy + sealed::Sealed {
    fn datatype() -> MPI_Datatype;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for i32 {}
    impl Sealed for i64 {}
    impl Sealed for u8 {}
    impl Sealed for f64 {}
}

macro_rules! elements {
    ($($ty:ty = $item:ident;)*) => {$(
        impl Element for $ty {
            fn datatype() -> MPI_Datatype {
                // SAFETY: reading an initialized extern constant.
                unsafe { ffi::$item }
            }
        }
    )*};
}

elements! {
    i32 = RSMPI_INT32_T;
    i64 = RSMPI_INT64_T;
    u8 = RSMPI_UINT8_T;
    f64 = RSMPI_DOUBLE;
}

/// `len` as an MPI count.
fn count_of(len: usize) -> Result<c_int> {
    c_int::try_from(len).map_err(|_| Error::new(ErrorKind::Count, format!("{len} elements exceed an MPI count")))
}

/// A send buffer's address for MPI. Never an empty slice's dangling pointer: for bytes it is
/// 0x1, which is `MPI_IN_PLACE` in Open MPI (an argument error on non-root ranks).
fn send_ptr<T>(buf: &[T]) -> *const c_void {
    static NOTHING: u64 = 0;
    if buf.is_empty() {
        &NOTHING as *const u64 as *const c_void
    } else {
        buf.as_ptr() as *const c_void
    }
}

// ---- Environment ----

/// Whether `MPI_Init` has been called (callable at any time).
pub fn initialized() -> bool {
    let mut f = 0;
    // SAFETY: callable at any time.
    unsafe { ffi::PMPI_Initialized(&mut f) };
    f != 0
}

/// Whether `MPI_Finalize` has completed (callable at any time).
pub fn finalized() -> bool {
    let mut f = 0;
    // SAFETY: callable at any time.
    unsafe { ffi::PMPI_Finalized(&mut f) };
    f != 0
}

/// Bytes of a processor name (`MPI_MAX_PROCESSOR_NAME` in both Open MPI and MPICH).
pub const PROCESSOR_NAME_BYTES: usize = 256;

/// This process' processor name, NUL-padded (all zeros should MPI fail to give one).
pub fn processor_name() -> [u8; PROCESSOR_NAME_BYTES] {
    let mut buf = [0u8; PROCESSOR_NAME_BYTES];
    let mut len: c_int = 0;
    // SAFETY: MPI writes at most MPI_MAX_PROCESSOR_NAME (256) bytes.
    unsafe { ffi::PMPI_Get_processor_name(buf.as_mut_ptr() as *mut _, &mut len) };
    buf
}

// ---- Communicators and attributes ----

/// A duplicate of `comm` (collective).
pub fn comm_dup(comm: MPI_Comm) -> Result<MPI_Comm> {
    let mut dup = comm_null();
    // SAFETY: comm is a valid communicator handle supplied by the caller.
    check(unsafe { ffi::PMPI_Comm_dup(comm, &mut dup) }, "MPI_Comm_dup")?;
    Ok(dup)
}

/// Free `comm` (sets it to `MPI_COMM_NULL`). Errors are ignored: this runs on cleanup paths
/// (drops, error unwinding) that have nothing better to do with one.
pub fn comm_free(comm: &mut MPI_Comm) {
    // SAFETY: comm is a communicator this process created and frees once.
    unsafe {
        ffi::PMPI_Comm_free(comm);
    }
}

/// `MPI_Comm_split` (collective): ranks with `color` `None` get `MPI_COMM_NULL`.
pub fn comm_split(comm: MPI_Comm, color: Option<c_int>, key: c_int) -> Result<MPI_Comm> {
    let mut out = comm_null();
    // SAFETY: comm is a valid communicator handle; the color constant is read from MPI.
    unsafe {
        let color = color.unwrap_or(ffi::RSMPI_UNDEFINED);
        check(ffi::PMPI_Comm_split(comm, color, key, &mut out), "MPI_Comm_split")?;
    }
    Ok(out)
}

/// The ranks of `comm` that share memory with this one (collective; `MPI_COMM_TYPE_SHARED`).
pub fn comm_split_shared(comm: MPI_Comm, key: c_int) -> Result<MPI_Comm> {
    let mut out = comm_null();
    // SAFETY: comm is a valid communicator handle; the constants are read from MPI.
    check(
        unsafe { ffi::PMPI_Comm_split_type(comm, ffi::RSMPI_COMM_TYPE_SHARED, key, ffi::RSMPI_INFO_NULL, &mut out) },
        "MPI_Comm_split_type",
    )?;
    Ok(out)
}

/// Whether `comm` is an inter-communicator.
pub fn comm_test_inter(comm: MPI_Comm) -> Result<bool> {
    let mut inter = 0;
    // SAFETY: comm is a non-null communicator handle supplied by the caller.
    check(
        unsafe { ffi::PMPI_Comm_test_inter(comm, &mut inter) },
        "MPI_Comm_test_inter",
    )?;
    Ok(inter != 0)
}

/// Make errors on `comm` return codes (`MPI_ERRORS_RETURN`) instead of aborting the job.
pub fn set_errors_return(comm: MPI_Comm) -> Result<()> {
    // SAFETY: comm is a valid communicator handle; the handler is MPI's constant.
    check(
        unsafe { ffi::PMPI_Comm_set_errhandler(comm, ffi::RSMPI_ERRORS_RETURN) },
        "MPI_Comm_set_errhandler",
    )
}

/// A new attribute keyval with these callbacks (no extra state).
pub fn comm_create_keyval(
    copy: ffi::MPI_Comm_copy_attr_function,
    delete: ffi::MPI_Comm_delete_attr_function,
) -> Result<c_int> {
    let mut kv: c_int = 0;
    // SAFETY: MPI stores the callbacks and calls them with the attribute values we set.
    check(
        unsafe { ffi::PMPI_Comm_create_keyval(copy, delete, &mut kv, std::ptr::null_mut()) },
        "MPI_Comm_create_keyval",
    )?;
    Ok(kv)
}

/// Attach `val` to `comm` under `keyval` (the keyval's delete callback receives it).
///
/// # Safety
/// `val` must be what the keyval's callbacks expect, and stay valid until its delete callback.
pub unsafe fn comm_set_attr(comm: MPI_Comm, keyval: c_int, val: *mut c_void) -> Result<()> {
    let what = if comm == comm_self() {
        "MPI_Comm_set_attr(MPI_COMM_SELF)"
    } else {
        "MPI_Comm_set_attr"
    };
    // comm is a valid communicator handle; MPI stores the pointer without reading it.
    check(ffi::PMPI_Comm_set_attr(comm, keyval, val), what)
}

/// The value attached to `comm` under `keyval`, if any.
pub fn comm_get_attr(comm: MPI_Comm, keyval: c_int) -> Result<Option<*mut c_void>> {
    let mut val: *mut c_void = std::ptr::null_mut();
    let mut flag: c_int = 0;
    // SAFETY: comm is a valid communicator handle; MPI writes one pointer into `val`.
    check(
        unsafe { ffi::PMPI_Comm_get_attr(comm, keyval, &mut val as *mut *mut c_void as *mut c_void, &mut flag) },
        "MPI_Comm_get_attr",
    )?;
    Ok((flag != 0).then_some(val))
}

/// `MPI_TAG_UB` of `comm`, if MPI gives one.
pub fn tag_ub(comm: MPI_Comm) -> Result<Option<c_int>> {
    let mut ptr: *mut c_int = std::ptr::null_mut();
    let mut flag: c_int = 0;
    // SAFETY: comm is a valid communicator handle; the predefined attribute is a pointer to an
    // int MPI owns for the communicator's lifetime.
    unsafe {
        check(
            ffi::PMPI_Comm_get_attr(
                comm,
                ffi::MPI_TAG_UB as c_int,
                &mut ptr as *mut *mut c_int as *mut c_void,
                &mut flag,
            ),
            "MPI_Comm_get_attr(MPI_TAG_UB)",
        )?;
        Ok((flag != 0 && !ptr.is_null()).then(|| *ptr))
    }
}

// ---- Datatypes ----

/// Size in bytes of one element of `datatype` (`MPI_Type_size_x`; `MPI_UNDEFINED` if it does not
/// fit, which is negative).
pub fn type_size(datatype: MPI_Datatype) -> Result<i64> {
    let mut size: ffi::MPI_Count = 0;
    // SAFETY: datatype is a valid, non-null datatype handle supplied by the caller.
    check(unsafe { ffi::PMPI_Type_size_x(datatype, &mut size) }, "MPI_Type_size_x")?;
    Ok(size as i64)
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

// ---- Point to point ----

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

// ---- Collectives ----

/// Broadcast `buf` from `root` over `comm` (collective).
pub fn bcast<T: Element>(buf: &mut [T], root: c_int, comm: MPI_Comm) -> Result<()> {
    let count = count_of(buf.len())?;
    // SAFETY: buf holds `count` elements for the call's duration.
    check(
        unsafe { ffi::PMPI_Bcast(buf.as_mut_ptr() as *mut c_void, count, T::datatype(), root, comm) },
        "MPI_Bcast",
    )
}

/// `MPI_Bcast` of a byte buffer of any length (cut into 1 MiB blocks beyond an MPI count, see
/// [`byte_message_type`]); every rank passes a buffer of the same length.
pub fn bcast_bytes(buf: &mut [u8], root: c_int, comm: MPI_Comm) -> Result<()> {
    let (count, dt) = byte_message_type(buf.len() as u64)?;
    // SAFETY: buf holds `count` elements of `dt` for the call's duration.
    check(
        unsafe { ffi::PMPI_Bcast(buf.as_mut_ptr() as *mut c_void, count, dt.handle(), root, comm) },
        "MPI_Bcast",
    )
}

/// Blocking `MPI_Send` of `buf`.
pub fn send<T: Element>(buf: &[T], dst: c_int, tag: c_int, comm: MPI_Comm) -> Result<()> {
    let count = count_of(buf.len())?;
    // SAFETY: buf holds `count` elements for the call's duration (MPI only reads it).
    check(
        unsafe { ffi::PMPI_Send(send_ptr(buf), count, T::datatype(), dst, tag, comm) },
        "MPI_Send",
    )
}

/// Blocking `MPI_Recv` into `buf` (a message of at most its length).
pub fn recv<T: Element>(buf: &mut [T], src: c_int, tag: c_int, comm: MPI_Comm) -> Result<()> {
    let count = count_of(buf.len())?;
    let mut st = empty_status();
    // SAFETY: buf holds `count` elements for the call's duration.
    check(
        unsafe {
            ffi::PMPI_Recv(
                buf.as_mut_ptr() as *mut c_void,
                count,
                T::datatype(),
                src,
                tag,
                comm,
                &mut st,
            )
        },
        "MPI_Recv",
    )
}

/// `MPI_Bcast` of a caller's buffer and datatype, returning MPI's code (the library route's hot
/// path and the profiler's comparisons: the caller turns codes into errors as it needs).
///
/// # Safety
/// As `MPI_Bcast`: `buf` holds `count` elements of `datatype`, valid handles.
#[inline(always)]
pub unsafe fn bcast_user(buf: *mut c_void, count: c_int, datatype: MPI_Datatype, root: c_int, comm: MPI_Comm) -> c_int {
    ffi::PMPI_Bcast(buf, count, datatype, root, comm)
}

/// Whether `datatype` is a predefined (named) datatype, one that is never freed; `false` when
/// MPI cannot tell (an invalid handle).
///
/// # Safety
/// `datatype` is a datatype handle (MPI checks its validity).
pub unsafe fn is_named(datatype: MPI_Datatype) -> bool {
    let (mut ni, mut na, mut nd, mut combiner) = (0, 0, 0, 0);
    ffi::PMPI_Type_get_envelope(datatype, &mut ni, &mut na, &mut nd, &mut combiner) == ffi::MPI_SUCCESS as c_int
        && combiner == COMBINER_NAMED
}

/// Every rank's `send` concatenated in rank order into `recv` (collective; `recv` holds
/// `send.len()` elements per rank of `comm`).
pub fn allgather<T: Element>(send: &[T], recv: &mut [T], comm: MPI_Comm) -> Result<()> {
    let count = count_of(send.len())?;
    let size = comm_size(comm)? as usize;
    if recv.len() < send.len() * size {
        return Err(Error::new(
            ErrorKind::Count,
            format!(
                "allgather of {} elements from {size} ranks into {}",
                send.len(),
                recv.len()
            ),
        ));
    }
    // SAFETY: both buffers hold what the counts say for the call's duration.
    check(
        unsafe {
            ffi::PMPI_Allgather(
                send_ptr(send),
                count,
                T::datatype(),
                recv.as_mut_ptr() as *mut c_void,
                count,
                T::datatype(),
                comm,
            )
        },
        "MPI_Allgather",
    )
}

/// The element-wise maximum of every rank's `send` into `recv` (collective).
pub fn allreduce_max<T: Element>(send: &[T], recv: &mut [T], comm: MPI_Comm) -> Result<()> {
    let count = count_of(send.len())?;
    if recv.len() < send.len() {
        return Err(Error::new(ErrorKind::Count, "allreduce into a shorter buffer"));
    }
    // SAFETY: both buffers hold `count` elements for the call's duration.
    check(
        unsafe {
            ffi::PMPI_Allreduce(
                send_ptr(send),
                recv.as_mut_ptr() as *mut c_void,
                count,
                T::datatype(),
                ffi::RSMPI_MAX,
                comm,
            )
        },
        "MPI_Allreduce",
    )
}

/// A barrier on `comm` (collective).
pub fn barrier(comm: MPI_Comm) -> Result<()> {
    // SAFETY: comm is a valid communicator handle; no buffers.
    check(unsafe { ffi::PMPI_Barrier(comm) }, "MPI_Barrier")
}

/// Start a barrier on `comm` (collective); complete it with [`test`] or [`wait_all`].
pub fn ibarrier(comm: MPI_Comm) -> Result<MPI_Request> {
    let mut req = null_request();
    // SAFETY: comm is a valid communicator handle; no buffers.
    check(unsafe { ffi::PMPI_Ibarrier(comm, &mut req) }, "MPI_Ibarrier")?;
    Ok(req)
}

/// Start gathering every rank's `send` to `root`'s `recv` (collective; at the root `recv` holds
/// `send.len()` elements per rank, elsewhere it is not used).
///
/// # Safety
/// Both buffers must stay valid, and `recv` untouched, until the request completes.
pub unsafe fn igather<T: Element>(send: &[T], recv: &mut [T], root: c_int, comm: MPI_Comm) -> Result<MPI_Request> {
    let count = count_of(send.len())?;
    let mut req = null_request();
    let rc = ffi::PMPI_Igather(
        send_ptr(send),
        count,
        T::datatype(),
        recv.as_mut_ptr() as *mut c_void,
        count,
        T::datatype(),
        root,
        comm,
        &mut req,
    );
    check(rc, "MPI_Igather")?;
    Ok(req)
}

/// Start gathering every rank's `send` (of differing lengths) to `root`: rank i's lands at
/// `recv[displs[i]..displs[i] + counts[i]]` (collective; `recv`, `counts` and `displs` are
/// used at the root only).
///
/// # Safety
/// All buffers must stay valid, and `recv` untouched, until the request completes; at the root
/// `counts` and `displs` have an entry per rank and describe ranges inside `recv`.
pub unsafe fn igatherv<T: Element>(
    send: &[T],
    recv: &mut [T],
    counts: &[c_int],
    displs: &[c_int],
    root: c_int,
    comm: MPI_Comm,
) -> Result<MPI_Request> {
    let count = count_of(send.len())?;
    let mut req = null_request();
    let rc = ffi::PMPI_Igatherv(
        send_ptr(send),
        count,
        T::datatype(),
        recv.as_mut_ptr() as *mut c_void,
        counts.as_ptr(),
        displs.as_ptr(),
        T::datatype(),
        root,
        comm,
        &mut req,
    );
    check(rc, "MPI_Igatherv")?;
    Ok(req)
}

// ---- Completion (one request) ----

/// Whether `req` has completed (`MPI_Test`, status ignored); a completed request becomes null.
pub fn test(req: &mut MPI_Request) -> Result<bool> {
    let mut flag: c_int = 0;
    // SAFETY: req is a request this process owns (its buffers were vouched for when posted).
    check(
        unsafe { ffi::PMPI_Test(req, &mut flag, ffi::RSMPI_STATUS_IGNORE) },
        "MPI_Test",
    )?;
    Ok(flag != 0)
}

/// [`test`] returning the completed request's status.
pub fn test_status(req: &mut MPI_Request) -> Result<Option<MPI_Status>> {
    let mut flag: c_int = 0;
    let mut st = empty_status();
    // SAFETY: as for `test`; the status is ours.
    check(unsafe { ffi::PMPI_Test(req, &mut flag, &mut st) }, "MPI_Test")?;
    Ok((flag != 0).then_some(st))
}
