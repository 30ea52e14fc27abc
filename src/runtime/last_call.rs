//! The last calls remembered by the broadcast's fast path (see `bcast`): a few entries for
//! the process, each under a sequence lock, a call's entry chosen by its count. A leaf module,
//! so that a communicator state's deletion (`state`) can forget them without the state
//! depending on the broadcast.
//!
//! Why more than one: a program mixes sizes (a 100 B broadcast of parameters between the 1 MiB
//! ones of data), and with one entry every call after one of another size took the full path.
//! Unprofiled that cost nothing measurable, but profiled it did: 8 B calls between 16-512 B ones
//! through the interposer took 0.33 us on the root against 0.14 in a row, and the receiver 0.51
//! against 0.26-0.32 (2 ranks, 2026-11-30); and the profile timed the full path's route lookup
//! and bookkeeping into the call, so 1 KiB between 512 B calls read 0.36-0.38 us against
//! 0.29-0.31 in a row (3 jobs each).

use mpi::ffi::{MPI_Comm, MPI_Datatype};
use std::ffi::c_void;
use std::os::raw::c_int;
use std::sync::atomic::{fence, AtomicU64, AtomicUsize, Ordering};

/// Bumped whenever a communicator's state goes away (or its routes are forgotten), together
/// with [`forget`]; [`store`] checks it so that an entry written concurrently does not
/// survive either.
static EPOCH: AtomicU64 = AtomicU64::new(0);

/// A communicator's state went away (or its routes were forgotten): whatever the entry
/// remembers may no longer be valid.
pub fn invalidate() {
    EPOCH.fetch_add(1, Ordering::AcqRel);
    forget();
}

/// Bits of an MPI handle (a pointer or an integer, whatever the implementation).
#[inline(always)]
fn bits<T: Copy>(h: T) -> u64 {
    const { assert!(std::mem::size_of::<T>() <= 8) };
    let mut out = [0u8; 8];
    // SAFETY: T is a plain handle of at most 8 bytes, copied byte for byte.
    unsafe { std::ptr::copy_nonoverlapping(&h as *const T as *const u8, out.as_mut_ptr(), std::mem::size_of::<T>()) };
    u64::from_ne_bytes(out)
}

/// The handle whose [`bits`] are `b`.
///
/// # Safety
/// `b` must come from [`bits`] of a `T`.
#[inline(always)]
unsafe fn from_bits<T: Copy>(b: u64) -> T {
    let bytes = b.to_ne_bytes();
    std::ptr::read_unaligned(bytes.as_ptr() as *const T)
}

struct Entry {
    /// Even: stable; odd: being written.
    version: AtomicU64,
    /// The user's communicator; 0 when the entry is empty or was forgotten.
    comm: AtomicU64,
    datatype: AtomicU64,
    /// Count and root in one word ([`key`]).
    key: AtomicU64,
    /// Nonzero: a call with the same count and any root below this (the communicator's size)
    /// repeats the entry too, every root's route being the library's.
    any_root_below: AtomicU64,
    dup: AtomicU64,
    /// The profiled communicator's state (`&'static state::Slot` as an address), 0 when the
    /// communicator is not profiled.
    slot: AtomicUsize,
    /// The message size in bytes (for the profile).
    bytes: AtomicU64,
}

/// Empty at first: no communicator handle is all zero bits (Open MPI's are pointers,
/// MPICH's have tag bits), so the zeroed entry matches no call.
#[allow(clippy::declare_interior_mutable_const)] // only to initialise `LAST`, entry by entry
const EMPTY: Entry = Entry {
    version: AtomicU64::new(0),
    comm: AtomicU64::new(0),
    datatype: AtomicU64::new(0),
    key: AtomicU64::new(0),
    any_root_below: AtomicU64::new(0),
    dup: AtomicU64::new(0),
    slot: AtomicUsize::new(0),
    bytes: AtomicU64::new(0),
};

/// Entries: one per bit length of the count (0 .. 31 bits), so that calls whose counts lie in
/// different power-of-two classes never displace each other, whatever the sizes; a program's
/// broadcasts come in a handful of sizes, rarely two of one class. 32 x 64 bytes.
const WAYS: usize = 32;

static LAST: [Entry; WAYS] = [EMPTY; WAYS];

