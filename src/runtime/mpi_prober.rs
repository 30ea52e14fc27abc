//! The MPI implementation of [`Prober`]: RTT and bandwidth measurements between host leaders.
//!
//! One leader per host takes part (hosts from `MPI_Comm_split_type(SHARED)`, numbered by lowest
//! rank); host h's leader has rank h in the leaders' communicator, and leader 0 (the
//! communicator's rank 0) is the coordinator that runs inference. Per round (the contract on
//! [`Prober`]):
//! 1. the coordinator broadcasts the round (kind, ping spec or byte count, pair list);
//! 2. each leader in a pair runs its side: `a` times round trips with [`ping_pair`] (or a bulk
//!    transfer), `b` answers until told to stop; leaders without a pair — and every non-leader
//!    rank, for the whole of probing — wait politely (`MPI_Test` + sleep), because on
//!    oversubscribed hosts busy-polling bystanders deschedule the measuring pair and turn 20 us
//!    RTTs into milliseconds (docs/design.md §5.3);
//! 3. results come back to the coordinator in a non-blocking gather.
//!
//! Far-apart parts ([`Prober::run_parts`]): the coordinator sends a part's leader a `Part` round
//! with the part's job; that leader becomes the coordinator of its part (the same protocol, its
//! own ledger), every leader answers whoever sent it a round, and the part's outcome goes back
//! to leader 0 (`TAG_PART`), which grafts. Parts run side by side on distinct machines, one
//! after another where hosts share a kernel.
//!
//! Sets follow a [`SetSchedule`]. Where hosts share a kernel (emulated hosts, see below) they
//! are interleaved in time: set 1 of every pair, then set 2 of every pair, each coordinated on
//! its own, because a descheduled pair stays descheduled for a while and back-to-back sets would
//! all fall into it. On distinct machines a pair measures its sets back to back after one
//! coordination: there every extra coordination crosses the job's whole network (milliseconds
//! over a wide-area link). Each window starts with one untimed round trip (the first message
//! of a pair opens its connection).
//!
//! Concurrency: real hosts have their own CPUs and measure whole rounds at once. Hosts emulated
//! on one machine (network namespaces, containers) share its cores, and concurrent pairs there
//! measure each other's scheduling instead of the network. Leaders therefore compare kernels
//! (`/proc/sys/kernel/random/boot_id`) first: when several hosts run on one kernel, at most
//! (its CPUs / 2) pairs measure at once. `TREECAST_PROBE_PAIRS=K` sets the limit explicitly.
//! When a sub-round has a single pair, its two leaders are pinned to two different CPUs while
//! they measure (restored afterwards): left to the scheduler they sometimes share a core and
//! every message then pays a context switch.

use super::config::Config;
use super::hosts::Hosts;
use crate::error::{Error, ErrorKind, Result};
use crate::exec::raw;
use crate::host::{kernel_info, KernelInfo};
use crate::infer::{self, InferOptions};
use crate::probe::{
    check_round, ping_pair_opened, PairMeasurement, PingSpec, ProbeError, ProbeLedger, ProbeStats, Prober, SetSchedule,
};
use crate::topology::Topology;
use mpi::ffi::{MPI_Comm, MPI_Request};
use serde::{Deserialize, Serialize};
use std::os::raw::c_int;

const TAG_PING: c_int = 1;
const TAG_PONG: c_int = 2;
const TAG_STOP: c_int = 3;
const TAG_BULK: c_int = 4;
const TAG_ACK: c_int = 5;
/// A leader's part of a round, coordinator -> leader.
const TAG_ROUND: c_int = 6;
/// An initiator's result, leader -> coordinator.
const TAG_RESULT: c_int = 7;
/// A far-apart part's outcome, part leader -> coordinator.
const TAG_PART: c_int = 8;
/// The handshake before a bulk transfer, both ways: not `TAG_PING`/`TAG_PONG`, whose stale
/// pongs (of round trips given up) it must never match.
const TAG_HELLO: c_int = 9;

/// Sequence number of the next ping this process sends, carried in its first 8 bytes and
/// echoed back: a pong of a round trip given up earlier (`PingSpec::give_up_s`) arrives later,
/// and a receive from that peer must tell it from the pong it waits for.
static PING_SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Late pongs still to come, per peer: one for every pong receive cancelled by a round trip
/// given up (the peer answers every ping it gets), one less for each skipped on arrival. They
/// are received before the leaders' communicator is freed ([`drain_late_pongs`]): MPICH refuses
/// to free a communicator with unmatched messages (the job aborts).
static LATE_PONGS: std::sync::Mutex<std::collections::BTreeMap<c_int, u32>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// Count a late pong from `peer` as coming (`+1`) or as arrived (`-1`).
fn late_pong(peer: c_int, coming: bool) {
    let mut late = LATE_PONGS.lock().unwrap_or_else(|e| e.into_inner());
    let n = late.entry(peer).or_insert(0);
    if coming {
        *n += 1;
    } else {
        *n = n.saturating_sub(1);
    }
    if *n == 0 {
        late.remove(&peer);
    }
}

/// Receive every late pong still to come (see [`LATE_PONGS`]), waiting politely. Each was sent
/// by a peer answering a ping before that peer saw the pinger's STOP, so none can be missing
/// unless probing failed.
fn drain_late_pongs(comm: MPI_Comm) -> Result<()> {
    let late = std::mem::take(&mut *LATE_PONGS.lock().unwrap_or_else(|e| e.into_inner()));
    for (peer, n) in late {
        for _ in 0..n {
            recv_message(comm, peer, TAG_PONG)?;
        }
    }
    Ok(())
}

/// Late pongs still to come (none after [`drain_late_pongs`]).
fn late_pongs_pending() -> bool {
    !LATE_PONGS.lock().unwrap_or_else(|e| e.into_inner()).is_empty()
}

/// Sleeps between polls while waiting politely: the first is short, each next one twice as
/// long, up to the longest. A rank waiting for its next turn wakes often only while its turn is
/// likely near.
///
/// Why not a fixed 50 us: on hosts emulated on two cores, seven bystanders waking every 50 us
/// (each wake-up an `MPI_Iprobe` and its progress engine, a few microseconds of CPU) took about a
/// third of the machine and preempted the measuring pair throughout: live probes read median
/// round trips of 45-115 us against a 20-40 us floor, the minimum of 30 round trips stayed 1-3 us
/// above it (the 3 us uplinks it must resolve), and the 3x3 demo cluster lost switches.
const POLITE_SLEEP_MIN: std::time::Duration = std::time::Duration::from_micros(20);
const POLITE_SLEEP_MAX: std::time::Duration = std::time::Duration::from_micros(1000);

