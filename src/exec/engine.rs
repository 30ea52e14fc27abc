//! Runs one rank's part of a [`Plan`] with non-blocking point-to-point calls.
//!
//! Normal mode ([`run_posted`]): receives are posted up front into their places in the byte
//! buffer; sends are issued strictly in plan order, each as soon as its segments have arrived,
//! so segmented plans pipeline. Completion is polled with `MPI_Testsome`, which lets the loop
//! notice trouble instead of blocking forever:
//!
//! - a receive near the end of the buffer never lands there directly: Open MPI 4.1's rendezvous
//!   paths (vader single copy from 4 KiB, tcp from 64 KiB) write a too-long message in full past
//!   a truncated receive, so a receive posted there would overwrite the caller's memory after its
//!   buffer (see [`spill_bound`]). Small ones are posted into a staging area big enough for any
//!   matching message and copied into place when the size is right (keeping the pre-posted
//!   eager path for latency); large ones are taken with a matched probe (`MPI_Improbe`, then
//!   `MPI_Imrecv` into the buffer if the size is right, into throw-away memory otherwise), which
//!   costs no memory and nothing beyond the rendezvous handshake they pay anyway;
//!
//! - a receive that fails or delivers a byte count other than expected (the sender's message
//!   size differs, or the sender is passing on a failure) poisons this rank: the plan still runs
//!   to the end so nobody waits forever, but every later send carries zero bytes, which tells
//!   the receiver in turn that its data is bad;
//! - after a millisecond without progress the loop probes for a message of this call tagged with
//!   another size class: the root's message size differs from ours, so we cancel our receives
//!   and join the root's plan in error mode ([`run_probed`]), draining what is sent to us and
//!   passing poison on.
//!
//! Error mode receives by probing (sizes unknown) into scratch memory, never into the user's
//! buffer, and sends only zero-byte poison. Together these guarantee that a rank with a bad
//! buffer or count gets an error, ranks downstream of it in the plan get an error, and no rank
//! hangs — as long as every rank calls with the same root.

use super::raw::{self, check};
use super::tags::TagCodec;
use super::LocalPlan;
use crate::error::{Error, ErrorKind, Result};
use crate::plan::{range_bounds, Op, SegRange};
use mpi::ffi::{self, MPI_Comm, MPI_Request, MPI_Status};
use std::os::raw::c_int;

/// One call's identity on one rank.
pub struct CallCtx {
    /// The private duplicate communicator.
    pub comm: MPI_Comm,
    pub me: u32,
    pub seq: u64,
    pub codec: TagCodec,
    /// Give up after this long without progress (None: wait forever).
    pub timeout_s: Option<f64>,
}

/// How a call ended for this rank (MPI failures are returned as `Err` instead).
#[derive(Debug)]
pub enum Outcome {
    /// All data arrived intact and was forwarded.
    Done,
    /// The plan ran to completion but this rank's data is not valid; dependants got poison.
    Poisoned(Error),
    /// A message of this call tagged with another size class is waiting: the root's message
    /// size differs from this rank's. Nothing was sent; posted receives were cancelled.
    OtherClass(u8),
}

/// Idle time before probing for messages of another size class.
const PROBE_AFTER_S: f64 = 1e-3;
/// Interval between such probes.
const PROBE_EVERY_S: f64 = 2e-4;

static POISON_BYTE: u8 = 0;

/// Tracks time without progress: cheap (reads the clock every 128 idle polls).
struct Idle {
    spins: u32,
    since: f64,
    last_probe: f64,
}

impl Idle {
    fn new() -> Idle {
        Idle {
            spins: 0,
            since: f64::NAN,
            last_probe: 0.0,
        }
    }
    fn progress(&mut self) {
        self.spins = 0;
        self.since = f64::NAN;
    }
    /// Returns the idle duration when it is time to look around, else None.
    fn tick(&mut self) -> Option<f64> {
        self.spins += 1;
        if !self.spins.is_multiple_of(128) {
            return None;
        }
        let now = raw::wtime();
        if self.since.is_nan() {
            self.since = now;
            return None;
        }
        Some(now - self.since)
    }
    fn probe_due(&mut self, idle: f64) -> bool {
        if idle < PROBE_AFTER_S {
            return false;
        }
        let now = raw::wtime();
        if now - self.last_probe >= PROBE_EVERY_S {
            self.last_probe = now;
            true
        } else {
            false
        }
    }
}