/// The entry of a call of `count` elements, whatever its root (a repeat from another root
/// finds the entry of its count); a negative count shares the entry of 0 and matches no call.
#[inline(always)]
fn entry(count: c_int) -> &'static Entry {
    &LAST[(u32::BITS - (count as u32).leading_zeros()) as usize % WAYS]
}

/// Count and root as one word, compared at once. Remembered counts and roots are at most
/// `i32::MAX`; a negative one (the bits of a C `int` above it) never matches one.
#[inline(always)]
fn key(count: c_int, root: c_int) -> u64 {
    (count as u32 as u64) | ((root as u32 as u64) << 32)
}

/// Whether a call of `count` from `root` repeats the entry whose key is `k` with another
/// root: the same count and a root in range where any root will do. A negative root (or
/// count) never matches: its bits as `u32` exceed every remembered one.
#[inline(always)]
fn same_call_other_root(e: &Entry, k: u64, count: c_int, root: c_int) -> bool {
    let below = e.any_root_below.load(Ordering::Relaxed);
    below != 0 && k as u32 == count as u32 && (root as u32 as u64) < below
}

/// A call that repeats the remembered one.
pub struct Hit {
    /// The communicator's private duplicate, on which the library broadcasts.
    pub dup: MPI_Comm,
    /// The profiled communicator's state (an address), 0 when not profiled.
    pub slot: usize,
    /// The message size in bytes (for the profile; read only when asked for).
    pub bytes: u64,
    /// The call's root is not the remembered one (any root would do): a profiled state has
    /// not necessarily seen it yet.
    pub other_root: bool,
}

impl Hit {
    /// Whether the call must be counted in a profile (then `bcast`'s profiled fast path serves it).
    #[inline(always)]
    pub fn profiled(&self) -> bool {
        self.slot != 0
    }
}

/// The remembered call's entry if this call repeats one, else `None`: loads and compares
/// only, no MPI call, so a front end can inline it into its own entry point. `SIZE`:
/// whether a profiled entry's message size is read too (only a profiled call needs it;
/// reading it costs the interposer's entry registers it would have to save).
///
/// # Safety
/// As for `runtime::bcast::bcast`.
#[inline(always)]
pub unsafe fn lookup<const SIZE: bool>(
    comm: MPI_Comm,
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    root: c_int,
) -> Option<Hit> {
    let e = entry(count);
    let v = e.version.load(Ordering::Acquire);
    if v % 2 == 1 || buf.is_null() {
        return None;
    }
    let k = e.key.load(Ordering::Relaxed);
    let exact = k == key(count, root);
    let hit = e.comm.load(Ordering::Relaxed) == bits(comm)
        && e.datatype.load(Ordering::Relaxed) == bits(datatype)
        && (exact || same_call_other_root(e, k, count, root));
    let dup = e.dup.load(Ordering::Relaxed);
    let slot = e.slot.load(Ordering::Relaxed);
    let bytes = if SIZE && slot != 0 {
        e.bytes.load(Ordering::Relaxed)
    } else {
        0
    };
    fence(Ordering::Acquire);
    if !hit || e.version.load(Ordering::Relaxed) != v {
        return None;
    }
    Some(Hit {
        dup: from_bits(dup),
        slot,
        bytes,
        other_root: !exact,
    })
}

/// Take an entry's write lock, waiting for another writer (writers are a few stores); the
/// version to pass to [`unlock`].
fn lock(e: &Entry) -> u64 {
    loop {
        let v = e.version.load(Ordering::Relaxed);
        if v.is_multiple_of(2)
            && e.version
                .compare_exchange_weak(v, v + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            return v;
        }
        std::hint::spin_loop();
    }
}

fn unlock(e: &Entry, v: u64) {
    e.version.store(v + 2, Ordering::Release);
}

/// Forget every entry: a communicator's state went away (or its routes were forgotten), so
/// a remembered duplicate may no longer be valid. Called after [`EPOCH`] is bumped; see
/// [`store`] for why the two together leave no stale entry.
pub fn forget() {
    for e in &LAST {
        let v = lock(e);
        e.comm.store(0, Ordering::Relaxed);
        unlock(e, v);
    }
}

/// What identifies a remembered call, and where it goes.
pub struct Remembered {
    /// The user's communicator.
    pub comm: MPI_Comm,
    /// Its private duplicate, on which the library broadcasts.
    pub dup: MPI_Comm,
    pub datatype: MPI_Datatype,
    pub count: c_int,
    pub root: c_int,
    /// Nonzero: any root below this repeats the call too (see [`Entry`]).
    pub any_root_below: u32,
}