/// Exponential back-off for one polite wait.
struct Backoff(std::time::Duration);

impl Backoff {
    fn new() -> Self {
        Backoff(POLITE_SLEEP_MIN)
    }
    fn sleep(&mut self) {
        std::thread::sleep(self.0);
        self.0 = (self.0 * 2).min(POLITE_SLEEP_MAX);
    }
}

/// What the coordinator asks one leader to do in one (sub-)round: `pair` is the leader's own,
/// `total` the number of pairs measuring at the same time.
#[derive(Serialize, Deserialize)]
enum Round {
    Ping {
        spec: PingSpec,
        pair: (u32, u32),
        total: u32,
    },
    Bandwidth {
        bytes: u64,
        pair: (u32, u32),
        total: u32,
    },
    /// Infer a far-apart part as its coordinator (`job` from inference; the prober's limits),
    /// then send the outcome back ([`PartReply`]).
    Part {
        job: Vec<u8>,
        max_pairs: u64,
        schedule: SetSchedule,
    },
    Done,
}

/// A part leader's answer: the part's encoded outcome, what its prober measured (stats and
/// distinct pairs, for the coordinator's ledger), or why the part failed.
type PartReply = std::result::Result<(Vec<u8>, ProbeStats, Vec<(usize, usize)>), String>;

impl Round {
    fn pair(&self) -> Option<(u32, u32)> {
        match self {
            Round::Ping { pair, .. } | Round::Bandwidth { pair, .. } => Some(*pair),
            Round::Part { .. } | Round::Done => None,
        }
    }
    fn total(&self) -> u32 {
        match self {
            Round::Ping { total, .. } | Round::Bandwidth { total, .. } => *total,
            Round::Part { .. } | Round::Done => 0,
        }
    }
}

fn other(e: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Other, e.to_string())
}

/// Wait for `req` without holding a CPU.
pub(super) fn wait_politely(req: &mut MPI_Request) -> Result<()> {
    let mut backoff = Backoff::new();
    wait_testing(req, || backoff.sleep())
}

/// Wait for `req` promptly, yielding the CPU between tests: a measuring rank must react at once,
/// but a peer sharing its core must still get to run.
pub(super) fn wait_yielding(req: &mut MPI_Request) -> Result<()> {
    // SAFETY: no preconditions.
    wait_testing(req, || unsafe {
        libc::sched_yield();
    })
}

/// Test `req` until it completes, calling `between` after each test that finds it pending.
fn wait_testing(req: &mut MPI_Request, mut between: impl FnMut()) -> Result<()> {
    while !raw::test(req)? {
        between();
    }
    Ok(())
}

/// Receive a whole message of unknown size from `src` with `tag`, waiting politely (a leader
/// between rounds, the coordinator for results: neither measures meanwhile).
fn recv_message(comm: MPI_Comm, src: c_int, tag: c_int) -> Result<Vec<u8>> {
    recv_message_from(comm, src, tag).map(|(bytes, _)| bytes)
}

/// [`recv_message`], also returning the sender (`src` may be any source).
fn recv_message_from(comm: MPI_Comm, src: c_int, tag: c_int) -> Result<(Vec<u8>, c_int)> {
    let mut backoff = Backoff::new();
    let st = loop {
        if let Some(st) = raw::iprobe(src, tag, comm)? {
            break st;
        }
        backoff.sleep();
    };
    let len = raw::status_bytes(&st)?;
    let from = st.MPI_SOURCE;
    let mut buf = vec![0u8; len.max(1) as usize];
    // SAFETY: `buf` holds `len` bytes and outlives the wait.
    unsafe {
        let mut req = raw::irecv_bytes(buf.as_mut_ptr(), len, from, tag, comm)?;
        wait_politely(&mut req)?;
    }
    buf.truncate(len as usize);
    Ok((buf, from))
}

/// The coordinator's message to each leader that takes part in a window, sent point to point
/// (non-blocking; `bufs` must outlive the returned requests).
fn send_parts(comm: MPI_Comm, parts: &[(u32, Vec<u8>)]) -> Result<Vec<MPI_Request>> {
    let mut reqs = Vec::with_capacity(parts.len());
    for (to, bytes) in parts {
        // SAFETY: the caller keeps `parts` alive until the requests complete.
        reqs.push(unsafe { raw::isend_bytes(bytes.as_ptr(), bytes.len() as u64, *to as c_int, TAG_ROUND, comm)? });
    }
    Ok(reqs)
}

/// Send `len` bytes of `buf` to `peer` and wait (yielding).
fn send(comm: MPI_Comm, peer: c_int, buf: &[u8], len: u64, tag: c_int) -> Result<()> {
    // SAFETY: `buf` holds at least `len` bytes and outlives the wait below.
    unsafe {
        let mut req = raw::isend_bytes(buf.as_ptr(), len, peer, tag, comm)?;
        wait_yielding(&mut req)
    }
}

/// Receive up to `buf.len()` bytes from `peer` with `tag` (any tag if `None`); returns the tag.
fn recv(comm: MPI_Comm, peer: c_int, buf: &mut [u8], tag: Option<c_int>) -> Result<c_int> {
    Ok(recv_until(comm, peer, buf, tag, f64::INFINITY)?.expect("no deadline"))
}

/// [`recv`], given up at `MPI_Wtime` `until`: the receive is cancelled and `None` returned
/// (unless a message matched meanwhile, which is then received; its tag is then reported as
/// the one asked for, so a finite `until` wants a specific `tag`).
fn recv_until(comm: MPI_Comm, peer: c_int, buf: &mut [u8], tag: Option<c_int>, until: f64) -> Result<Option<c_int>> {
    let tag = tag.unwrap_or_else(raw::any_tag);
    // SAFETY: `buf` outlives the wait below (completed or cancelled before we return).
    let mut req = unsafe { raw::irecv_bytes(buf.as_mut_ptr(), buf.len() as u64, peer, tag, comm)? };
    loop {
        if let Some(st) = raw::test_status(&mut req)? {
            return Ok(Some(st.MPI_TAG));
        }
        if raw::wtime() >= until {
            // Not cancelled: it matched between the test and the cancel, and is complete.
            return Ok((!raw::cancel_recv(&mut req)?).then_some(tag));
        }
        // SAFETY: no preconditions.
        unsafe {
            libc::sched_yield();
        }
    }
}

