//! The broadcast every front end (Rust trait, C ABI, `MPI_Bcast` interposer) calls.

use super::last_call;
use super::route::{Arm, Route};
use super::state::{self, CommState};
use crate::error::{Error, ErrorKind, Result};
use crate::exec::engine::{self, CallCtx, Outcome};
use crate::exec::layout::{self, Layout};
use crate::exec::tags::POISON_CLASS;
use crate::plan::size_class;
use crate::profile::{self, CallSite};
use mpi::ffi::{MPI_Comm, MPI_Datatype};
use std::ffi::c_void;
use std::os::raw::c_int;

/// Broadcast `count` elements of `datatype` at `buf` from `root` over `comm`.
///
/// Same contract as `MPI_Bcast`. Errors are returned, never fatal: a bad argument on one rank
/// gives that rank an error and the ranks downstream of it in the plan an error; nobody hangs
/// as long as all ranks pass the same root.
///
/// # Safety
/// `buf` must hold `count` elements of `datatype` (as for `MPI_Bcast`), and `comm` and
/// `datatype` must be valid handles or the null handles.
///
/// Inlined into the caller (also across crates) so that a repeated call on a settled library
/// route costs the fast path's few loads and compares and the library's own call, nothing more:
/// the full path is an out-of-line call.
#[inline]
pub unsafe fn bcast(
    comm: MPI_Comm,
    buf: *mut c_void,
    count: i64,
    datatype: MPI_Datatype,
    root: i32,
    site: CallSite,
) -> Result<()> {
    if let Some(rc) = try_fast(comm, buf, count, datatype, root, site) {
        return rc;
    }
    bcast_with(comm, buf, count, datatype, root, site, CallOptions::default())
}

/// How a front end wants this rank's buffer argument judged.
///
/// `topo_bcast` rejects a NULL buffer that should hold data. The `MPI_Bcast` interposer must
/// accept what `MPI_Bcast` accepts: there NULL is `MPI_BOTTOM`, valid with a datatype of
/// absolute addresses. And it must never let one rank's bad argument make that rank skip the
/// collective (other ranks would wait for it, and sequence numbers would diverge), so arguments
/// it already knows to be invalid (`MPI_IN_PLACE`) come in as `reject`: the rank takes part
/// without data, like any rank whose arguments fail validation.
#[derive(Clone, Debug, Default)]
pub struct CallOptions {
    /// A NULL buffer is `MPI_BOTTOM`: accepted unless the datatype's data starts at offset 0
    /// (then it would lie at address 0 and the call fails with `MPI_ERR_BUFFER`).
    pub null_is_bottom: bool,
    /// This rank's arguments are invalid for this reason.
    pub reject: Option<Error>,
}