fn timeout_error(ctx: &CallCtx, idle: f64, waiting_for: &[u32]) -> Error {
    Error::new(
        ErrorKind::Other,
        format!(
            "rank {}: no progress for {:.1} s (TREECAST_TIMEOUT) waiting for data from rank(s) {:?}",
            ctx.me, idle, waiting_for
        ),
    )
}

/// Buffers reused across calls so the hot path does not allocate (kept per communicator).
#[derive(Default)]
pub struct Scratch {
    ready: Vec<bool>,
    rreq: Vec<MPI_Request>,
    rinfo: Vec<(u32, SegRange, u64)>,
    sreq: Vec<MPI_Request>,
    idx: Vec<c_int>,
    sts: Vec<MPI_Status>,
    /// Receives taken by matched probe, in plan order (indices into `rreq`/`rinfo`).
    deferred: Vec<usize>,
    /// Peers with a deferred receive (later receives from them must wait: message order).
    deferred_peers: Vec<u32>,
    /// Peers whose next message has not arrived yet, within one pass of `take_deferred`.
    blocked: Vec<u32>,
    /// Throw-away memory for messages whose size is wrong (error path only).
    spill: Vec<Vec<u8>>,
    /// Per receive: offset of its staging area in `stage`, or `NOT_STAGED`.
    stage_off: Vec<usize>,
    /// Staging memory for small receives near the end of the buffer.
    stage: Vec<u8>,
}

const NOT_STAGED: usize = usize::MAX;

/// Largest receive that is staged rather than taken by matched probe: Open MPI's shared-memory
/// eager limit (vader, 4 KiB). Eager messages are fastest into a pre-posted receive (a probed one
/// is first copied aside as unexpected), and copying at most 4 KiB out of staging is cheap; larger
/// ones go by rendezvous, where the probe rides on the handshake and the data moves straight into
/// the buffer, while staging would add a copy of the whole receive.
const STAGE_MAX_BYTES: u64 = 4 * 1024;

impl Scratch {
    /// Drop capacity beyond what small plans need, so one huge pipelined call does not pin
    /// memory for the rest of the job.
    fn trim(&mut self) {
        const KEEP: usize = 1024;
        self.spill.clear();
        if self.rreq.capacity() > KEEP
            || self.sreq.capacity() > KEEP
            || self.ready.capacity() > KEEP
            || self.stage.capacity() > 4 * spill_bound(STAGE_MAX_BYTES) as usize
        {
            *self = Scratch::default();
        }
    }
}

/// Run this rank's part of `plan` (size class `class`) on the contiguous byte buffer
/// `buf[..len]`.
///
/// # Safety
/// `buf` must be valid for reads and writes of `len` bytes for the duration of the call.
pub unsafe fn run_posted(
    ctx: &CallCtx,
    plan: &LocalPlan,
    class: u8,
    buf: *mut u8,
    len: u64,
    scratch: &mut Scratch,
) -> Result<Outcome> {
    let r = run_posted_inner(ctx, plan, class, buf, len, scratch);
    scratch.trim();
    r
}