/// One small-message round trip to `peer` (seconds), given up after `give_up_s`: the receive
/// of the pong is cancelled and the time so far returned (at least `give_up_s`; the protocol
/// then ends the pair's measurement). Pongs of round trips given up earlier are recognised by
/// their sequence number and skipped. Messages under 8 bytes cannot carry one: their round
/// trips are never given up.
fn round_trip(comm: MPI_Comm, peer: c_int, buf: &mut [u8], give_up_s: f64) -> Result<f64> {
    let seq = PING_SEQ
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        .to_le_bytes();
    let k = buf.len().min(seq.len());
    buf[..k].copy_from_slice(&seq[..k]);
    let give_up_s = if k == seq.len() { give_up_s } else { f64::INFINITY };
    let t0 = raw::wtime();
    send(comm, peer, buf, buf.len() as u64, TAG_PING)?;
    loop {
        if recv_until(comm, peer, buf, Some(TAG_PONG), t0 + give_up_s)?.is_none() {
            late_pong(peer, true);
            return Ok(raw::wtime() - t0);
        }
        if buf[..k] == seq[..k] || k < seq.len() {
            return Ok(raw::wtime() - t0);
        }
        // A late pong of a round trip given up before: wait on for ours.
        late_pong(peer, false);
    }
}

/// Answer pings from `peer` until it sends STOP.
fn serve_pings(comm: MPI_Comm, peer: c_int, bytes: usize) -> Result<()> {
    let mut buf = vec![0u8; bytes];
    loop {
        match recv(comm, peer, &mut buf, None)? {
            TAG_STOP => return Ok(()),
            // The late pong of a round trip this leader gave up on as the pinger: no answer.
            TAG_PONG => late_pong(peer, false),
            _ => send(comm, peer, &buf, bytes as u64, TAG_PONG)?,
        }
    }
}

/// Leader `me`'s side of one round; returns its encoded result (empty unless it initiated).
fn run_round(comm: MPI_Comm, me: u32, round: &Round) -> Result<Vec<u8>> {
    let Some((a, b)) = round.pair().filter(|&(a, b)| a == me || b == me) else {
        return Ok(Vec::new());
    };
    let _pin = (round.total() == 1).then(|| super::pin::Pinned::new(usize::from(me == b)));
    match round {
        Round::Ping { spec, .. } => {
            let bytes = spec.message_bytes.max(1) as usize;
            if me != a {
                serve_pings(comm, a as c_int, bytes)?;
                return Ok(Vec::new());
            }
            let mut buf = vec![0u8; bytes];
            // The untimed opening round trip, then the protocol (`ping_pair_opened`).
            let (m, _) = ping_pair_opened(a as usize, b as usize, spec, |give_up| {
                round_trip(comm, b as c_int, &mut buf, give_up)
            })?;
            send(comm, b as c_int, &buf, 0, TAG_STOP)?;
            postcard::to_stdvec(&m).map_err(other)
        }
        Round::Bandwidth { bytes, .. } => {
            let mut buf = crate::exec::layout::scratch(*bytes)?;
            let mut ack = [0u8; 1];
            if me == a {
                // A handshake first: it opens the connection (lazily made by most transports)
                // and starts both sides together; then time bulk send + 1-byte acknowledgement.
                send(comm, b as c_int, &ack, 1, TAG_HELLO)?;
                recv(comm, b as c_int, &mut ack, Some(TAG_HELLO))?;
                let t0 = raw::wtime();
                send(comm, b as c_int, &buf, *bytes, TAG_BULK)?;
                recv(comm, b as c_int, &mut ack, Some(TAG_ACK))?;
                let rate = *bytes as f64 / (raw::wtime() - t0).max(1e-9);
                postcard::to_stdvec(&rate).map_err(other)
            } else {
                recv(comm, a as c_int, &mut ack, Some(TAG_HELLO))?;
                send(comm, a as c_int, &ack, 1, TAG_HELLO)?;
                recv(comm, a as c_int, &mut buf, Some(TAG_BULK))?;
                send(comm, a as c_int, &ack, 1, TAG_ACK)?;
                Ok(Vec::new())
            }
        }
        Round::Part { .. } | Round::Done => Ok(Vec::new()),
    }
}

/// Gather every leader's result to the coordinator (sizes, then bytes; waited for politely).
fn gather_results(comm: MPI_Comm, me: u32, n: u32, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
    // A variable, not a temporary: MPI reads it until the gather completes.
    let len = [mine.len() as c_int];
    let mut lens = vec![0 as c_int; if me == 0 { n as usize } else { 0 }];
    // SAFETY: collective on the leaders' communicator; every buffer outlives its wait.
    unsafe {
        let mut req = raw::igather(&len, &mut lens, 0, comm)?;
        wait_politely(&mut req)?;
        let mut displs = Vec::with_capacity(lens.len());
        let mut total: c_int = 0;
        for &l in &lens {
            displs.push(total);
            total += l;
        }
        let mut all = vec![0u8; total as usize + 1];
        let mut req = raw::igatherv(mine, &mut all, &lens, &displs, 0, comm)?;
        wait_politely(&mut req)?;
        Ok(lens
            .iter()
            .zip(&displs)
            .map(|(&l, &d)| all[d as usize..(d + l) as usize].to_vec())
            .collect())
    }
}

/// A coordinator's side, handed to inference as a [`Prober`]: leader 0's for the whole job, or
/// a far-apart part's leader's for its part ([`Prober::run_parts`]).
struct MpiProber<'a> {
    comm: MPI_Comm,
    n: u32,
    /// This coordinator's leader index.
    me: u32,
    names: &'a [String],
    max_pairs: usize,
    schedule: SetSchedule,
    /// Far-apart parts are led side by side, or one after another (see `parts_side_by_side`).
    side_by_side: bool,
    ledger: ProbeLedger,
}

/// Far-apart parts run side by side by default only where any number of pairs may measure at
/// once (distinct machines): where pairs are limited (hosts sharing a kernel's CPUs, or
/// `TREECAST_PROBE_PAIRS`), parts side by side would exceed the limit, so they run one after
/// another. `TREECAST_PROBE_PARTS` decides instead when set.
fn parts_side_by_side(max_pairs: usize, cfg: &Config) -> bool {
    cfg.probe_parts_side_by_side.unwrap_or(max_pairs == usize::MAX)
}