/// Remember a call (see `bcast`'s fast path for which) in its count's entry: `call`, the
/// profiled state's address (0 when not profiled) and the message size. Skipped when another
/// thread is writing that entry.
pub fn store(call: Remembered, slot: usize, bytes: u64) {
    let Remembered {
        comm,
        dup,
        datatype,
        count,
        root,
        any_root_below,
    } = call;
    // A state deleted while this is written must not leave its duplicate here: deletion
    // bumps the epoch, then forgets the entry under the same lock. If the bump comes
    // before the check below, the entry is cleared here; if after, `forget` runs after
    // this write. Either way the last word is empty.
    let e = entry(count);
    let epoch = EPOCH.load(Ordering::Acquire);
    let v = e.version.load(Ordering::Relaxed);
    if v % 2 == 1
        || e.version
            .compare_exchange(v, v + 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
    {
        return; // another thread is writing: let it
    }
    e.comm.store(bits(comm), Ordering::Relaxed);
    e.datatype.store(bits(datatype), Ordering::Relaxed);
    e.key.store(key(count, root), Ordering::Relaxed);
    e.any_root_below.store(any_root_below as u64, Ordering::Relaxed);
    e.dup.store(bits(dup), Ordering::Relaxed);
    e.slot.store(slot, Ordering::Relaxed);
    e.bytes.store(bytes, Ordering::Relaxed);
    if EPOCH.load(Ordering::Acquire) != epoch {
        e.comm.store(0, Ordering::Relaxed);
    }
    unlock(e, v);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one test that touches the process-wide entries (others would race it).
    #[test]
    fn a_repeat_matches_by_root_or_by_any_root_in_range() {
        // SAFETY: handles made of plain bits, never passed to MPI.
        let (comm, dup, dt, other_dt): (MPI_Comm, MPI_Comm, MPI_Datatype, MPI_Datatype) = unsafe {
            (
                from_bits(0x1000),
                from_bits(0x2000),
                from_bits(0x3000),
                from_bits(0x4000),
            )
        };
        let buf = 0x5000 as *mut c_void;
        let remember = |any_root_below| {
            store(
                Remembered {
                    comm,
                    dup,
                    datatype: dt,
                    count: 64,
                    root: 1,
                    any_root_below,
                },
                0,
                64,
            )
        };
        // SAFETY: lookup only loads and compares.
        let hit = |count, datatype, root| unsafe { lookup::<false>(comm, buf, count, datatype, root).is_some() };

        remember(0);
        assert!(hit(64, dt, 1));
        assert!(!hit(64, dt, 2), "another root, root-specific entry");

        remember(4);
        for root in 0..4 {
            assert!(hit(64, dt, root), "root {root} in range");
        }
        assert!(!hit(64, dt, 4), "root out of range");
        assert!(!hit(64, dt, -1), "negative root");
        assert!(!hit(65, dt, 2), "another count");
        assert!(!hit(64, other_dt, 2), "another datatype");
        // SAFETY: as above.
        assert!(
            unsafe { lookup::<false>(comm, std::ptr::null_mut(), 64, dt, 1) }.is_none(),
            "NULL buffer"
        );
        assert_eq!(
            // SAFETY: as above.
            unsafe { lookup::<false>(comm, buf, 64, dt, 3) }.map(|h| bits(h.dup)),
            Some(0x2000),
            "the hit names the duplicate"
        );

        // Counts of other classes keep entries of their own; one of the same class displaces.
        let store_count = |count| {
            store(
                Remembered {
                    comm,
                    dup,
                    datatype: dt,
                    count,
                    root: 1,
                    any_root_below: 0,
                },
                0,
                count as u64,
            )
        };
        store_count(1024);
        store_count(8);
        assert!(
            hit(64, dt, 1) && hit(1024, dt, 1) && hit(8, dt, 1),
            "three classes, three entries"
        );
        store_count(100);
        assert!(
            hit(100, dt, 1) && !hit(64, dt, 1),
            "64 and 100 share the 64 .. 127 entry"
        );
        assert!(
            !hit(-1, dt, 1) && !hit(0, dt, 1),
            "no call of a negative count or of 0 was remembered"
        );

        invalidate();
        for count in [100, 1024, 8] {
            assert!(!hit(count, dt, 1), "{count}: forgotten");
        }
    }
}