unsafe fn run_posted_inner(
    ctx: &CallCtx,
    plan: &LocalPlan,
    class: u8,
    buf: *mut u8,
    len: u64,
    sc: &mut Scratch,
) -> Result<Outcome> {
    let ops = &plan.ops;
    let tag = ctx.codec.tag(ctx.seq, class);
    let nsegs = plan.nsegs;
    let is_root = ctx.me == plan.root;
    sc.ready.clear();
    sc.ready.resize(nsegs as usize, is_root);
    sc.rreq.clear();
    sc.rinfo.clear();
    sc.sreq.clear();
    sc.deferred.clear();
    sc.deferred_peers.clear();
    sc.spill.clear();
    sc.stage_off.clear();

    // Receives whose worst-case spill would leave the buffer ("exposed"): small ones get a
    // staging area (sized in a first pass, so `stage` never moves once receives are posted).
    let exposed = |lo: u64, hi: u64| lo.saturating_add(spill_bound(hi - lo)) > len;
    let mut stage_len = 0usize;
    for op in ops {
        if let Op::Recv { segs, .. } = *op {
            let (lo, hi) = range_bounds(len, nsegs, segs);
            if exposed(lo, hi) && hi - lo <= STAGE_MAX_BYTES {
                stage_len += spill_bound(hi - lo) as usize;
            }
        }
    }
    if sc.stage.len() < stage_len {
        sc.stage.resize(stage_len, 0);
    }

    // Post every receive that is safe where it is, and the staged ones. Large exposed ones, and
    // every later receive from the same peer (messages from one peer match receives in posting
    // order), are deferred to a matched probe in the loop below.
    let mut stage_next = 0usize;
    for op in ops {
        if let Op::Recv { peer, segs } = *op {
            let (lo, hi) = range_bounds(len, nsegs, segs);
            let mut off = NOT_STAGED;
            let defer = sc.deferred_peers.contains(&peer) || (exposed(lo, hi) && hi - lo > STAGE_MAX_BYTES);
            if defer {
                if !sc.deferred_peers.contains(&peer) {
                    sc.deferred_peers.push(peer);
                }
                sc.deferred.push(sc.rreq.len());
                sc.rreq.push(raw::null_request());
            } else {
                let (dst, cap) = if exposed(lo, hi) {
                    off = stage_next;
                    stage_next += spill_bound(hi - lo) as usize;
                    (sc.stage.as_mut_ptr().add(off), spill_bound(hi - lo))
                } else {
                    (buf.add(lo as usize), hi - lo)
                };
                match raw::irecv_bytes(dst, cap, peer as i32, tag, ctx.comm) {
                    Ok(r) => sc.rreq.push(r),
                    Err(e) => {
                        cancel_all(&mut sc.rreq);
                        return Err(e);
                    }
                }
            }
            sc.rinfo.push((peer, segs, hi - lo));
            sc.stage_off.push(off);
        }
    }
    let mut next_op = 0usize;
    let mut poison: Option<Error> = None;

    // Issue every send whose data is present, in plan order (receives are skipped: posted).
    let issue = |next_op: &mut usize, sreq: &mut Vec<MPI_Request>, ready: &[bool], poison: &Option<Error>| {
        while *next_op < ops.len() {
            let (peer, segs) = match ops[*next_op] {
                Op::Recv { .. } => {
                    *next_op += 1;
                    continue;
                }
                Op::Send { peer, segs } => (peer, segs),
            };
            if !segs.range().all(|s| ready[s as usize]) {
                break;
            }
            let req = if poison.is_some() {
                raw::isend_bytes(&POISON_BYTE, 0, peer as i32, tag, ctx.comm)?
            } else {
                let (lo, hi) = range_bounds(len, nsegs, segs);
                raw::isend_bytes(buf.add(lo as usize), hi - lo, peer as i32, tag, ctx.comm)?
            };
            sreq.push(req);
            *next_op += 1;
        }
        Ok::<(), Error>(())
    };
    issue(&mut next_op, &mut sc.sreq, &sc.ready, &poison)?;

    let nrecv = sc.rreq.len();
    let mut pending = nrecv;
    sc.idx.clear();
    sc.idx.resize(nrecv, 0);
    sc.sts.clear();
    sc.sts.resize_with(nrecv, raw::empty_status);
    let mut idle = Idle::new();
    while pending > 0 {
        if !sc.deferred.is_empty() {
            match take_deferred(ctx, tag, buf, len, nsegs, sc) {
                Ok(true) => idle.progress(),
                Ok(false) => {}
                Err(e) => {
                    cancel_all(&mut sc.rreq);
                    release_all(&mut sc.sreq);
                    return Err(e);
                }
            }
        }
        for st in sc.sts.iter_mut() {
            st.MPI_ERROR = ffi::MPI_SUCCESS as c_int;
        }
        let (rc, outcount) = raw::test_some(&mut sc.rreq, &mut sc.idx, &mut sc.sts);
        if rc != ffi::MPI_SUCCESS as c_int && rc != ffi::MPI_ERR_IN_STATUS as c_int {
            cancel_all(&mut sc.rreq);
            return Err(check(rc, "MPI_Testsome").unwrap_err());
        }
        if outcount > 0 && outcount != ffi::MPI_UNDEFINED {
            for k in 0..outcount as usize {
                let i = sc.idx[k] as usize;
                let (peer, segs, expected) = sc.rinfo[i];
                let bad = check_arrival(ctx, &sc.sts[k], peer, expected);
                if bad.is_none() && sc.stage_off[i] != NOT_STAGED {
                    let lo = range_bounds(len, nsegs, segs).0 as usize;
                    std::ptr::copy_nonoverlapping(
                        sc.stage.as_ptr().add(sc.stage_off[i]),
                        buf.add(lo),
                        expected as usize,
                    );
                }
                if poison.is_none() {
                    poison = bad;
                }
                for s in segs.range() {
                    sc.ready[s as usize] = true;
                }
                pending -= 1;
            }
            issue(&mut next_op, &mut sc.sreq, &sc.ready, &poison)?;
            idle.progress();
            continue;
        }
        if let Some(idle_s) = idle.tick() {
            if idle.probe_due(idle_s) {
                if let Some(other) = probe_other_class(ctx, class)? {
                    if sc.sreq.is_empty() {
                        cancel_all(&mut sc.rreq);
                        return Ok(Outcome::OtherClass(other));
                    }
                }
            }
            if let Some(t) = ctx.timeout_s {
                if idle_s > t {
                    let waiting: Vec<u32> = (0..nrecv)
                        .filter(|&i| sc.rreq[i] != raw::null_request() || sc.deferred.contains(&i))
                        .map(|i| sc.rinfo[i].0)
                        .collect();
                    cancel_all(&mut sc.rreq);
                    release_all(&mut sc.sreq);
                    return Err(timeout_error(ctx, idle_s, &waiting));
                }
            }
        }
    }
    debug_assert_eq!(next_op, ops.len(), "validated plans issue every send");
    raw::wait_all(&mut sc.sreq)?;
    Ok(match poison {
        None => Outcome::Done,
        Some(e) => Outcome::Poisoned(e),
    })
}