impl MpiProber<'_> {
    /// Run `pairs` in sub-rounds of at most `max_pairs`; `make(pair, total)` builds a leader's
    /// part of a sub-round of `total` pairs. Coordination is point to point: each leader of a
    /// pair gets its part from the coordinator, each initiator sends its result back, and
    /// leaders in no pair hear nothing (a broadcast and a gather over every leader would cross
    /// the whole network twice per round, over a binomial tree of hops). Returns the result
    /// blob of every initiator (indexed by leader).
    fn rounds(
        &mut self,
        pairs: &[(usize, usize)],
        make: impl Fn((u32, u32), u32) -> Round,
    ) -> std::result::Result<Vec<Vec<u8>>, ProbeError> {
        let mut blobs = vec![Vec::new(); self.n as usize];
        for chunk in pairs.chunks(self.max_pairs.max(1)) {
            let total = chunk.len() as u32;
            let r: Result<()> = (|| {
                let mut parts: Vec<(u32, Vec<u8>)> = Vec::with_capacity(2 * chunk.len());
                let mut own: Option<Round> = None;
                for &(a, b) in chunk {
                    let part = make((a as u32, b as u32), total);
                    let bytes = postcard::to_stdvec(&part).map_err(other)?;
                    for x in [a, b] {
                        if x as u32 != self.me {
                            parts.push((x as u32, bytes.clone()));
                        }
                    }
                    if a as u32 == self.me || b as u32 == self.me {
                        own = Some(part);
                    }
                }
                let mut reqs = send_parts(self.comm, &parts)?;
                let mine = match &own {
                    Some(part) => run_round(self.comm, self.me, part)?,
                    None => Vec::new(),
                };
                for &(a, _) in chunk {
                    blobs[a] = if a as u32 == self.me {
                        mine.clone()
                    } else {
                        recv_message(self.comm, a as c_int, TAG_RESULT)?
                    };
                }
                raw::wait_all(&mut reqs)
            })();
            r.map_err(|e| ProbeError::Transport(e.to_string()))?;
        }
        Ok(blobs)
    }

    /// End every other leader's serve loop.
    fn finish(&self) -> Result<()> {
        let done = postcard::to_stdvec(&Round::Done).map_err(other)?;
        let parts: Vec<(u32, Vec<u8>)> = (0..self.n)
            .filter(|&h| h != self.me)
            .map(|h| (h, done.clone()))
            .collect();
        let mut reqs = send_parts(self.comm, &parts)?;
        raw::wait_all(&mut reqs)
    }

    /// A prober for a far-apart part that this rank coordinates: same leaders and limits, its
    /// own ledger.
    fn for_part(&self, me: u32, max_pairs: usize, schedule: SetSchedule) -> MpiProber<'_> {
        MpiProber {
            comm: self.comm,
            n: self.n,
            me,
            names: self.names,
            max_pairs,
            schedule,
            side_by_side: self.side_by_side,
            ledger: ProbeLedger::new(self.n as usize),
        }
    }

    /// Run one part here, as its coordinator.
    fn own_part(&self, job: &[u8], work: crate::probe::PartWork) -> PartReply {
        let mut p = self.for_part(self.me, self.max_pairs, self.schedule);
        let out = work(&mut p, job).map_err(|e| e.to_string())?;
        Ok((out, p.ledger.stats().clone(), p.ledger.seen_pairs()))
    }

    /// Hand part jobs to their leaders (or run them here), side by side or one after another,
    /// and collect the replies in order; see [`Prober::run_parts`].
    fn parts(&mut self, leaders: &[usize], jobs: &[Vec<u8>], work: crate::probe::PartWork) -> Result<Vec<Vec<u8>>> {
        let t0 = raw::wtime();
        let encode = |job: &Vec<u8>| {
            postcard::to_stdvec(&Round::Part {
                job: job.clone(),
                max_pairs: self.max_pairs.min(u64::MAX as usize) as u64,
                schedule: self.schedule,
            })
            .map_err(other)
        };
        let fetch = |leader: usize| -> Result<PartReply> {
            let bytes = recv_message(self.comm, leader as c_int, TAG_PART)?;
            postcard::from_bytes(&bytes).map_err(|e| other(format!("unreadable part outcome from host {leader}: {e}")))
        };
        let mut replies: Vec<Option<PartReply>> = vec![None; jobs.len()];
        log::info!(
            "treecast: {} far-apart part job(s) led by hosts {leaders:?}, {}",
            jobs.len(),
            if self.side_by_side {
                "side by side"
            } else {
                "one after another (pairs measuring at once are limited)"
            }
        );
        if self.side_by_side {
            let mut out: Vec<(u32, Vec<u8>)> = Vec::new();
            for (&l, job) in leaders.iter().zip(jobs) {
                if l as u32 != self.me {
                    out.push((l as u32, encode(job)?));
                }
            }
            let mut reqs = send_parts(self.comm, &out)?;
            for (i, (&l, job)) in leaders.iter().zip(jobs).enumerate() {
                if l as u32 == self.me {
                    replies[i] = Some(self.own_part(job, work));
                }
            }
            for (i, &l) in leaders.iter().enumerate() {
                if l as u32 != self.me {
                    replies[i] = Some(fetch(l)?);
                }
            }
            raw::wait_all(&mut reqs)?;
        } else {
            for (i, (&l, job)) in leaders.iter().zip(jobs).enumerate() {
                replies[i] = Some(if l as u32 == self.me {
                    self.own_part(job, work)
                } else {
                    let msg = [(l as u32, encode(job)?)];
                    let mut reqs = send_parts(self.comm, &msg)?;
                    let r = fetch(l)?;
                    raw::wait_all(&mut reqs)?;
                    r
                });
            }
        }
        let mut outcomes = Vec::with_capacity(jobs.len());
        let mut measure: Vec<f64> = Vec::with_capacity(jobs.len());
        for (reply, &l) in replies.into_iter().zip(leaders) {
            let (out, stats, seen) = reply
                .expect("every part replied")
                .map_err(|e| other(format!("far-apart part led by host {l}: {e}")))?;
            self.ledger.absorb(&stats, &seen);
            measure.push(stats.measure_time_s);
            outcomes.push(out);
        }
        // Wall-clock time: measuring is the slowest part's (side by side) or all of them.
        let measure_s = if self.side_by_side {
            measure.iter().copied().fold(0.0, f64::max)
        } else {
            measure.iter().sum()
        };
        let wall = raw::wtime() - t0;
        self.ledger.add_time(measure_s, (wall - measure_s).max(0.0));
        Ok(outcomes)
    }
}