/// [`bcast`] with explicit [`CallOptions`]: the full path. It does not try the fast path
/// ([`try_fast`]); both front ends try it first (`bcast` here, the interposer before its own
/// checks), so a repeated call is looked up once.
///
/// # Safety
/// As for [`bcast`].
#[inline(never)]
pub unsafe fn bcast_with(
    comm: MPI_Comm,
    buf: *mut c_void,
    count: i64,
    datatype: MPI_Datatype,
    root: i32,
    site: CallSite,
    opts: CallOptions,
) -> Result<()> {
    if !state::mpi_initialized() || state::mpi_finalized() {
        return Err(Error::new(
            ErrorKind::Other,
            "topo_bcast called outside MPI_Init .. MPI_Finalize",
        ));
    }
    // A communicator that has a state was checked when it got it: then only the root is.
    let slot = state::get_checked(comm, || check_root(root, crate::exec::raw::comm_size(comm)?))?;
    let mut st = slot.lock().unwrap_or_else(|p| p.into_inner());
    check_root(root, st.size as i32)?;
    let call = st.calls;
    st.calls += 1;
    let local = match opts.reject {
        Some(e) => Err(e),
        None => local_layout(buf, count, datatype, opts.null_is_bottom),
    };
    let bytes = local.as_ref().map(|l| l.bytes).unwrap_or(0);
    // Profiling off costs one branch here and one below (no clock is read). On, the call is
    // counted and, if sampled, timed from here (after argument checking) to completion; see
    // `profile::tally`. Whether profiling is on is fixed when the state is created, and we
    // hold its lock.
    let pending = profile::begin(&mut st.profile, site, root as u32, bytes, call);
    let result = match local {
        Err(e) => {
            if st.size > 1 {
                // Take part anyway so that ranks depending on this one learn of the failure.
                let seq = next_seq(&mut st);
                let ctx = ctx(&st, seq);
                let _ = participate_without_data(&mut st, &ctx, root as u32);
            }
            Err(e)
        }
        Ok(layout) => routed(&mut st, slot, comm, buf, count as u64, datatype, &layout, root as u32),
    };
    let Some(pending) = pending else {
        return result;
    };
    let took = profile::end(&mut st.profile, pending, result.is_ok());
    if let Some(topo_s) = took.filter(|_| profile::compare_due(&st.profile, call)) {
        if profile::all_ok(st.comm, result.is_ok() && count <= i32::MAX as i64) {
            // Every rank succeeded, so sizes agree: time MPI_Bcast on the same (now identical)
            // data.
            let m0 = crate::exec::raw::wtime();
            let rc = crate::exec::raw::bcast_user(buf, count as std::os::raw::c_int, datatype, root, st.comm);
            let m1 = crate::exec::raw::wtime();
            if rc == mpi::ffi::MPI_SUCCESS as std::os::raw::c_int {
                profile::record_compare(&mut st.profile, &pending, topo_s, m1 - m0);
            }
        }
    }
    result
}

/// The sequence number of a call that runs treecast's plan (its messages' tags carry it).
fn next_seq(st: &mut CommState) -> u64 {
    let seq = st.seq;
    st.seq += 1;
    seq
}

/// Run a valid call on its route (see `route`): the library's `MPI_Bcast` or treecast's plan,
/// timing it while the (root, size class) is on trial and deciding, with every rank, when the
/// trial is complete.
#[allow(clippy::too_many_arguments)]
unsafe fn routed(
    st: &mut CommState,
    slot: &'static state::Slot,
    user_comm: MPI_Comm,
    buf: *mut c_void,
    count: u64,
    datatype: MPI_Datatype,
    layout: &Layout,
    root: u32,
) -> Result<()> {
    let class = size_class(layout.bytes);
    // One rank included, and empty messages (class 0): on the library route the library's
    // broadcast then takes the fast path like any other; on treecast's route an empty
    // broadcast runs a plan of empty messages, so every rank learns the root's size.
    let sel = st.selection(root, class);
    let arm = sel.next();
    let route = arm.route();
    let trial = sel.settled().is_none();
    let t0 = if trial { crate::exec::raw::wtime() } else { 0.0 };
    let result = match arm {
        Arm::Library => library_bcast(st.comm, buf, count, datatype, root),
        Arm::Plan => run(st, buf, count, datatype, layout, root, None),
        Arm::Unsegmented => {
            let plan = st.unsegmented_plan(root, class);
            run(st, buf, count, datatype, layout, root, plan)
        }
    };
    if trial {
        let took = crate::exec::raw::wtime() - t0;
        if st.selection(root, class).record(arm, took) {
            decide(st, root, class)?;
        }
    } else if route == Route::Library && result.is_ok() {
        let profiled = st.profile.enabled.then_some(slot);
        let any_root = st.library_for_every_root().then_some(st.size);
        let call = fast::Call {
            buf,
            count,
            datatype,
            root,
        };
        fast::remember(user_comm, st.comm, call, profiled, layout.bytes, any_root);
    }
    result
}