/// Most bytes a matching message can carry for a receive of `expected` bytes. A message only
/// matches if its tag carries our size class, so its sender's buffer is below `2^c <= 2 *` ours;
/// that sender's share of the same segment range, with both rounded to whole bytes, is then at
/// most `2 * expected + 2` bytes. A receive posted at `lo` is safe from Open MPI's truncation
/// overrun when `lo + spill_bound(expected) <= len`: it may scribble on later segments of this
/// (already failing) rank's buffer, never past it.
fn spill_bound(expected: u64) -> u64 {
    expected.saturating_mul(2).saturating_add(2)
}

/// Take the next message of each peer with a deferred receive, if it has arrived: into the
/// buffer when its size is the expected one, into throw-away memory otherwise (the status then
/// shows the wrong size and `check_arrival` reports it). Returns whether anything was taken.
///
/// # Safety
/// As [`run_posted`]: `buf[..len]` valid; `sc.rinfo`/`sc.rreq` set up by `run_posted_inner`.
unsafe fn take_deferred(ctx: &CallCtx, tag: i32, buf: *mut u8, len: u64, nsegs: u32, sc: &mut Scratch) -> Result<bool> {
    let mut took = false;
    // A peer's first deferred receive is the only one its next message can be for.
    sc.blocked.clear();
    let mut k = 0;
    while k < sc.deferred.len() {
        let i = sc.deferred[k];
        let (peer, segs, expected) = sc.rinfo[i];
        if sc.blocked.contains(&peer) {
            k += 1;
            continue;
        }
        let Some((mut msg, n)) = improbe(ctx, peer, tag)? else {
            sc.blocked.push(peer);
            k += 1;
            continue;
        };
        let dst = if n == expected {
            buf.add(range_bounds(len, nsegs, segs).0 as usize)
        } else {
            sc.spill.push(vec![0u8; n.max(1) as usize]);
            sc.spill.last_mut().expect("just pushed").as_mut_ptr()
        };
        let (count, dt) = raw::byte_message_type(n)?;
        check(
            ffi::PMPI_Imrecv(dst as *mut _, count, dt.handle(), &mut msg, &mut sc.rreq[i]),
            "MPI_Imrecv",
        )?;
        sc.deferred.remove(k);
        took = true;
    }
    Ok(took)
}