impl Prober for MpiProber<'_> {
    fn num_hosts(&self) -> usize {
        self.n as usize
    }

    fn host_name(&self, h: usize) -> &str {
        &self.names[h]
    }

    fn ping_round(
        &mut self,
        pairs: &[(usize, usize)],
        spec: &PingSpec,
    ) -> std::result::Result<Vec<PairMeasurement>, ProbeError> {
        check_round(self.n as usize, pairs)?;
        let t0 = raw::wtime();
        // One set at a time over all pairs (see the module doc), merged per pair afterwards.
        let (windows, per_window) = self.schedule.windows(spec);
        let mut out: Vec<PairMeasurement> = pairs.iter().map(|&(a, b)| PairMeasurement::empty(a, b)).collect();
        let mut measure = 0.0;
        for _ in 0..windows {
            // A far pair's one round trip is its whole measurement (PingSpec::far_s).
            let open: Vec<usize> = (0..pairs.len()).filter(|&i| !spec.ended_far(&out[i])).collect();
            if open.is_empty() {
                break;
            }
            let set_pairs: Vec<(usize, usize)> = open.iter().map(|&i| pairs[i]).collect();
            let blobs = self.rounds(&set_pairs, |pair, total| Round::Ping {
                spec: per_window,
                pair,
                total,
            })?;
            let mut this_set = Vec::with_capacity(set_pairs.len());
            for &(a, b) in &set_pairs {
                let m = decode_measurement(&blobs[a], a, b)?;
                this_set.push(m);
            }
            // Sub-rounds run one after another; within one, the slowest pair decides.
            measure += this_set
                .chunks(self.max_pairs.max(1))
                .map(|c| c.iter().map(PairMeasurement::duration_s).fold(0.0, f64::max))
                .sum::<f64>();
            for (&i, m) in open.iter().zip(this_set) {
                out[i].append(m);
            }
        }
        let wall = raw::wtime() - t0;
        self.ledger.ping_round(pairs, measure, (wall - measure).max(0.0));
        Ok(out)
    }

    fn bandwidth_round(&mut self, pairs: &[(usize, usize)], bytes: u64) -> std::result::Result<Vec<f64>, ProbeError> {
        check_round(self.n as usize, pairs)?;
        let t0 = raw::wtime();
        let blobs = self.rounds(pairs, |pair, total| Round::Bandwidth { bytes, pair, total })?;
        let wall = raw::wtime() - t0;
        let mut rates = Vec::with_capacity(pairs.len());
        for &(a, b) in pairs {
            let r: f64 = postcard::from_bytes(&blobs[a])
                .map_err(|e| ProbeError::Transport(format!("unreadable bandwidth from host {a}: {e}")))?;
            if !(r.is_finite() && r > 0.0) {
                return Err(ProbeError::Transport(format!(
                    "host {a} measured an invalid bandwidth {r} to host {b}"
                )));
            }
            rates.push(r);
        }
        let measure: f64 = pairs
            .iter()
            .zip(&rates)
            .map(|(_, r)| bytes as f64 / r)
            .fold(0.0, f64::max);
        self.ledger
            .bandwidth_round(pairs.len(), measure, (wall - measure).max(0.0));
        Ok(rates)
    }

    fn stats(&self) -> &ProbeStats {
        self.ledger.stats()
    }

    fn run_parts(
        &mut self,
        leaders: &[usize],
        jobs: &[Vec<u8>],
        work: crate::probe::PartWork,
    ) -> Option<std::result::Result<Vec<Vec<u8>>, ProbeError>> {
        if leaders.len() != jobs.len() || leaders.iter().any(|&l| l >= self.n as usize) {
            return Some(Err(ProbeError::BadRequest(format!(
                "{} part leaders for {} jobs, or a leader beyond the {} hosts",
                leaders.len(),
                jobs.len(),
                self.n
            ))));
        }
        Some(
            self.parts(leaders, jobs, work)
                .map_err(|e| ProbeError::Transport(e.to_string())),
        )
    }
}

/// Host `a`'s encoded measurement of pair `(a, b)`, checked.
fn decode_measurement(blob: &[u8], a: usize, b: usize) -> std::result::Result<PairMeasurement, ProbeError> {
    let m: PairMeasurement = postcard::from_bytes(blob)
        .map_err(|e| ProbeError::Transport(format!("unreadable measurement from host {a}: {e}")))?;
    if m.a != a || m.b != b {
        return Err(ProbeError::Transport(format!(
            "host {a} answered for pair ({}, {}) instead of ({a}, {b})",
            m.a, m.b
        )));
    }
    // No sample is an answer only when the first round trip was given up (`first_give_up_s`):
    // then the wait is what the measurement took.
    let given_up = m.waited_s.is_finite() && m.waited_s > 0.0;
    if !(m.waited_s.is_finite() && m.waited_s >= 0.0)
        || (m.samples_s.is_empty() && !given_up)
        || m.samples_s.iter().any(|s| !s.is_finite() || *s < 0.0)
    {
        return Err(ProbeError::Transport(format!(
            "host {a} measured no RTT, or a negative or non-finite one, to host {b}"
        )));
    }
    Ok(m)
}

/// Collective over `comm`: host leaders probe and rank 0 infers the host-level tree; every
/// other rank waits politely. The tree is returned on rank 0 only (the others get an error that
/// [`super::discovery::acquire`] ignores, since rank 0 broadcasts its outcome).
/// `comm` is our duplicate communicator.
pub fn probe_and_infer(comm: MPI_Comm, rank: u32, hosts: &Hosts, cfg: &Config) -> Result<Topology> {
    let leader_index = hosts.leaders.iter().position(|&l| l == rank);
    // Host h's leader must get rank h among the leaders (split keyed by communicator rank).
    debug_assert!(hosts.leaders.windows(2).all(|w| w[0] < w[1]));
    let mut leaders = raw::comm_split(comm, leader_index.map(|_| 0), rank as c_int)?;
    let result = match leader_index {
        Some(me) => {
            let n = hosts.count() as u32;
            // Late pongs are received first (MPICH aborts the job when a communicator with
            // unmatched messages is freed); after a failure they may never come, and the
            // communicator is then left as it is.
            let r = if me == 0 {
                coordinate(leaders, n, hosts, cfg).and_then(|t| drain_late_pongs(leaders).map(|()| t))
            } else {
                match serve(leaders, me as u32, n, &hosts.names).and_then(|()| drain_late_pongs(leaders)) {
                    Ok(()) => Err(other("the topology is inferred on rank 0")),
                    Err(e) => {
                        log::warn!("treecast: probing on host {me} failed: {e}");
                        Err(e)
                    }
                }
            };
            if late_pongs_pending() {
                log::warn!("treecast: probing ended with late pongs unreceived; its communicator is not freed");
            } else {
                raw::comm_free(&mut leaders);
            }
            r
        }
        None => Err(other("not a host leader")),
    };
    // Everyone meets again; non-leaders have been waiting here politely all along.
    let mut req = raw::ibarrier(comm)?;
    wait_politely(&mut req)?;
    result
}