/// End the trial of (root, size class): every rank contributes its median time of each route,
/// the slowest rank's decide (one `MPI_Allreduce`), so all ranks settle on the same route.
fn decide(st: &mut CommState, root: u32, class: u8) -> Result<()> {
    let mine = st.selection(root, class).medians();
    let mut worst = [0.0f64; 2];
    // Collective on our duplicate, reached by every rank at the same call.
    crate::exec::raw::allreduce_max(&mine, &mut worst, st.comm)?;
    let sel = st.selection(root, class);
    let calls = sel.trial_calls();
    let arms = sel.arms();
    let Some(chosen) = sel.decide(worst) else {
        return Ok(()); // within noise: another stage of the trial
    };
    let settled = sel.settled().is_some();
    if arms[0] != Arm::Library {
        st.settle_segments(root, class, chosen);
    }
    if st.rank == 0 {
        let (lo, hi) = crate::profile::report::class_bytes(class);
        log::info!(
            "treecast: root {root}, {lo} .. {hi} B: {}{} (medians over {calls} calls of each, slowest rank: {} {:.2} us, {} {:.2} us)",
            chosen.name(),
            if settled { "" } else { ", now on trial against the library" },
            arms[0].name(),
            worst[0] * 1e6,
            arms[1].name(),
            worst[1] * 1e6
        );
    }
    Ok(())
}

/// The library's own broadcast on our duplicate communicator (errors returned, not fatal).
/// Inlined on the fast path; the error's message is formatted out of line.
#[inline(always)]
unsafe fn library_bcast(comm: MPI_Comm, buf: *mut c_void, count: u64, datatype: MPI_Datatype, root: u32) -> Result<()> {
    let rc = crate::exec::raw::bcast_user(buf, count as std::os::raw::c_int, datatype, root as i32, comm);
    if rc == mpi::ffi::MPI_SUCCESS as std::os::raw::c_int {
        Ok(())
    } else {
        library_failed(rc)
    }
}

/// The error of a library broadcast that returned `rc` (not `MPI_SUCCESS`). Public for front
/// ends that issue the fast path's `PMPI_Bcast` themselves ([`fast_library_comm`]).
#[cold]
#[inline(never)]
pub fn library_failed(rc: std::os::raw::c_int) -> Result<()> {
    crate::exec::raw::check(rc, "MPI_Bcast")
}

/// The fast path of repeated calls on the library route: the same communicator, datatype,
/// count and root as the last call of that count's class remembered, whose route was settled
/// on the library. It
/// skips the attribute lookup, the lock and the datatype queries — what a broadcast of a few
/// bytes cannot afford next to the library's 0.1-0.3 us.
///
/// Safe to trust only while nothing it remembers can have changed: the communicator's state
/// still exists (any state's deletion forgets the entry: [`last_call::forget`]), the
/// datatype is a predefined one (never freed, so its handle cannot be reused for another
/// layout), and the buffer is not NULL.
///
/// On a profiled communicator the entry also remembers the state and the message size: a
/// repeated call then locks the state and is counted (and, when sampled, timed) exactly as on
/// the full path, but skips the attribute lookup, the datatype queries and the route lookup
/// (profiling an 8 B broadcast through the interposer cost +100% while only unprofiled calls
/// had a fast path). A call due for an `MPI_Bcast` comparison takes the full path.
///
/// Entries for the process, one per power-of-two class of the count (`last_call`), each read
/// and written under a sequence lock, not thread-locals: a thread-local in a library loaded
/// with `LD_PRELOAD` costs a `__tls_get_addr` call per access (10 ns of a 100 ns broadcast).
/// Threads broadcasting concurrently on different communicators only displace each other's
/// entries (their calls take the full path), never use a wrong one: an entry's meaning does
/// not depend on the thread.
mod fast {
    use super::last_call::{self, lookup};
    use super::*;

    /// The call's result when it takes the fast path, else `None`.
    ///
    /// # Safety
    /// As for [`super::bcast`].
    #[inline]
    pub unsafe fn try_library(
        comm: MPI_Comm,
        buf: *mut c_void,
        count: i64,
        datatype: MPI_Datatype,
        root: i32,
        site: CallSite,
    ) -> Option<Result<()>> {
        if !(0..=i32::MAX as i64).contains(&count) {
            return None;
        }
        let hit = lookup::<true>(comm, buf, count as c_int, datatype, root)?;
        if hit.profiled() {
            return profiled(&hit, buf, count, datatype, root, site);
        }
        Some(library_bcast(hit.dup, buf, count as u64, datatype, root as u32))
    }