/// Check a completed receive: an MPI error (e.g. truncation) or a byte count other than
/// expected means this rank's data is bad.
fn check_arrival(ctx: &CallCtx, st: &MPI_Status, peer: u32, expected: u64) -> Option<Error> {
    if st.MPI_ERROR != ffi::MPI_SUCCESS as c_int {
        let mut class: c_int = 0;
        // SAFETY: plain query.
        unsafe { ffi::PMPI_Error_class(st.MPI_ERROR, &mut class) };
        if class == ffi::MPI_ERR_TRUNCATE as c_int {
            return Some(Error::new(
                ErrorKind::Truncate,
                format!(
                    "rank {}: the data from rank {peer} does not fit this rank's buffer (expected {expected} bytes \
                     in this segment): count or datatype differs from the root's",
                    ctx.me
                ),
            ));
        }
        return Some(Error::new(
            ErrorKind::Mpi(st.MPI_ERROR),
            format!(
                "rank {}: receive from rank {peer} failed: {}",
                ctx.me,
                raw::error_string(st.MPI_ERROR)
            ),
        ));
    }
    match raw::status_bytes(st) {
        Ok(n) if n == expected => None,
        // Zero bytes where data was due: the sender passes on a failure (poison). In an empty
        // broadcast (class 0) zero bytes are the message itself.
        Ok(0) => Some(upstream_error(ctx.me, peer)),
        Ok(n) => Some(Error::new(
            ErrorKind::Truncate,
            format!(
                "rank {}: rank {peer} sent {n} bytes where this rank expected {expected}: count or datatype \
                 differs from the root's",
                ctx.me
            ),
        )),
        Err(e) => Some(e),
    }
}

fn upstream_error(me: u32, peer: u32) -> Error {
    Error::new(
        ErrorKind::Upstream,
        format!("rank {me}: rank {peer} (upstream in the broadcast plan) failed, so this rank's data is not valid"),
    )
}

/// Look for a message of this call tagged with a size class other than `mine`.
fn probe_other_class(ctx: &CallCtx, mine: u8) -> Result<Option<u8>> {
    for c in 0..super::tags::CLASSES as u8 {
        if c != mine && raw::iprobe(raw::any_source(), ctx.codec.tag(ctx.seq, c), ctx.comm)?.is_some() {
            return Ok(Some(c));
        }
    }
    Ok(None)
}

/// Wait until some message of this call arrives (any class) and return its class. Used by a
/// rank that cannot take part normally (its own arguments are bad) to learn the root's plan.
pub fn wait_for_class(ctx: &CallCtx) -> Result<u8> {
    let mut idle = Idle::new();
    loop {
        for c in 0..super::tags::CLASSES as u8 {
            if raw::iprobe(raw::any_source(), ctx.codec.tag(ctx.seq, c), ctx.comm)?.is_some() {
                return Ok(c);
            }
        }
        if let (Some(idle_s), Some(t)) = (idle.tick(), ctx.timeout_s) {
            if idle_s > t {
                return Err(timeout_error(ctx, idle_s, &[]));
            }
        }
    }
}