/// How many pairs may measure at once: unlimited on distinct machines; where several hosts run
/// on one kernel they share its CPUs, and each measuring pair needs two of them.
fn concurrent_pairs(kernels: &[KernelInfo]) -> Option<usize> {
    let mut limit: Option<usize> = None;
    for (i, k) in kernels.iter().enumerate() {
        if k.boot_id == 0 {
            continue;
        }
        let sharing = kernels.iter().filter(|o| o.boot_id == k.boot_id).count();
        if sharing > 1 && kernels[..i].iter().all(|o| o.boot_id != k.boot_id) {
            let here = (k.cpus as usize / 2).max(1);
            limit = Some(limit.map_or(here, |l| l.min(here)));
        }
    }
    limit
}

/// Every leader's [`KernelInfo`], on the coordinator (leaders' communicator, waited for politely).
fn gather_kernels(comm: MPI_Comm, me: u32, n: u32) -> Result<Vec<KernelInfo>> {
    let mine = postcard::to_stdvec(&kernel_info()).map_err(other)?;
    let blobs = gather_results(comm, me, n, &mine)?;
    blobs
        .iter()
        .map(|b| postcard::from_bytes(b).map_err(|e| other(format!("unreadable kernel info: {e}"))))
        .collect()
}

/// Leader 0: run inference over the MPI prober, then end the other leaders' loops.
fn coordinate(leaders: MPI_Comm, n: u32, hosts: &Hosts, cfg: &Config) -> Result<Topology> {
    let kernels = gather_kernels(leaders, 0, n)?;
    let shared = concurrent_pairs(&kernels);
    let max_pairs = match (cfg.probe_pairs, shared) {
        (Some(k), _) => k,
        (None, Some(k)) => {
            log::info!(
                "treecast: {n} hosts run on {} kernel(s) (emulated hosts share CPUs): at most {k} pair(s) measure at once",
                distinct_kernels(&kernels)
            );
            k
        }
        (None, None) => usize::MAX,
    };
    let mut p = MpiProber {
        comm: leaders,
        n,
        me: 0,
        names: &hosts.names,
        max_pairs,
        side_by_side: parts_side_by_side(max_pairs, cfg),
        // Hosts sharing a kernel interleave sets; distinct machines measure them back to back.
        schedule: cfg.probe_sets.unwrap_or(if shared.is_some() {
            SetSchedule::Interleaved
        } else {
            SetSchedule::BackToBack
        }),
        ledger: ProbeLedger::new(n as usize),
    };
    let opts = InferOptions {
        bandwidth_bytes: cfg.probe_bandwidth_bytes,
        far_rtt_s: cfg.far_rtt_s,
        led_part_min_hosts: cfg.led_part_min_hosts,
        ping: crate::probe::PingSpec {
            give_up_s: cfg.probe_give_up_s,
            give_up_ratio: cfg.probe_give_up_ratio,
            ..crate::probe::PingSpec::default()
        },
        resolution_of_host_link: if shared.is_some() {
            infer::SHARED_CPU_RESOLUTION
        } else {
            0.0
        },
        ..InferOptions::default()
    };
    let t0 = raw::wtime();
    let inferred = infer::infer(&mut p, &opts);
    // Always end the serve loop, also after a failure.
    let done = p.finish();
    let inferred = inferred.map_err(|e| other(format!("inference failed: {e}")))?;
    done?;
    if let Some(path) = &cfg.probe_dump {
        let dump = crate::probe::ProbeDump::new(hosts.names.clone(), inferred.measurements.clone(), opts.recorded());
        match std::fs::write(path, dump.to_json()) {
            Ok(()) => log::info!("treecast: probe measurements written to {path}"),
            Err(e) => log::warn!("treecast: cannot write the probe dump {path}: {e}"),
        }
    }
    let s = &inferred.stats.probe;
    log::info!(
        "treecast: probed {n} hosts in {:.3} s: {} ping rounds, {} pairs ({:.1}% of all), {} bandwidth rounds; \
         {} remeasured, {} dropped, {} given up on a stalled round trip, {} relocated, {} merged switches",
        raw::wtime() - t0,
        s.ping_rounds,
        s.distinct_pairs,
        100.0 * s.pairs_measured_fraction(),
        s.bandwidth_rounds,
        inferred.stats.remeasured,
        inferred.stats.dropped,
        inferred.stats.given_up,
        inferred.stats.relocated,
        inferred.stats.merged,
    );
    Ok(inferred.topology)
}

fn distinct_kernels(kernels: &[KernelInfo]) -> usize {
    let mut ids: Vec<u64> = kernels.iter().map(|k| k.boot_id).collect();
    ids.sort_unstable();
    ids.dedup();
    ids.len()
}

/// Most hosts whose leaders take part in the ring measurement ([`ring_hop_s`]): the per-hop
/// cost is a local property, and a lap over thousands of hosts would cost seconds.
const RING_HOSTS: usize = 32;
/// Untimed laps (connections are opened lazily) and timed laps of the ring.
const RING_WARMUP: usize = 5;
const RING_LAPS: usize = 30;
/// Tag of the ring's token on the private communicator (no broadcast is in flight meanwhile).
const TAG_RING: c_int = 6;
/// Tag of a ring member's kernel and CPU mask, sent to the first member before the laps.
const TAG_RING_KERNEL: c_int = 10;

/// Tokens of the ring's train: long enough that its lap grows by a steady step per token.
const TRAIN_TOKENS: usize = 8;
/// Untimed and timed laps of the train.
const TRAIN_WARMUP: usize = 2;
const TRAIN_LAPS: usize = 15;

/// What the token ring measured ([`ring`]), on the ring's first member (rank 0).
#[derive(Clone, Debug, PartialEq)]
pub struct Ring {
    /// Median time of one hop of a lone 8-byte token (s).
    pub hop_s: f64,
    /// Median growth of a lap per extra token when [`TRAIN_TOKENS`] leave back to back (s): at
    /// that rate the ring passes tokens that reach relays still busy with the previous one, so
    /// no relay is woken up for them. At least 0. The least over the train's passes
    /// ([`ring_train_again`]).
    pub train_step_s: f64,
    /// Each pass's step (s), in order, for the log.
    pub train_passes_s: Vec<f64>,
    /// Most ring members per CPU on any one kernel, at least 1. Hosts emulated on one machine
    /// share its CPUs, so the train's step there is their shared CPU time per token: the
    /// members' CPU time per message is the step over this.
    pub members_per_cpu: f64,
    /// The hosts' leaders in the ring, in order.
    pub members: Vec<u32>,
}