    /// The fast path on a profiled communicator: counted and sampled as on the full path. A
    /// root the entry did not name (where any root takes the library's route) gets its route
    /// recorded as the full path would, so the profile lists every root's.
    ///
    /// # Safety
    /// `hit.slot` is the address of a live state (checked through the epoch by the caller).
    #[inline(never)]
    unsafe fn profiled(
        hit: &last_call::Hit,
        buf: *mut c_void,
        count: i64,
        datatype: MPI_Datatype,
        root: i32,
        site: CallSite,
    ) -> Option<Result<()>> {
        let (dup, bytes) = (hit.dup, hit.bytes);
        let slot = &*(hit.slot as *const state::Slot);
        let mut st = slot.lock().unwrap_or_else(|p| p.into_inner());
        let call = st.calls;
        if profile::compare_due(&st.profile, call) {
            return None;
        }
        if hit.other_root {
            st.selection(root as u32, size_class(bytes));
        }
        st.calls += 1;
        let pending = profile::begin(&mut st.profile, site, root as u32, bytes, call);
        let result = library_bcast(dup, buf, count as u64, datatype, root as u32);
        if let Some(p) = pending {
            profile::end(&mut st.profile, p, result.is_ok());
        }
        Some(result)
    }

    /// A call's arguments, as [`remember`] keeps them.
    pub struct Call {
        pub buf: *mut c_void,
        pub count: u64,
        pub datatype: MPI_Datatype,
        pub root: u32,
    }

    /// Remember a call that ran on the settled library route (see the module docs for when);
    /// `profiled`: the communicator's state when it is profiled; `bytes`: the message size;
    /// `any_root`: the communicator's size when every root takes the library's route
    /// (`CommState::library_for_every_root`), so a repeat from another root in range is served
    /// too.
    ///
    /// # Safety
    /// `call.datatype` must be a valid handle.
    pub unsafe fn remember(
        comm: MPI_Comm,
        dup: MPI_Comm,
        call: Call,
        profiled: Option<&'static state::Slot>,
        bytes: u64,
        any_root: Option<u32>,
    ) {
        if call.buf.is_null() || call.count > i32::MAX as u64 || !predefined(call.datatype) {
            return;
        }
        last_call::store(
            last_call::Remembered {
                comm,
                dup,
                datatype: call.datatype,
                count: call.count as c_int,
                root: call.root as c_int,
                any_root_below: any_root.unwrap_or(0),
            },
            profiled.map_or(0, |s| s as *const state::Slot as usize),
            bytes,
        );
    }

    /// A predefined (named) datatype: one that is never freed.
    unsafe fn predefined(datatype: MPI_Datatype) -> bool {
        crate::exec::raw::is_named(datatype)
    }
}

/// The call's result if it repeats a remembered call on a settled library route (see
/// `fast`), else `None` (take the full path). Front ends may try it before their own checks: a
/// remembered call was a valid one on a live intra-communicator with a root in range.
///
/// # Safety
/// As for [`bcast`].
#[inline]
pub unsafe fn try_fast(
    comm: MPI_Comm,
    buf: *mut c_void,
    count: i64,
    datatype: MPI_Datatype,
    root: i32,
    site: CallSite,
) -> Option<Result<()>> {
    fast::try_library(comm, buf, count, datatype, root, site)
}

/// The private duplicate to pass to `PMPI_Bcast` when this call repeats a remembered
/// one on a settled library route and its communicator is not profiled, else `None` (take
/// [`try_fast`] or the full path). For an entry point that must cost no more than a call
/// through one more function: the interposer's `MPI_Bcast` calls `PMPI_Bcast` itself with no
/// `Result` in between (a failure then goes through [`library_failed`]).
///
/// # Safety
/// As for [`bcast`].
#[inline(always)]
pub unsafe fn fast_library_comm(
    comm: MPI_Comm,
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    root: c_int,
) -> Option<MPI_Comm> {
    last_call::lookup::<false>(comm, buf, count, datatype, root)
        .filter(|h| !h.profiled())
        .map(|h| h.dup)
}

/// Every rank sees the same invalid root: all return at once, nobody communicates.
pub(crate) fn check_root(root: i32, size: i32) -> Result<()> {
    if root < 0 || root >= size {
        return Err(Error::new(
            ErrorKind::Root,
            format!("root {root} is out of range for a communicator of {size} ranks"),
        ));
    }
    Ok(())
}