/// Error mode: take part in `plan` (the root's plan for `class`) without valid data. Messages
/// to this rank are received by probing into scratch memory and discarded; every send carries
/// zero bytes (poison). Returns when this rank's part of the plan is complete.
pub fn run_probed(ctx: &CallCtx, plan: &LocalPlan, class: u8) -> Result<()> {
    let ops = &plan.ops;
    let tag = ctx.codec.tag(ctx.seq, class);
    let mut ready = vec![ctx.me == plan.root; plan.nsegs as usize];
    let recvs: Vec<(u32, SegRange)> = ops
        .iter()
        .filter_map(|op| match *op {
            Op::Recv { peer, segs } => Some((peer, segs)),
            _ => None,
        })
        .collect();
    let sends: Vec<(u32, SegRange)> = ops
        .iter()
        .filter_map(|op| match *op {
            Op::Send { peer, segs } => Some((peer, segs)),
            _ => None,
        })
        .collect();
    let mut done = vec![false; recvs.len()];
    let mut remaining = recvs.len();
    let mut next_send = 0usize;
    let mut sreq: Vec<MPI_Request> = Vec::new();
    let mut idle = Idle::new();
    loop {
        while next_send < sends.len() && sends[next_send].1.range().all(|s| ready[s as usize]) {
            // SAFETY: POISON_BYTE is static; zero bytes are sent.
            sreq.push(unsafe { raw::isend_bytes(&POISON_BYTE, 0, sends[next_send].0 as i32, tag, ctx.comm)? });
            next_send += 1;
        }
        if remaining == 0 {
            break;
        }
        // The first pending receive of each peer may be matched (per-peer order is preserved).
        let mut progressed = false;
        let mut seen_peers: Vec<u32> = Vec::new();
        for (i, &(peer, segs)) in recvs.iter().enumerate() {
            if done[i] || seen_peers.contains(&peer) {
                continue;
            }
            seen_peers.push(peer);
            if drain_one(ctx, peer, tag)? {
                done[i] = true;
                remaining -= 1;
                for s in segs.range() {
                    ready[s as usize] = true;
                }
                progressed = true;
            }
        }
        if progressed {
            idle.progress();
        } else if let (Some(idle_s), Some(t)) = (idle.tick(), ctx.timeout_s) {
            if idle_s > t {
                release_all(&mut sreq);
                let waiting: Vec<u32> = recvs
                    .iter()
                    .zip(&done)
                    .filter(|(_, d)| !**d)
                    .map(|(r, _)| r.0)
                    .collect();
                return Err(timeout_error(ctx, idle_s, &waiting));
            }
        }
    }
    raw::wait_all(&mut sreq)
}

/// Matched probe: take the next message from `peer` with `tag` off the queue if one is waiting,
/// with its size in bytes. Only the returned handle can receive it, so no other receive can
/// match it in between (unlike `MPI_Iprobe` + `MPI_Irecv`).
fn improbe(ctx: &CallCtx, peer: u32, tag: i32) -> Result<Option<(ffi::MPI_Message, u64)>> {
    let mut flag = 0;
    // SAFETY: MPI_Message handle and status are ours to fill.
    unsafe {
        let mut msg: ffi::MPI_Message = ffi::RSMPI_MESSAGE_NULL;
        let mut st = raw::empty_status();
        check(
            ffi::PMPI_Improbe(peer as c_int, tag, ctx.comm, &mut flag, &mut msg, &mut st),
            "MPI_Improbe",
        )?;
        if flag == 0 {
            return Ok(None);
        }
        Ok(Some((msg, raw::status_bytes(&st)?)))
    }
}

/// Receive and discard one message from `peer` with `tag` if one is waiting.
fn drain_one(ctx: &CallCtx, peer: u32, tag: i32) -> Result<bool> {
    let Some((mut msg, n)) = improbe(ctx, peer, tag)? else {
        return Ok(false);
    };
    // SAFETY: the message handle is ours; scratch holds all `n` bytes.
    unsafe {
        // Never an empty Vec: its dangling pointer is 0x1, which is MPI_IN_PLACE in Open MPI.
        let mut scratch = vec![0u8; (n as usize).max(1)];
        let (count, dt) = raw::byte_message_type(n)?;
        let mut st2 = raw::empty_status();
        check(
            ffi::PMPI_Mrecv(scratch.as_mut_ptr() as *mut _, count, dt.handle(), &mut msg, &mut st2),
            "MPI_Mrecv",
        )?;
    }
    Ok(true)
}

/// Cancel every still-active receive (used when abandoning a plan).
fn cancel_all(reqs: &mut [MPI_Request]) {
    for r in reqs.iter_mut() {
        if *r != raw::null_request() {
            let _ = raw::cancel_recv(r);
        }
    }
}

/// Let pending sends finish in the background.
fn release_all(reqs: &mut [MPI_Request]) {
    for r in reqs.iter_mut() {
        if *r != raw::null_request() {
            // SAFETY: active request we own; MPI completes it without us.
            unsafe {
                ffi::PMPI_Request_free(r);
            }
        }
    }
}