/// Collective over `comm`: an 8-byte token passed around the leaders of the first (up to
/// [`RING_HOSTS`]) hosts, in host order, alone and then as a train ([`Ring`]). Returned on
/// rank 0 only (`None` elsewhere, or with fewer than two hosts); every other rank waits
/// politely.
///
/// Why: a relayed small message costs more than the link latency that ping-pong measures
/// whenever the relay must first be woken up and scheduled — a little on a real cluster, tens
/// of microseconds on hosts emulated on a few shared cores. A token ring is a chain of exactly
/// such relays, so what a hop costs beyond its path's latency is the per-message overhead the
/// planner should charge (`PlanOptions::message_overhead_s`). A pipeline's later segments reach
/// relays that are still awake, which the lone token never does; the train measures them.
/// `comm` is our duplicate communicator; every rank calls this collectively.
///
/// `train` (the same on every rank): also run the train and collect the members' kernels,
/// which only calibrated predictions use; without it the step reads 0 and the members one
/// per CPU.
pub fn ring(comm: MPI_Comm, rank: u32, hosts: &Hosts, train: bool) -> Result<Option<Ring>> {
    let k = hosts.count().min(RING_HOSTS);
    let members: Vec<u32> = hosts.leaders[..k].to_vec();
    let mut out = None;
    if let (true, Some(i)) = (k >= 2, members.iter().position(|&l| l == rank)) {
        let (next, prev) = (members[(i + 1) % k] as c_int, members[(i + k - 1) % k] as c_int);
        let kernels = if train {
            ring_kernels(comm, i, &members)?
        } else {
            Vec::new()
        };
        let mut buf = [0u8; 8];
        let mut laps = Vec::with_capacity(RING_LAPS);
        for lap in 0..RING_WARMUP + RING_LAPS {
            if i == 0 {
                let t0 = raw::wtime();
                send(comm, next, &buf, 8, TAG_RING)?;
                recv(comm, prev, &mut buf, Some(TAG_RING))?;
                if lap >= RING_WARMUP {
                    laps.push(raw::wtime() - t0);
                }
            } else {
                recv(comm, prev, &mut buf, Some(TAG_RING))?;
                send(comm, next, &buf, 8, TAG_RING)?;
            }
        }
        let mut trains = if train {
            train_laps(comm, i == 0, next, prev)?
        } else {
            Vec::new()
        };
        if i == 0 {
            let lap = median(&mut laps);
            let step = match trains.is_empty() {
                true => 0.0,
                false => train_step(&mut trains, lap),
            };
            out = Some(Ring {
                hop_s: lap / k as f64,
                train_step_s: step,
                train_passes_s: if trains.is_empty() { Vec::new() } else { vec![step] },
                members_per_cpu: members_per_cpu(&kernels),
                members: members.clone(),
            });
        }
    }
    let mut req = raw::ibarrier(comm)?;
    wait_politely(&mut req)?;
    Ok(out)
}

/// Collective over `comm`, after [`ring`] with `train` on every rank: the train once more, and
/// on rank 0 `ring`'s step lowered to this pass's where it is lower.
///
/// Why: one pass is a few tens of milliseconds, and a host's state can slow it for as long. On
/// the emulated 3x3 cluster one job in about sixty read a step of 538 us where the others
/// read 98-188 us, its calls then ran like the others' and every size from 1 KiB to 256 KiB
/// was predicted 27-148% slow. Run later in the set-up (after the burst probe), a second pass
/// rarely meets the same state; where both passes read slow, the host was slow at both times
/// and the step stays slow.
pub fn ring_train_again(comm: MPI_Comm, rank: u32, hosts: &Hosts, ring: &mut Option<Ring>) -> Result<()> {
    let k = hosts.count().min(RING_HOSTS);
    let members = &hosts.leaders[..k];
    if let (true, Some(i)) = (k >= 2, members.iter().position(|&l| l == rank)) {
        let (next, prev) = (members[(i + 1) % k] as c_int, members[(i + k - 1) % k] as c_int);
        let mut trains = train_laps(comm, i == 0, next, prev)?;
        if let (0, Some(r)) = (i, ring.as_mut()) {
            let step = train_step(&mut trains, r.hop_s * k as f64);
            r.train_passes_s.push(step);
            r.train_step_s = r.train_step_s.min(step);
        }
    }
    let mut req = raw::ibarrier(comm)?;
    wait_politely(&mut req)
}

/// A train pass's step (s): how much its median lap (`trains`) exceeds a lone token's `lap`,
/// per extra token; at least 0.
fn train_step(trains: &mut [f64], lap: f64) -> f64 {
    ((median(trains) - lap) / (TRAIN_TOKENS - 1) as f64).max(0.0)
}