fn ctx(st: &CommState, seq: u64) -> CallCtx {
    CallCtx {
        comm: st.comm,
        me: st.rank,
        seq,
        codec: st.codec,
        timeout_s: st.config.timeout_s,
    }
}

/// Validate this rank's own arguments.
unsafe fn local_layout(buf: *mut c_void, count: i64, datatype: MPI_Datatype, null_is_bottom: bool) -> Result<Layout> {
    if count < 0 {
        return Err(Error::new(ErrorKind::Count, format!("count {count} is negative")));
    }
    let layout = layout::describe(count as u64, datatype)?;
    // A non-contiguous layout is packed with MPI_Pack, which resolves MPI_BOTTOM + the type's
    // (absolute) displacements itself; a contiguous one would be read at address 0.
    let bottom_ok = null_is_bottom && !layout.contiguous;
    if buf.is_null() && layout.bytes > 0 && !bottom_ok {
        return Err(Error::new(ErrorKind::Buffer, "buffer is NULL but count is not zero"));
    }
    Ok(layout)
}

/// A rank whose own arguments are unusable still runs its part of the root's plan, sending
/// poison, so no rank waits forever for it.
fn participate_without_data(st: &mut CommState, ctx: &CallCtx, root: u32) -> Result<()> {
    if ctx.me == root {
        let plan = st.planner.poison_plan(ctx.me, root);
        return engine::run_probed(ctx, &plan, POISON_CLASS);
    }
    let class = engine::wait_for_class(ctx)?;
    let plan = if class == POISON_CLASS {
        std::sync::Arc::new(st.planner.poison_plan(ctx.me, root))
    } else {
        st.plan(root, class)
    };
    engine::run_probed(ctx, &plan, class)
}

/// Broadcast by treecast's plan for the call's (root, size class), or by `plan` (the unsegmented
/// plan on trial), under the next sequence number.
unsafe fn run(
    st: &mut CommState,
    buf: *mut c_void,
    count: u64,
    datatype: MPI_Datatype,
    layout: &Layout,
    root: u32,
    plan: Option<std::sync::Arc<crate::exec::LocalPlan>>,
) -> Result<()> {
    let seq = next_seq(st);
    let class = size_class(layout.bytes);
    if st.size <= 1 {
        return Ok(());
    }
    let plan = plan.unwrap_or_else(|| st.plan(root, class));
    let ctx = ctx(st, seq);
    let is_root = st.rank == root;
    // Non-contiguous data travels packed; receivers unpack only intact data.
    let mut packed: Option<Vec<u8>> = None;
    let bytes_ptr: *mut u8 = if layout.contiguous {
        buf as *mut u8
    } else {
        let mut scratch = layout::scratch(layout.bytes)?;
        if is_root {
            layout::pack(buf, count, datatype, layout, &mut scratch, st.comm)?;
        }
        packed.insert(scratch).as_mut_ptr()
    };
    let outcome = engine::run_posted(&ctx, &plan, class, bytes_ptr, layout.bytes, &mut st.scratch)?;
    match outcome {
        Outcome::Done => {
            if let (Some(p), false) = (&packed, is_root) {
                layout::unpack(p, buf, count, datatype, layout, st.comm)?;
            }
            Ok(())
        }
        Outcome::Poisoned(e) => Err(e),
        Outcome::OtherClass(c) => {
            let their = if c == POISON_CLASS {
                std::sync::Arc::new(st.planner.poison_plan(ctx.me, root))
            } else {
                st.plan(root, c)
            };
            engine::run_probed(&ctx, &their, c)?;
            Err(if c == POISON_CLASS {
                Error::new(
                    ErrorKind::Upstream,
                    format!(
                        "rank {}: the root (rank {root}) failed, so this rank's data is not valid",
                        ctx.me
                    ),
                )
            } else {
                Error::new(
                    ErrorKind::Truncate,
                    format!(
                        "rank {}: the root broadcasts a message of size class {c} (2^{} .. 2^{} bytes) but this rank's \
                         buffer holds {} bytes: count or datatype differs from the root's",
                        ctx.me,
                        c - 1,
                        c,
                        layout.bytes
                    ),
                )
            })
        }
    }
}