/// Laps of a train of [`TRAIN_TOKENS`] tokens: the first member sends them back to back and
/// times their return; every other member forwards each as it comes. Timed laps on the first
/// member (empty elsewhere).
fn train_laps(comm: MPI_Comm, first: bool, next: c_int, prev: c_int) -> Result<Vec<f64>> {
    let token = [0u8; 8];
    let mut inbox = [0u8; 8];
    let mut laps = Vec::with_capacity(TRAIN_LAPS);
    for lap in 0..TRAIN_WARMUP + TRAIN_LAPS {
        let t0 = raw::wtime();
        let mut reqs = Vec::with_capacity(TRAIN_TOKENS);
        for _ in 0..TRAIN_TOKENS {
            if !first {
                recv(comm, prev, &mut inbox, Some(TAG_RING))?;
            }
            // SAFETY: `token` is never written and outlives the wait below.
            reqs.push(unsafe { raw::isend_bytes(token.as_ptr(), 8, next, TAG_RING, comm)? });
        }
        if first {
            for _ in 0..TRAIN_TOKENS {
                recv(comm, prev, &mut inbox, Some(TAG_RING))?;
            }
        }
        raw::wait_all(&mut reqs)?;
        if first && lap >= TRAIN_WARMUP {
            laps.push(raw::wtime() - t0);
        }
    }
    Ok(laps)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The ring members' kernels and CPU masks, on the first member (`i == 0`; empty elsewhere):
/// each other member sends its own.
fn ring_kernels(comm: MPI_Comm, i: usize, members: &[u32]) -> Result<Vec<(u64, Vec<u64>)>> {
    let mine = crate::host::kernel_words();
    if i != 0 {
        raw::send(&mine, members[0] as c_int, TAG_RING_KERNEL, comm)?;
        return Ok(Vec::new());
    }
    let mut out = vec![crate::host::from_kernel_words(&mine)];
    let mut theirs = vec![0i64; mine.len()];
    for &m in &members[1..] {
        raw::recv(&mut theirs, m as c_int, TAG_RING_KERNEL, comm)?;
        out.push(crate::host::from_kernel_words(&theirs));
    }
    Ok(out)
}

/// Most members per CPU on any one kernel (its members' CPU masks united), at least 1. An
/// unknown kernel (boot id 0) or mask counts as a machine of its own.
fn members_per_cpu(kernels: &[(u64, Vec<u64>)]) -> f64 {
    crate::host::kernel_groups(kernels.iter().map(|(b, m)| (*b, m.as_slice())))
        .iter()
        .map(|g| g.members.len() as f64 / g.cpus as f64)
        .fold(1.0, f64::max)
}

/// Leaders 1..n: take part in rounds until leader 0 says done. Rounds come from leader 0, or
/// from the leader of this host's far-apart part while that part is inferred; results go back
/// to whoever sent the round. Asked to lead a part, this leader coordinates it
/// ([`infer::part_work`]) and sends the outcome back.
fn serve(leaders: MPI_Comm, me: u32, n: u32, names: &[String]) -> Result<()> {
    gather_kernels(leaders, me, n)?;
    loop {
        let (msg, from) = recv_message_from(leaders, raw::any_source(), TAG_ROUND)?;
        let round: Round = postcard::from_bytes(&msg).map_err(|e| other(format!("unreadable probe round: {e}")))?;
        match round {
            Round::Done => return Ok(()),
            Round::Part {
                job,
                max_pairs,
                schedule,
            } => {
                let mut p = MpiProber {
                    comm: leaders,
                    n,
                    me,
                    names,
                    max_pairs: max_pairs.min(usize::MAX as u64) as usize,
                    schedule,
                    // A part has no parts of its own.
                    side_by_side: false,
                    ledger: ProbeLedger::new(n as usize),
                };
                let reply: PartReply = infer::part_work(&mut p, &job)
                    .map(|out| (out, p.ledger.stats().clone(), p.ledger.seen_pairs()))
                    .map_err(|e| e.to_string());
                if let Err(e) = &reply {
                    log::warn!("treecast: the far-apart part led by host {me} failed: {e}");
                }
                let bytes = postcard::to_stdvec(&reply).map_err(other)?;
                send(leaders, from, &bytes, bytes.len() as u64, TAG_PART)?;
            }
            round => {
                let mine = run_round(leaders, me, &round)?;
                if !mine.is_empty() {
                    send(leaders, from, &mine, mine.len() as u64, TAG_RESULT)?;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(boot_id: u64, cpus: u32) -> KernelInfo {
        KernelInfo { boot_id, cpus }
    }

    /// Nine emulated hosts on one 2-CPU kernel are 4.5 members per CPU whether each rank may
    /// run on both CPUs or is bound to one; distinct machines and unknown kernels count 1.
    #[test]
    fn members_per_cpu_unites_a_kernels_masks() {
        let both = |boot: u64| (boot, vec![0b11u64]);
        assert_eq!(members_per_cpu(&vec![both(7); 9]), 4.5);
        let bound: Vec<(u64, Vec<u64>)> = (0..9).map(|i| (7, vec![1u64 << (i % 2)])).collect();
        assert_eq!(members_per_cpu(&bound), 4.5);
        assert_eq!(members_per_cpu(&[both(1), both(2), both(3)]), 1.0);
        assert_eq!(members_per_cpu(&[(0, vec![1]), (0, vec![1]), (0, vec![1])]), 1.0);
        // An unknown mask (none read) counts as no information, not as zero CPUs.
        assert_eq!(members_per_cpu(&[(5, vec![]), (5, vec![])]), 1.0);
        // The most crowded kernel decides: 4 members on 2 CPUs beside 2 on 8.
        let mut mixed = vec![(1, vec![0b11u64]); 4];
        mixed.extend(vec![(2, vec![0xffu64]); 2]);
        assert_eq!(members_per_cpu(&mixed), 2.0);
    }

    #[test]
    fn distinct_machines_measure_whole_rounds() {
        assert_eq!(concurrent_pairs(&[k(1, 2), k(2, 2), k(3, 64)]), None);
        // Unknown kernels (0) are never taken as shared.
        assert_eq!(concurrent_pairs(&[k(0, 2), k(0, 2)]), None);
    }

    #[test]
    fn hosts_on_one_kernel_share_its_cpus() {
        assert_eq!(concurrent_pairs(&[k(7, 2); 9]), Some(1));
        assert_eq!(concurrent_pairs(&[k(7, 1); 3]), Some(1));
        assert_eq!(concurrent_pairs(&[k(7, 16); 4]), Some(8));
        // The most constrained shared kernel decides.
        assert_eq!(
            concurrent_pairs(&[k(7, 16), k(7, 16), k(8, 4), k(8, 4), k(9, 2)]),
            Some(2)
        );
        assert_eq!(distinct_kernels(&[k(7, 16), k(7, 16), k(8, 4)]), 2);
    }

    #[test]
    fn a_measurement_without_samples_is_garbage_unless_given_up() {
        let blob = |samples: Vec<f64>, waited_s: f64| {
            let m = PairMeasurement {
                a: 1,
                b: 7,
                set_len: if samples.is_empty() {
                    vec![]
                } else {
                    vec![samples.len() as u32]
                },
                samples_s: samples,
                waited_s,
            };
            postcard::to_stdvec(&m).unwrap()
        };
        assert!(decode_measurement(&blob(vec![30e-6], 0.0), 1, 7).is_ok());
        // Its first round trip given up (`PingSpec::first_give_up_s`): an answer.
        let m = decode_measurement(&blob(vec![], 10e-3), 1, 7).unwrap();
        assert!(m.samples_s.is_empty());
        for (samples, waited) in [
            (vec![], 0.0),
            (vec![], f64::NAN),
            (vec![-1e-6], 0.0),
            (vec![30e-6], -1.0),
        ] {
            let e = decode_measurement(&blob(samples.clone(), waited), 1, 7)
                .unwrap_err()
                .to_string();
            assert!(e.contains("host 1 measured no RTT"), "{samples:?} {waited}: {e}");
        }
        assert!(
            decode_measurement(&blob(vec![30e-6], 0.0), 2, 7).is_err(),
            "another pair's answer"
        );
    }
}
